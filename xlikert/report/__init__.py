"""The HTML/Markdown report: every table and figure of the paper, for any design.

>>> import xlikert as xl
>>> html = xl.report.write_report("results.nc", "report/")   # doctest: +SKIP

The report follows the pipeline (constraint -> consensus -> construct ->
reliability -> sampling cost). Factor names come from the file (the dims of ``pmf`` other
than ``item`` and ``score``, read with :func:`xlikert.dims.factor_dims`, so a
factor with a reserved name is a ``DesignError`` naming it): ``model`` and
``target`` are used where they exist, otherwise the first and second factors
in dim order.
Sections that need data the file does not hold (a decoding grid, a second
factor, a human baseline for the instrument) say so instead of appearing.

The report follows the instrument (:func:`xlikert.composite`): reverse-keyed
items are reflected and, for an instrument with subscales, every composite,
effect, figure and sampling table is per subscale (small multiples: one figure
per subscale); the design section lists the keyed items and the subscales.
Effects are given as sums (composite-score units) and per item.

The report is written into a temporary folder beside ``out_dir`` and moved
into place when complete, so a report that fails leaves nothing behind (and
an earlier report in ``out_dir`` untouched).

Heavy imports (matplotlib) happen inside the functions.
"""

from __future__ import annotations

import html as _html
import re
import shutil
import tempfile
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ..construct import SCORING, summarize, trend
from ..data import human_baseline, load_demo_results, synthetic_results
from ..design.scoring import SUBSCALE_DIM
from ..dims import factor_dims
from ..errors import DesignError, InvalidPMFError
from ..io import decode_attrs
from . import tables

__all__ = ["load_demo_results", "synthetic_results", "tables", "write_report"]

_SE_BUDGETS = (10, 100, 1000, 1_000_000)
_FLIP_BUDGETS = (10, 100, 1000)


@dataclass
class _Section:
    title: str
    blocks: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, html, markdown)

    def text(self, md: str) -> None:
        self.blocks.append(("text", "<p>" + _md_inline(md) + "</p>", md))

    def table(self, df: pd.DataFrame, out: Path, name: str, caption: str, digits=2, index=True):
        frag = tables.export(df, out / "tables", name, caption=caption, digits=digits, index=index)
        links = " · ".join(
            f'<a href="tables/{name}.{ext}">{ext}</a>' for ext in ("csv", "tex", "md")
        )
        self.blocks.append(
            (
                "table",
                f'<figure class="table"><figcaption>{_html.escape(caption)} '
                f'<span class="dl">[{links}]</span></figcaption>{frag["html"]}</figure>',
                f"*{caption}*\n\n{frag['markdown']}",
            )
        )

    def figure(self, fig, out: Path, name: str, caption: str) -> None:
        import matplotlib.pyplot as plt

        (out / "figures").mkdir(parents=True, exist_ok=True)
        fig.savefig(out / "figures" / f"{name}.png", dpi=130, bbox_inches="tight")
        plt.close(fig)
        self.blocks.append(
            (
                "figure",
                f'<figure><img src="figures/{name}.png" alt="{_html.escape(caption)}">'
                f"<figcaption>{_html.escape(caption)}</figcaption></figure>",
                f"![{caption}](figures/{name}.png)\n\n*{caption}*",
            )
        )


def _views(obj: xr.DataArray) -> Iterator[tuple[str, str, xr.DataArray]]:
    """(file-name suffix, caption prefix, selection) per subscale; one plain view without."""
    if SUBSCALE_DIM not in obj.dims:
        yield "", "", obj
        return
    for name in obj[SUBSCALE_DIM].values:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "_", str(name)).strip("_") or "subscale"
        yield f"_{slug}", f"Subscale {name}: ", obj.sel({SUBSCALE_DIM: name})


def _tree_view(dec: xr.DataTree, comp_s: xr.DataArray) -> xr.DataTree:
    """The decomposition of the subscale that ``comp_s`` was selected at (all of it without)."""
    if SUBSCALE_DIM not in comp_s.coords or SUBSCALE_DIM in comp_s.dims:
        return dec
    name = comp_s[SUBSCALE_DIM].values[()]
    return dec.map_over_datasets(
        lambda d: d.sel({SUBSCALE_DIM: name}) if SUBSCALE_DIM in d.dims else d
    )


