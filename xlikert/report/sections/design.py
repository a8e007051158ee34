"""Section "Design": the results file, the factors and their levels, how items are scored."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...analysis.keying import SUBSCALE_DIM
from ..context import ReportContext
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["design_section", "scoring_lines"]


def design_section(ctx: ReportContext) -> Section:
    """What was measured: conditions, items, scores, factors (varying and constant), scoring."""
    pmf = ctx.pmf
    s = Section("Design")
    s.text(
        f"Results: {md_code(ctx.source)}. {int(np.prod([pmf.sizes[f] for f in ctx.factors]))} "
        f"conditions × {pmf.sizes.get('item', 1)} items on scores "
        f"{int(pmf.score.min())}..{int(pmf.score.max())}; "
        f"{pmf.size // pmf.sizes['score']} exact item PMFs"
        + (
            " (those of the models in reasoning mode are means over sampled thoughts of exact "
            "PMFs: see the section on reasoning traces)."
            if "trace_pmf" in ctx.ds
            else "."
        )
    )
    if ctx.varying:
        s.text(
            "Factors: "
            + "; ".join(
                f"**{md(f)}** ({pmf.sizes[f]}): "
                + ", ".join(md(v) for v in pmf[f].values[:12])
                + (" …" if pmf.sizes[f] > 12 else "")
                for f in ctx.varying
            )
        )
    if ctx.constant:
        s.text(
            "Held constant (one level, so no effect is estimated): "
            + "; ".join(f"**{md(f)}** = {md(pmf[f].values[0])}" for f in ctx.constant)
            + "."
        )
    if ctx.ds.attrs.get("synthetic"):
        s.text("**SYNTHETIC DATA**: these results are random PMFs, no model was run.")
    for line in scoring_lines(pmf):
        s.text(line)
    return s


def scoring_lines(pmf: xr.DataArray) -> list[str]:
    """How the composite is scored: the reflected items and the subscales with their items
    (Markdown, item ids and subscale names escaped)."""
    if "item" not in pmf.coords:
        return []
    ids = [md(i) for i in pmf["item"].values]
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
    else:
        lines.append(
            f"Composite: the sum of all {len(ids)} items ({lo * len(ids)}..{hi * len(ids)})."
        )
    return lines
