"""Section "Reliability": Cronbach's α and McDonald's ω over the conditions.

The section itself is built by :func:`xlikert.report.reliability.reliability_section`
(which ``xlikert reliability`` shares); this is its entry in the list of sections.
"""

from __future__ import annotations

from ..context import ReportContext
from ..page import Section
from ..reliability import default_respondents, reliability_section
from .formats import format_factor

__all__ = ["scale_reliability_section"]


def scale_reliability_section(ctx: ReportContext) -> Section:
    """α, ω and the weakest item per ``by`` level and subscale, over the other factors'
    conditions (:mod:`xlikert.report.reliability`).

    A response format is a way of measuring, not a respondent: with a factor of
    kind ``format`` the respondents are the other factors' conditions, and each
    format level is a population of its own (per model and format).
    """
    fmt = format_factor(ctx.ds)
    respondents = None
    if fmt is not None:
        respondents = [f for f in default_respondents(ctx.pmf, ctx.by) if f != fmt]
    return reliability_section(ctx.pmf, ctx.out, Section, respondent_dims=respondents, by=ctx.by)