def _scoring_lines(pmf: xr.DataArray) -> list[str]:
    """How the composite is scored: the reflected items and the subscales with their items."""
    if "item" not in pmf.coords:
        return []
    ids = [str(i) for i in pmf["item"].values]
    lo, hi = int(pmf["score"].min()), int(pmf["score"].max())
    lines = []
    if "reverse_keyed" in pmf.coords and pmf["reverse_keyed"].dims == ("item",):
        keyed = [i for i, r in zip(ids, pmf["reverse_keyed"].values, strict=True) if bool(r)]
        if keyed:
            lines.append(
                f"Scoring: {len(keyed)} reverse-keyed items are reflected (y → {lo + hi} − y) "
                f"before any composite: items {', '.join(keyed)}."
            )
    subs: dict[str, list[str]] = {}
    if SUBSCALE_DIM in pmf.coords and pmf[SUBSCALE_DIM].dims == ("item",):
        for i, name in zip(ids, pmf[SUBSCALE_DIM].values, strict=True):
            subs.setdefault(str(name), []).append(i)
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
    else:
        lines.append(
            f"Composite: the sum of all {len(ids)} items ({lo * len(ids)}..{hi * len(ids)})."
        )
    return lines


def _md_inline(text: str) -> str:
    t = _html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return t


def _as_array(obj, prefer=("consensus", "Cns", "cns", "entropy")) -> xr.DataArray:
    """Engine results may come as a Dataset (value and bounds); take the value."""
    if isinstance(obj, xr.Dataset):
        for name in prefer:
            if name in obj:
                return obj[name]
        return obj[next(iter(obj.data_vars))]
    return obj


def _origin_map(ds: xr.Dataset, by: Hashable, given: Mapping[str, str] | None):
    if given is not None:
        return {str(k): str(v) for k, v in given.items()}
    coord = "country_of_origin"
    if by is not None and coord in ds.coords and ds[coord].dims == (by,):
        return {str(k): str(v) for k, v in zip(ds[by].values, ds[coord].values, strict=True)}
    return None


def _baseline_for(ds: xr.Dataset) -> pd.DataFrame | None:
    name = str(ds.attrs.get("instrument", ""))
    if not name:
        return None
    if isinstance(ds.attrs.get("instrument"), str):
        key = name.split()[0].split("/")[-1].removesuffix(".toml")
    else:  # pragma: no cover
        return None
    try:
        base = human_baseline(key)
    except KeyError:
        return None
    scores = ds["pmf"]["score"].values
    # the baseline is on the 17-item, 1..7 composite
    if ds.sizes.get("item") != 17 or scores.min() != 1 or scores.max() != 7:
        return None
    return base


