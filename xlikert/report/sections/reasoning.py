"""Section "Reasoning traces": trace-sampling SEs beside the numbers; thinking on vs off.

Only for results with sampled traces (``trace_pmf``, models in reasoning mode).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from ...analysis.constraint import failure_rate
from ...analysis.construct import composite, decompose, summarize, summary_table
from ...analysis.traces import trace_se
from ...core.dims import MODEL_DIM
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["reasoning_section"]


def reasoning_section(inputs: ReportInputs) -> Section | None:
    """The trace summary per reasoning model, the composite and the effects with their
    jackknife SEs, and the comparison with thinking off; ``None`` without traces."""
    ds = inputs.ds
    if "trace_pmf" not in ds or not bool(ds["trace_pmf"].notnull().any()):
        return None
    s = Section("Reasoning traces: sampling error and thinking off")
    has = ds["trace_pmf"].notnull().all("score")
    n_traces = has.sum("trace")
    on = [str(v) for v in ds[MODEL_DIM].values] if MODEL_DIM in ds.dims else []
    on = [m for m in on if int(n_traces.sel({MODEL_DIM: m}).max()) > 0]
    if not on:  # traces without a model dim: not a file collect wrote
        s.text(f"The file holds traces but no `{MODEL_DIM}` dim: no per-model trace summary.")
        return s
    s.text(
        "Models in reasoning mode sample their thought before the answer: `pmf` is the mean over "
        "M sampled traces of the exact answer PMF after each, so it carries Monte Carlo error "
        "from the traces alone (the answers are not sampled). Every number in the sections above "
        "is computed from `pmf` as for any model; the standard errors below are the delete-one "
        "jackknife over traces (`xl.trace_se`), exact for linear summaries such as E; models "
        "without traces are exact (SE 0). "
        + "; ".join(_trace_line(ds, m, has, n_traces) for m in on)
        + "."
    )
    counts = sorted({int(v) for v in np.unique(n_traces.values)} - {0})
    _composite_table(s, inputs, on, counts)
    _effects_table(s, inputs, counts)
    _thinking_off(s, inputs, on)
    return s


def _trace_line(ds: xr.Dataset, m: str, has: xr.DataArray, n_traces: xr.DataArray) -> str:
    """One reasoning model's traces: count, format, truncation, length, valid mass."""
    cell = ds.sel({MODEL_DIM: m})
    keep = has.sel({MODEL_DIM: m})
    infos = ds.attrs.get("models") or {}
    info = infos.get(m, {}) if isinstance(infos.get(m), dict) else {}
    fmt = info.get("reasoning_format", {})
    trunc = (
        float((cell["trace_truncated"] == 1).where(keep).mean())
        if "trace_truncated" in ds
        else np.nan
    )
    length = float(cell["trace_length"].where(keep).mean()) if "trace_length" in ds else np.nan
    return (
        f"**{md(m)}**: M = {int(n_traces.sel({MODEL_DIM: m}).max())} traces per prompt "
        f"({md(fmt.get('framing', '?'))} framing, end marker "
        f"{md_code(fmt.get('end_marker', '?'))}); "
        f"{100 * trunc:.0f}% cut at max_new_tokens, {length:.0f} tokens on average; valid "
        f"mass after the trace {float(cell['trace_valid_mass'].where(keep).mean()):.3f}"
    )


def _composite_summary(p: xr.DataArray) -> xr.Dataset:
    return summarize(composite(p), dim="score")[["E", "SD"]]


