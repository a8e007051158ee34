"""Section "Consensus": Multivariate Consensus and joint entropy per condition."""

from __future__ import annotations

from ... import plot
from ...analysis.consensus import consensus_entropy, entropy
from ..context import ReportContext
from ..page import Section

__all__ = ["consensus_section"]


def consensus_section(ctx: ReportContext) -> Section:
    """Consensus per condition (figure) and the Consensus and entropy table."""
    s = Section("Consensus")
    cns = ctx.consensus
    ent = entropy(ctx.consensus_pmf, item_dim="item")
    if ctx.nominal:
        s.text(ctx.nominal_note("Consensus"))
    if ctx.consensus_note:
        s.text(ctx.consensus_note)
    s.figure(
        plot.consensus(cns, x=ctx.by, hue=ctx.second),
        ctx.out,
        "consensus",
        f"Multivariate Consensus per condition (certified to ±{ctx.tol:g}).",
    )
    s.table(
        consensus_entropy(cns, ent),
        ctx.out,
        "consensus_entropy",
        "Multivariate Consensus and joint Shannon entropy (bits) per condition.",
        digits=3,
        index=False,
    )
    return s