def write_report(
    results: str | Path | xr.Dataset,
    out_dir: str | Path,
    *,
    country_of_origin: Mapping[str, str] | None = None,
    tol: float = 1e-4,
    title: str | None = None,
    human: str | Path | xr.Dataset | None = None,
) -> Path:
    """Write ``index.html``, ``report.md``, ``figures/*.png`` and ``tables/*`` into ``out_dir``.

    Parameters
    ----------
    results
        A results file (netCDF) or Dataset with ``pmf`` ``(*factors, item,
        score)``; optional ``valid_mass``, ``decoding_pmf``.
    out_dir
        Output folder (created).
    country_of_origin
        Level of the first factor (e.g. model) -> level of the second (e.g.
        target) it originates from; marks in-group cells. Default: a
        ``country_of_origin`` coordinate on the first factor, if any.
    tol
        Certified tolerance of Multivariate Consensus.
    title
        Report title (default from the file's attrs).
    human
        Human data (a CSV of respondents or a human PMF netCDF/Dataset): adds the
        section "Alignment with human respondents" (:mod:`xlikert.report.human`).

    Returns
    -------
    pathlib.Path
        The path of ``index.html``.

    Notes
    -----
    Everything is written into a temporary folder beside ``out_dir`` first and
    moved into ``out_dir`` when the report is complete: a report that fails
    leaves no partial folder (an existing ``out_dir`` keeps its old report).

    Examples
    --------
    >>> from xlikert.data import synthetic_results
    >>> path = write_report(synthetic_results(n_items=3), "report/")   # doctest: +SKIP
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        _write_report(
            results, tmp, country_of_origin=country_of_origin, tol=tol, title=title, human=human
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, out)
    return out / "index.html"


def _publish(tmp: Path, out: Path) -> None:
    """Move the finished report in ``tmp`` to ``out`` (replacing the entries it rewrites)."""
    if not out.exists():
        tmp.rename(out)
        return
    for entry in tmp.iterdir():
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        entry.rename(target)
    tmp.rmdir()


def _write_report(
    results: str | Path | xr.Dataset,
    out: Path,
    *,
    country_of_origin: Mapping[str, str] | None,
    tol: float,
    title: str | None,
    human: str | Path | xr.Dataset | None = None,
) -> Path:
    """:func:`write_report` into the (temporary) folder ``out``."""
    import matplotlib

    if matplotlib.get_backend().lower() not in {"agg", "pdf", "svg", "cairo", "pgf", "ps"}:
        matplotlib.use("Agg")

    import xlikert as xl

    from .. import plot, sampling

    source = str(results) if not isinstance(results, xr.Dataset) else "(in-memory Dataset)"
    # a Dataset opened with plain xarray still has its JSON attrs encoded
    ds = decode_attrs(results if isinstance(results, xr.Dataset) else xl.open_results(results))
    if "pmf" not in ds:
        raise InvalidPMFError(f"results {source} hold no 'pmf' variable; variables: {list(ds)}")
    pmf = ds["pmf"]
    factors = factor_dims(pmf, what=f"the pmf of {source}")
    if not factors:
        raise DesignError(f"results {source} have no factor dims: pmf dims are {pmf.dims}")
    # a factor with one level is held constant: no effect, contrast or flip to report
    varying = [f for f in factors if pmf.sizes[f] >= 2]
    constant = [f for f in factors if f not in varying]
    by = "model" if "model" in factors else factors[0]
    second = (
        "target"
        if ("target" in varying and by != "target")
        else next((f for f in varying if f != by), None)
    )
    origin = _origin_map(ds, by, country_of_origin)
    sections: list[_Section] = []

    # ---------------------------------------------------------------- design
    s = _Section("Design")
    lv = "; ".join(
        f"**{f}** ({pmf.sizes[f]}): "
        + ", ".join(map(str, pmf[f].values[:12]))
        + (" …" if pmf.sizes[f] > 12 else "")
        for f in varying
    )
    s.text(
        f"Results: `{source}`. {int(np.prod([pmf.sizes[f] for f in factors]))} conditions × "
        f"{pmf.sizes.get('item', 1)} items on scores {int(pmf.score.min())}..{int(pmf.score.max())}; "
        f"{pmf.size // pmf.sizes['score']} exact item PMFs"
        + (
            " (those of the models in reasoning mode are means over sampled thoughts of exact "
            "PMFs: see the section on reasoning traces)."
            if "trace_pmf" in ds
            else "."
        )
    )
    if varying:
        s.text("Factors: " + lv)
    if constant:
        s.text(
            "Held constant (one level, so no effect is estimated): "
            + "; ".join(f"**{f}** = {pmf[f].values[0]}" for f in constant)
            + "."
        )
    if ds.attrs.get("synthetic"):
        s.text("**SYNTHETIC DATA**: these results are random PMFs, no model was run.")
    for line in _scoring_lines(pmf):
        s.text(line)
    sections.append(s)

    # ---------------------------------------------------------------- constraint
    s = _Section("Constraint: failure rate")
    if "valid_mass" in ds:
        fr = xl.failure_rate(ds)
        s.figure(
            plot.failure_rate(fr, by=by),
            out,
            "failure_rate",
            f"Failure rate (probability outside the valid answers) per condition and item, by {by}.",
        )
        s.table(
            tables.failure_summary(fr, by),
            out,
            "failure_rate",
            f"Failure rate by {by}: mean, SD and max over conditions and items.",
            digits=4,
        )
    else:
        s.text("The results hold no `valid_mass`: the failure rate cannot be reported.")
    rules = {
        str(name): str(info["answers"]).split(":")[0]
        for name, info in (ds.attrs.get("models") or {}).items()
        if isinstance(info, dict) and info.get("answers")
    }
    if rules:
        s.text(
            "Valid answers (the rule per model; the full text is in the file's "
            "`attrs['models'][name]['answers']`): "
            + "; ".join(f"{name}: {rule}" for name, rule in rules.items())
            + "."
        )
    sections.append(s)

    # ---------------------------------------------------------------- consensus
    s = _Section("Consensus")
    cns = _as_array(xl.consensus(pmf, item_dim="item", tol=tol))
    ent = _as_array(xl.entropy(pmf, item_dim="item"), prefer=("entropy",))
    s.figure(
        plot.consensus(cns, x=by, hue=second),
        out,
        "consensus",
        f"Multivariate Consensus per condition (certified to ±{tol:g}).",
    )
    s.table(
        tables.consensus_entropy(cns, ent),
        out,
        "consensus_entropy",
        "Multivariate Consensus and joint Shannon entropy (bits) per condition.",
        digits=3,
        index=False,
    )
    sections.append(s)

    # ---------------------------------------------------------------- construct
    s = _Section("Construct: composite scores and distributional ANOVA")
    comp = xl.composite(pmf)
    per_subscale = " (small multiples: one row per subscale)" if SUBSCALE_DIM in comp.dims else ""
    s.figure(
        plot.composite_pmfs(comp, facet=by, hue=second),
        out,
        "composite_pmfs",
        f"Exact composite-score PMFs by {by}"
        + (f", {second} as colour" if second else "")
        + per_subscale
        + ".",
    )
    base = _baseline_for(ds)
    if base is not None:
        cond = {}
        if second is not None and "USA" in [str(v) for v in pmf[second].values]:
            cond = {second: "USA"}
        hv = tables.human_vs_llm(pmf, base, by=by, condition=cond)
        where = f" at {second} = USA" if cond else ""
        s.table(
            hv,
            out,
            "human_vs_llm",
            f"Human samples (Shimp & Sharma 1987) vs each {by}'s composite{where}: E and SD.",
            index=False,
        )
        s.figure(
            plot.human_vs_llm(hv),
            out,
            "human_vs_llm",
            f"Human samples vs LLMs{where}. Human SD: spread across respondents; "
            "LLM SD: dispersion of one model's PMF (not commensurable).",
        )
    dec = xl.decompose(pmf)
    summ = xl.summary_table(dec, scoring="both")
    s.table(
        tables.paper_layout(summ),
        out,
        "effects",
        "Grand mean, main effects and interactions of the composite score (E, SD, SNR, dPD"
        + (", per subscale" if SUBSCALE_DIM in comp.dims else "")
        + f"). {SCORING['both']}.",
        index=False,
    )
    for tag, label, comp_s in _views(comp):
        dec_s = _tree_view(dec, comp_s)
        _construct_parts(s, out, comp_s, dec_s, factors, by, second, origin, tag, label)
    sections.append(s)

    # ---------------------------------------------------------------- reasoning traces
    if "trace_pmf" in ds and bool(ds["trace_pmf"].notnull().any()):
        sections.append(_reasoning_section(ds, summ, factors, by, out))

    # ---------------------------------------------------------------- reliability
    from .reliability import reliability_section

    sections.append(reliability_section(pmf, out, _Section, by=by))

    # ---------------------------------------------------------------- sampling cost
    s = _Section("The cost of generative sampling")
    s.text(
        "What a study that sampled N answers per condition would have paid, computed "
        "analytically from the exact PMFs (no simulation): SE = SD(S)/√N per condition; sign "
        "flips of every factorial parameter under the normal approximation with exact mean "
        "and variance."
    )
    se = sampling.standard_error(pmf, n=_SE_BUDGETS)
    per_sub = " and subscale" if SUBSCALE_DIM in se.dims else ""
    s.table(
        sampling.sampling_se_table(pmf, n=_SE_BUDGETS, by=by, consensus=cns),
        out,
        "sampling_se",
        f"SE of the N-sample composite estimator, mean over the conditions "
        f"of each {by}{per_sub}, sorted by Consensus.",
        digits=3,
    )
    for tag, label, se_s in _views(se):
        s.figure(
            plot.standard_error(se_s, by=by),
            out,
            f"sampling_se{tag}",
            f"{label}Standard error of the sampling estimator vs N.",
        )
        r = sampling.correlation(cns, se_s.sel(n=_SE_BUDGETS[0]))
        if np.isfinite(r["r"]):
            s.text(
                f"{label}Correlation of SE with Consensus across the {r['n']} conditions: "
                f"r = {r['r']:.2f} (p = {r['p']:.2g})."
            )
    flips = sampling.flip_probability(pmf, n=_FLIP_BUDGETS)
    if flips.empty:
        s.text("No factor varies, so there is no factorial parameter whose sign could flip.")
    else:
        s.table(
            sampling.flip_table(flips),
            out,
            "flip_by_effect_size",
            "Mean sign-flip probability by exact |E| and budget N"
            + (" (the parameters of every subscale)." if per_sub else "."),
            digits=3,
        )
        s.figure(
            plot.flip_probability(flips),
            out,
            "flip_probability",
            "Sign-flip probability vs exact effect size.",
        )
    if "decoding_pmf" in ds:
        bias = sampling.decoding_bias(ds)
        tab, st = sampling.decoding_bias_table(bias, by=by, consensus=cns)
        s.table(
            tab,
            out,
            "decoding_bias",
            "Decoding bias of the expected composite over the temperature × top-p grid.",
        )
        for tag, label, bias_s in _views(bias):
            s.figure(
                plot.decoding_bias(bias_s, by=by, consensus=cns),
                out,
                f"decoding_bias{tag}",
                f"{label}Decoding bias vs temperature and top-p.",
            )
        if bias.attrs.get("n_undefined"):
            s.text(
                f"{bias.attrs['n_undefined']} of {bias.size} (condition, temperature, top-p) "
                "settings keep no valid token in the nucleus for some item: a sampler would "
                "never return a valid composite there, so their bias is undefined and left out."
            )
        if bias.attrs.get("n_unmeasured"):
            s.text(
                f"{bias.attrs['n_unmeasured']} of {bias.size} settings were not measured (a "
                "server that returns only the top-k log-probabilities) and are left out."
            )
        if np.isfinite(st.get("r", np.nan)):
            s.text(
                f"Correlation of mean |bias| with Consensus across the {st['n']} conditions: "
                f"r = {st['r']:.2f} (p = {st['p']:.2g})."
            )
    else:
        s.text(
            "No `decoding_pmf` (temperature × top-p grid) in the results: decoding bias "
            "is not reported. Collect with a decoding grid to add it."
        )
    sections.append(s)

    if human is not None:
        from .human import human_section

        sections.append(human_section(ds, human, out, by, _Section))

    ttl = title or str(ds.attrs.get("title") or f"xlikert report: {ds.attrs.get('instrument', '')}")
    return _render(out, ttl, sections)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #0072B2}h2{margin-top:2em;color:#0072B2}
nav ul{columns:2}figure{margin:1.2em 0}img{max-width:100%;height:auto}
figcaption{font-size:.92em;color:#444;margin:.3em 0}
table.tbl{border-collapse:collapse;font-size:.88em;margin:.4em 0}
.tbl th,.tbl td{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left}
.tbl th{background:#f2f6fa}.tbl .num{text-align:right}.tbl .bool{text-align:center}
.dl{font-size:.85em}code{background:#f4f4f4;padding:0 .2em}
"""


