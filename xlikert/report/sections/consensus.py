"""Section "Consensus": Multivariate Consensus and joint entropy per condition."""

from __future__ import annotations

from ... import plot
from ...analysis.consensus import consensus_entropy, entropy
from ..inputs import ReportInputs
from ..page import Section

__all__ = ["consensus_section"]


def consensus_section(inputs: ReportInputs) -> Section:
    """Consensus per condition (figure) and the Consensus and entropy table."""
    s = Section("Consensus")
    cns = inputs.consensus
    ent = entropy(inputs.consensus_pmf, item_dim="item")
    if inputs.nominal:
        s.text(inputs.nominal_note("Consensus"))
    if inputs.consensus_note:
        s.text(inputs.consensus_note)
    s.figure(
        lambda: plot.consensus(cns, x=inputs.by, hue=inputs.second),
        inputs.out,
        "consensus",
        f"Multivariate Consensus per condition (certified to ±{inputs.tol:g}).",
    )
    s.table(
        consensus_entropy(cns, ent),
        inputs.out,
        "consensus_entropy",
        "Multivariate Consensus and joint Shannon entropy (bits) per condition.",
        digits=3,
        index=False,
    )
    return s
