"""Section "Reliability": Cronbach's α and McDonald's ω over the conditions.

:func:`_reliability_section` builds the report's section from the table of
:func:`xlikert.analysis.reliability.reliability_table`, and
:func:`scale_reliability_section` is the section's entry in the list of sections.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path

import xarray as xr

from ...analysis import reliability as stage
from ...core.dims import factor_dims, preferred_factor
from ...core.errors import XlikertError
from ...core.schema import N_CONDITIONS_ATTR
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_escape as md
from .formats import format_factor

__all__ = ["scale_reliability_section"]


def _reliability_section(
    pmf: xr.DataArray,
    out: Path,
    section,
    *,
    dim: Sequence[Hashable] | None = None,
    by: Hashable | None = None,
):
    """The report section "Reliability": α, ω and the weakest item per ``by`` level and subscale.

    ``section`` is the report's section class (called with the title); the
    respondents ``dim`` default to :func:`~xlikert.analysis.reliability.default_respondents`
    (every factor but ``by``, default :data:`xlikert.core.dims.MODEL_DIM` or the first factor).
    A design where reliability is undefined (no factor besides ``by``, a single
    condition, an item that never varies) gets a sentence saying why instead of a table.
    """
    s = section("Reliability")
    by = preferred_factor(factor_dims(pmf), by)
    respondents = stage.default_respondents(pmf, by) if dim is None else dim
    if not respondents:
        s.text(
            f"No factor besides {md(by)}: there is no population of conditions (respondents) to "
            "compute α and ω over."
        )
        return s
    try:
        table = stage.reliability_table(pmf, respondents)
    except XlikertError as exc:
        s.text(f"Reliability over the conditions of {md(list(map(str, respondents)))}: {md(exc)}.")
        return s
    n = table.attrs[N_CONDITIONS_ATTR]
    per = [c for c in table.columns if c not in stage.RELIABILITY_COLUMNS and c != "subscale"]
    s.text(
        f"The respondents are the {n} conditions of {md(', '.join(map(str, respondents)))} "
        f"(equal weights)"
        + (f", one population per {md(', '.join(map(str, per)))}" if per else "")
        + ". Each answers every item independently from its exact PMFs, so the item "
        "covariance is exact: within-condition variance plus the between-condition "
        "covariance of the item means (no sampling). Cronbach's α and McDonald's ω "
        "(one-factor maximum-likelihood model) are for the sum score"
        + (" of each subscale" if "subscale" in table.columns else "")
        + ", reverse-keyed items reflected; the weakest item has the lowest corrected "
        "item–total correlation (item vs the sum of the other items). Both include the "
        "answer noise within a condition, as α computed from sampled answers would."
    )
    s.table(
        table,
        out,
        "reliability",
        f"Reliability over the conditions of {', '.join(map(str, respondents))}: α, ω and "
        "the weakest item"
        + (f", per {', '.join(per)}" if per else "")
        + (" and subscale" if "subscale" in table.columns else "")
        + ".",
        digits=3,
        index=False,
    )
    return s


def scale_reliability_section(inputs: ReportInputs) -> Section | None:
    """α, ω and the weakest item per ``by`` level and subscale, over the other factors'
    conditions; ``None`` where the instrument defines no composite (the reliability of a
    sum score: :attr:`~..inputs.ReportInputs.no_composite`).

    A response format is a way of measuring, not a respondent: with a factor of
    kind ``format`` the respondents are the other factors' conditions, and each
    format level is a population of its own (per model and format).
    """
    if inputs.no_composite:
        return None
    fmt = format_factor(inputs.ds)
    respondents = None
    if fmt is not None:
        respondents = [f for f in stage.default_respondents(inputs.pmf, inputs.by) if f != fmt]
    s = _reliability_section(inputs.pmf, inputs.out, Section, dim=respondents, by=inputs.by)
    if inputs.nominal:
        s.text(inputs.nominal_note("reliability"))
    return s