def _composite_summary(p: xr.DataArray) -> xr.Dataset:
    import xlikert as xl

    return xl.summarize(xl.composite(p), dim="score")[["E", "SD"]]


def _reasoning_section(ds: xr.Dataset, summ: pd.DataFrame, factors, by, out: Path) -> _Section:
    """Trace-sampling SEs (jackknife over traces) beside the numbers; thinking on vs off."""
    import xlikert as xl

    s = _Section("Reasoning traces: sampling error and thinking off")
    tp = ds["trace_pmf"]
    has = tp.notnull().all("score")
    n_traces = has.sum("trace")
    infos = ds.attrs.get("models") or {}
    on = [str(v) for v in ds["model"].values] if "model" in ds.dims else []
    on = [m for m in on if int(n_traces.sel(model=m).max()) > 0]
    if not on:  # traces without a model dim: not a file collect wrote
        s.text("The file holds traces but no `model` dim: no per-model trace summary.")
        return s
    lines = []
    for m in on:
        cell = ds.sel(model=m)
        keep = has.sel(model=m)
        info = infos.get(m, {}) if isinstance(infos.get(m), dict) else {}
        fmt = info.get("reasoning_format", {})
        trunc = (
            float((cell["trace_truncated"] == 1).where(keep).mean())
            if "trace_truncated" in ds
            else np.nan
        )
        length = float(cell["trace_length"].where(keep).mean()) if "trace_length" in ds else np.nan
        lines.append(
            f"**{m}**: M = {int(n_traces.sel(model=m).max())} traces per prompt "
            f"({fmt.get('framing', '?')} framing, end marker `{fmt.get('end_marker', '?')}`); "
            f"{100 * trunc:.0f}% cut at max_new_tokens, {length:.0f} tokens on average; valid "
            f"mass after the trace {float(cell['trace_valid_mass'].where(keep).mean()):.3f}"
        )
    s.text(
        "Models in reasoning mode sample their thought before the answer: `pmf` is the mean over "
        "M sampled traces of the exact answer PMF after each, so it carries Monte Carlo error "
        "from the traces alone (the answers are not sampled). Every number in the sections above "
        "is computed from `pmf` as for any model; the standard errors below are the delete-one "
        "jackknife over traces (`xl.trace_se`), exact for linear summaries such as E; models "
        "without traces are exact (SE 0). " + "; ".join(lines) + "."
    )
    counts = sorted({int(v) for v in np.unique(n_traces.values)} - {0})
    groups = [ds] if len(counts) == 1 else [ds.sel(model=[m]) for m in on]
    rows = []
    for g in groups:
        est = _composite_summary(g["pmf"])
        se = xl.trace_se(g, _composite_summary)
        frame = est.to_dataframe()[["E", "SD"]].join(
            se.to_dataframe()[["E", "SD"]].rename(columns={"E": "SE(E)", "SD": "SE(SD)"})
        )
        rows.append(frame[["E", "SE(E)", "SD", "SE(SD)"]].reset_index())
    comp = pd.concat(rows, ignore_index=True)
    if "model" in comp:
        comp = comp[comp["model"].astype(str).isin(on)]
    s.table(
        comp,
        out,
        "reasoning_composite",
        "Composite score of the reasoning models per condition: E and SD of the composite "
        "with their trace-sampling standard errors.",
        digits=3,
        index=False,
    )
    if len(counts) == 1:
        se_tab = xl.trace_se(ds, lambda p: xl.summary_table(xl.decompose(p)))
        eff = summ[["term", "level"]].copy()
        for c in ("E", "SD", "SNR", "dPD"):
            eff[c] = summ[c]
            eff[f"SE({c})"] = se_tab[c]
        s.table(
            eff,
            out,
            "reasoning_effects",
            "Grand mean, main effects and interactions (as above) with their trace-sampling "
            "standard errors (jackknife over traces).",
            digits=3,
            index=False,
        )
    else:
        s.text(
            "The reasoning models sampled different numbers of traces, so the effects that mix "
            f"models get no jackknife SE here (traces per prompt: {counts}); the composite table "
            "above gives each model's own."
        )
    # the same source with thinking off: an entry of the same model without reasoning
    sources = {str(m): str(i.get("source")) for m, i in infos.items() if isinstance(i, dict)}
    off = [str(v) for v in ds["model"].values] if "model" in ds.dims else []
    off = [m for m in off if m not in on]
    pairs = [(a, b) for a in on for b in off if sources.get(a) and sources.get(a) == sources.get(b)]
    if pairs:
        rows = []
        other = [f for f in factors if f != "model"]
        for a, b in pairs:
            ga, gb = ds.sel(model=[a]), ds.sel(model=b)
            ea = _composite_summary(ga["pmf"]).isel(model=0)
            se = xl.trace_se(ga, _composite_summary).isel(model=0)
            eb = _composite_summary(gb["pmf"])
            fa = xl.failure_rate(ga).isel(model=0).mean("item")
            fb = xl.failure_rate(gb).mean("item")
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
            rows.append(frame)
        s.table(
            pd.concat(rows, ignore_index=True),
            out,
            "reasoning_vs_thinking_off",
            "Thinking on vs thinking off (an entry of the same source without reasoning): "
            "composite mean per condition, the reasoning estimate's SE, and the failure rate "
            "(after the trace, with thinking on).",
            digits=3,
            index=False,
        )
    else:
        s.text(
            "No entry of the same model without reasoning in this file: add one (the same "
            "`source`, no `reasoning`) to compare with thinking off."
        )
    return s