def _composite_table(s: Section, inputs: ReportInputs, on: list[str], counts: list[int]) -> None:
    """E and SD of the composite per condition with their jackknife SEs (reasoning models)."""
    ds = inputs.ds
    groups = [ds] if len(counts) == 1 else [ds.sel({MODEL_DIM: [m]}) for m in on]
    rows = []
    for g in groups:
        est = _composite_summary(g["pmf"])
        se = trace_se(g, _composite_summary)
        frame = est.to_dataframe()[["E", "SD"]].join(
            se.to_dataframe()[["E", "SD"]].rename(columns={"E": "SE(E)", "SD": "SE(SD)"})
        )
        rows.append(frame[["E", "SE(E)", "SD", "SE(SD)"]].reset_index())
    comp = pd.concat(rows, ignore_index=True)
    if MODEL_DIM in comp:
        comp = comp[comp[MODEL_DIM].astype(str).isin(on)]
    s.table(
        comp,
        inputs.out,
        "reasoning_composite",
        "Composite score of the reasoning models per condition: E and SD of the composite "
        "with their trace-sampling standard errors.",
        digits=3,
        index=False,
    )


def _effects_table(s: Section, inputs: ReportInputs, counts: list[int]) -> None:
    """The effects of the Construct section with their jackknife SEs (one trace count only)."""
    if len(counts) != 1:
        s.text(
            "The reasoning models sampled different numbers of traces, so the effects that mix "
            f"models get no jackknife SE here (traces per prompt: {counts}); the composite table "
            "above gives each model's own."
        )
        return
    summ = inputs.effects
    se_tab = trace_se(inputs.ds, lambda p: summary_table(decompose(p)))
    eff = summ[["term", "level"]].copy()
    for c in ("E", "SD", "SNR", "dPD"):
        eff[c] = summ[c]
        eff[f"SE({c})"] = se_tab[c]
    s.table(
        eff,
        inputs.out,
        "reasoning_effects",
        "Grand mean, main effects and interactions (as above) with their trace-sampling "
        "standard errors (jackknife over traces).",
        digits=3,
        index=False,
    )


def _thinking_off(s: Section, inputs: ReportInputs, on: list[str]) -> None:
    """Thinking on vs off: each reasoning model beside an entry of the same source without."""
    ds = inputs.ds
    infos = ds.attrs.get("models") or {}
    sources = {str(m): str(i.get("source")) for m, i in infos.items() if isinstance(i, dict)}
    off = [m for m in (str(v) for v in ds[MODEL_DIM].values) if m not in on]
    pairs = [(a, b) for a in on for b in off if sources.get(a) and sources.get(a) == sources.get(b)]
    if not pairs:
        s.text(
            "No entry of the same model without reasoning in this file: add one (the same "
            "`source`, no `reasoning`) to compare with thinking off."
        )
        return
    other = [f for f in inputs.factors if f != MODEL_DIM]
    s.table(
        pd.concat([_on_off_rows(ds, a, b, other) for a, b in pairs], ignore_index=True),
        inputs.out,
        "reasoning_vs_thinking_off",
        "Thinking on vs thinking off (an entry of the same source without reasoning): "
        "composite mean per condition, the reasoning estimate's SE, and the failure rate "
        "(after the trace, with thinking on).",
        digits=3,
        index=False,
    )


def _on_off_rows(ds: xr.Dataset, a: str, b: str, other: list[Hashable]) -> pd.DataFrame:
    """Composite mean, its SE and the failure rate of model ``a`` (on) and ``b`` (off)."""
    ga, gb = ds.sel({MODEL_DIM: [a]}), ds.sel({MODEL_DIM: b})
    ea = _composite_summary(ga["pmf"]).isel({MODEL_DIM: 0})
    se = trace_se(ga, _composite_summary).isel({MODEL_DIM: 0})
    eb = _composite_summary(gb["pmf"])
    fa = failure_rate(ga).isel({MODEL_DIM: 0}).mean("item")
    fb = failure_rate(gb).mean("item")
    frame = pd.DataFrame(
        {
            "reasoning": a,
            "thinking off": b,
            "E off": eb["E"].values.ravel(),
            "E on": ea["E"].values.ravel(),
            "SE(E on)": se["E"].values.ravel(),
            "E on − off": (ea["E"] - eb["E"]).values.ravel(),
            "failure off": fb.values.ravel(),
            "failure on": fa.values.ravel(),
        }
    )
    if other:
        idx = eb["E"].to_dataframe().reset_index()[other]
        frame = pd.concat([idx, frame], axis=1)
    return frame
