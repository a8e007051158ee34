"""Section "Alignment with human respondents" (``xlikert report --human FILE``).

The section itself is built by :func:`xlikert.report.human.human_section`; this
is its entry in the list of sections: it appears only when human data are given.
"""

from __future__ import annotations

from ..context import ReportContext
from ..page import Section

__all__ = ["human_alignment_section"]


def human_alignment_section(ctx: ReportContext) -> Section | None:
    """Model vs human PMFs and representativeness (:mod:`xlikert.report.human`); ``None``
    without human data."""
    if ctx.human is None:
        return None
    from ..human import human_section

    return human_section(ctx.ds, ctx.human, ctx.out, ctx.by, Section)