def _construct_parts(
    s: _Section,
    out: Path,
    comp: xr.DataArray,
    dec: xr.DataTree,
    factors: list[Hashable],
    by: Hashable,
    second: Hashable | None,
    origin: Mapping[str, str] | None,
    tag: str,
    label: str,
) -> None:
    """Effect figures, interaction, contrasts and trends of one composite (one subscale)."""
    import xlikert as xl

    from .. import plot

    for f in factors:
        if f in dec.children and comp.sizes[f] >= 2:
            node = dec[str(f)].dataset
            s.figure(
                plot.effect_distributions(node["pmf"], node),
                out,
                f"main_effect_{f}{tag}",
                f"{label}Main-effect distributions of {f}.",
            )
    if second is not None:
        try:
            node = tables._pair_node(dec, by, second)
        except DesignError:
            node = None
        if node is not None:
            ingroup = None
            if origin:
                ingroup = xr.DataArray(
                    [
                        [origin.get(str(m)) == str(t) for t in node[second].values]
                        for m in node[by].values
                    ],
                    dims=(by, second),
                    coords={by: node[by], second: node[second]},
                )
            s.figure(
                plot.interaction_heatmap(
                    node["E"], node["SD"], row=second, col=by, ingroup=ingroup
                ),
                out,
                f"interaction_{by}_{second}{tag}",
                f"{label}{by} × {second} interaction (E ± SD).",
            )
            avf = tables.aggregate_vs_factorial(dec, row=second, col=by, country_of_origin=origin)
            s.table(
                avf,
                out,
                f"aggregate_vs_factorial{tag}",
                f"{label}Aggregate ({second} main effect, panel A) vs factorial ({by} × {second} "
                "interaction, panel B). reversal: sign opposite to the aggregate; "
                "ingroup: the model's own country.",
                index=False,
            )
        rows = []
        levels = [str(v) for v in comp[second].values]
        if len(levels) <= 8:
            for a, b in tables.pairs(levels):
                c = xl.summarize(xl.contrast(comp, second, a, b))
                rows.append(
                    {
                        "Contrast": f"{a} − {b}",
                        **{k: float(c[k]) for k in ("E", "SD", "SNR", "dPD")},
                    }
                )
            s.table(
                pd.DataFrame(rows),
                out,
                f"contrasts_{second}{tag}",
                f"{label}Pairwise contrasts between levels of {second}.",
                index=False,
            )
    trend_rows = [
        {"Factor": str(f), "Ordered by": str(name), **row}
        for f, name, row in _trend_rows(comp, factors)
    ]
    if trend_rows:
        s.table(
            pd.DataFrame(trend_rows),
            out,
            f"trends{tag}",
            f"{label}Per-unit trend of the composite over each factor with a numeric coordinate "
            "(paired adjacent-level differences divided by the spacing, length-weighted; "
            "E is the secant slope of the marginal means).",
            index=False,
        )


