"""Section "Design": the results file, the factors and their levels, how items are scored."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...analysis.support import nominal_items, support_bounds
from ...core.dims import ELICITATION_DIM, SUBSCALE_DIM
from ..inputs import ReportInputs, answer_tol_note
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["design_section"]


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def _all(n: int) -> str:
    """What the composite sums: "the sum of all 17 items", or "the one item"."""
    return "the one item" if n == 1 else f"the sum of all {n} items"


def design_section(inputs: ReportInputs) -> Section:
    """What was measured: conditions, items, scores, factors (varying and constant), scoring."""
    pmf = inputs.all_pmf
    s = Section("Design")
    s.text(
        f"Results: {md_code(inputs.source)}. {int(np.prod([pmf.sizes[f] for f in inputs.factors]))} "
        f"conditions × {_items(pmf.sizes.get('item', 1))} on scores "
        f"{int(pmf.score.min())}..{int(pmf.score.max())}; "
        f"{int(pmf.notnull().any('score').sum())} exact item PMFs"
        + _without_pmf(pmf)
        + (
            " (those of the models in reasoning mode are means over sampled thoughts of exact "
            "PMFs: see the section on reasoning traces)."
            if "trace_pmf" in inputs.ds
            else "."
        )
    )
    short = answer_tol_note(inputs.ds)
    if short:  # word answers whose walk spent its budget first
        s.text("**Word answers read within a bound.** " + short)
    if inputs.varying:
        s.text(
            "Factors: "
            + "; ".join(
                f"**{md(f)}** ({pmf.sizes[f]}): "
                + ", ".join(md(v) for v in pmf[f].values[:12])
                + (" …" if pmf.sizes[f] > 12 else "")
                for f in inputs.varying
            )
        )
    if inputs.constant:
        s.text(
            "Held constant (one level, so no effect is estimated): "
            + "; ".join(f"**{md(f)}** = {md(pmf[f].values[0])}" for f in inputs.constant)
            + "."
        )
    if inputs.ds.attrs.get("synthetic"):
        s.text("**SYNTHETIC DATA**: these results are random PMFs, no model was run.")
    for line in _item_scale_lines(pmf):
        s.text(line)
    if inputs.no_composite:
        s.text(_no_composite_note(inputs.no_composite))
        return s
    for line in _scoring_lines(inputs.pmf):
        s.text(line)
    return s


def _no_composite_note(why: str) -> str:
    """What the report leaves out where the instrument defines no composite, and why."""
    return (
        f"No composite: {md(why)}. Composite scores, their distributional ANOVA, "
        "reliability and sampling cost are not reported; the per-item sections (failure "
        "rate, Consensus per item, alignment with respondents) stand alone. Give the items "
        "a subscale in the instrument to score them together."
    )


def _item_scale_lines(pmf: xr.DataArray) -> list[str]:
    """Each item's own scale where the items have their own, and the nominal items
    (Markdown, item ids escaped); nothing for a file of one scale."""
    if "item" not in pmf.coords:
        return []
    ids = [md(i) for i in pmf["item"].values]
    lines = []
    lo, hi = (np.broadcast_to(b.values, len(ids)) for b in support_bounds(pmf))
    if len({*lo}) > 1 or len({*hi}) > 1:
        lines.append(
            "Each item has its own scale: "
            + "; ".join(f"{i} {a}..{b}" for i, a, b in zip(ids, lo, hi, strict=True))
            + ". Tastle Consensus, representativeness (K − 1) and the reflection of "
            "reverse-keyed items use each item's own scale."
        )
    nominal = nominal_items(pmf)
    if nominal:
        lines.append(
            f"Nominal items (options without an order): {', '.join(md(i) for i in nominal)}. "
            "They enter the failure rate, entropy and the alignment's total variation and "
            "Jensen–Shannon divergence; Consensus, composites, effects, reliability, W1 and "
            "representativeness need an order and leave them out."
        )
    return lines


def _weights_line(pmf: xr.DataArray, ids: list[str]) -> str | None:
    """What a sum of items with unequal ranges weighs, or None when the ranges are equal."""
    lo, hi = (np.broadcast_to(b.values, len(ids)) for b in support_bounds(pmf))
    width = hi - lo
    if len({*width}) < 2:
        return None
    share = width / width.sum()
    return (
        "The items' ranges differ, so the composite (an exact sum of item scores) weighs each "
        "item by its range: "
        + "; ".join(
            f"{i} {a}..{b} ({100 * w:.0f}% of the composite's range)"
            for i, a, b, w in zip(ids, lo, hi, share, strict=True)
        )
        + ". Rescale the items first if each should count equally."
    )


def _scoring_lines(pmf: xr.DataArray) -> list[str]:
    """How the composite is scored: the reflected items and the subscales with their items
    (Markdown, item ids and subscale names escaped)."""
    if "item" not in pmf.coords:
        return []
    ids = [md(i) for i in pmf["item"].values]
    lo, hi = int(pmf["score"].min()), int(pmf["score"].max())
    own = _weights_line(pmf, ids)
    lines = []
    if "reverse_keyed" in pmf.coords and pmf["reverse_keyed"].dims == ("item",):
        keyed = [i for i, r in zip(ids, pmf["reverse_keyed"].values, strict=True) if bool(r)]
        rule = "y → min + max − y on the item's own scale" if own else f"y → {lo + hi} − y"
        if keyed:
            lines.append(
                f"Scoring: {len(keyed)} reverse-keyed items are reflected ({rule}) "
                f"before any composite: items {', '.join(keyed)}."
            )
    subs: dict[str, list[str]] = {}
    if SUBSCALE_DIM in pmf.coords and pmf[SUBSCALE_DIM].dims == ("item",):
        for i, name in zip(ids, pmf[SUBSCALE_DIM].values, strict=True):
            subs.setdefault(md(name), []).append(i)
    named = {k: v for k, v in subs.items() if k}
    if len(named) >= 2:
        lines.append(
            f"Subscales ({len(named)}), each its own composite (the sum of its items, "
            f"{lo}×K..{hi}×K for K items; per item: the sum divided by K): "
            + "; ".join(f"**{k}** (K = {len(v)}): items {', '.join(v)}" for k, v in named.items())
            + "."
        )
        if subs.get(""):
            lines.append(f"Items without a subscale, left out: {', '.join(subs[''])}.")
    elif own:
        lo_i, hi_i = (np.broadcast_to(b.values, len(ids)) for b in support_bounds(pmf))
        lines.append(f"Composite: {_all(len(ids))} ({lo_i.sum()}..{hi_i.sum()}).")
    else:
        lines.append(f"Composite: {_all(len(ids))} ({lo * len(ids)}..{hi * len(ids)}).")
    if own:
        lines.append(own)
    return lines


def _without_pmf(pmf: xr.DataArray) -> str:
    """The cells without a PMF (a greedy reply that writes no answer), where there are any."""
    n = int(pmf.isnull().all("score").sum())
    if not n or ELICITATION_DIM not in pmf.dims:
        return ""
    return f" and {n} cells without one (replies that write no answer: see the section Elicitation)"
