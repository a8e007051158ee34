"""Section "Reliability": Cronbach's α and McDonald's ω over the conditions.

The section itself is built by :func:`xlikert.report.reliability.reliability_section`
(which ``xlikert reliability`` shares); this is its entry in the list of sections.
"""

from __future__ import annotations

from ..context import ReportContext
from ..page import Section
from ..reliability import reliability_section

__all__ = ["scale_reliability_section"]


def scale_reliability_section(ctx: ReportContext) -> Section:
    """α, ω and the weakest item per ``by`` level and subscale, over the other factors'
    conditions (:mod:`xlikert.report.reliability`)."""
    return reliability_section(ctx.pmf, ctx.out, Section, by=ctx.by)