def _trend_rows(comp: xr.DataArray, factors: list[Hashable]):
    """(factor, coord name, summary) for every factor with distinct numeric values.

    A factor qualifies through a numeric index or a 1-D numeric non-index coord on
    its dim (e.g. ``model_size``); the trend runs over those values.
    """
    for f in factors:
        if comp.sizes[f] < 2:
            continue
        for name, coord in comp.coords.items():
            if coord.dims != (f,) or not np.issubdtype(coord.dtype, np.number):
                continue
            values = np.asarray(coord.values, dtype=float)
            if not np.all(np.isfinite(values)) or len(np.unique(values)) != values.size:
                continue
            summ = summarize(trend(comp, f, values=values), dim="slope")
            yield f, name, {k: float(summ[k]) for k in ("E", "SD", "SNR", "dPD")}


def _render(out: Path, title: str, sections: list[_Section]) -> Path:
    from .._version import __version__

    toc = "".join(
        f'<li><a href="#s{i}">{_html.escape(sec.title)}</a></li>' for i, sec in enumerate(sections)
    )
    body = []
    md = [f"# {title}", ""]
    for i, sec in enumerate(sections):
        body.append(f'<h2 id="s{i}">{_html.escape(sec.title)}</h2>')
        md += [f"## {sec.title}", ""]
        for _kind, h, m in sec.blocks:
            body.append(h)
            md += [m, ""]
    foot = f"Generated by xlikert {__version__}."
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_html.escape(title)}'
        f"</title><style>{_CSS}</style></head><body><h1>{_html.escape(title)}</h1>"
        f"<nav><ul>{toc}</ul></nav>{''.join(body)}<hr><p><small>{foot}</small></p></body></html>"
    )
    (out / "report.md").write_text("\n".join([*md, foot, ""]), encoding="utf-8")
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
