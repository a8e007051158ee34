"""Section "Reliability": Cronbach's α and McDonald's ω over the conditions, and the
table of ``xlikert reliability``.

:func:`reliability_table` turns :func:`xlikert.reliability` into one row per
population (each level of the remaining factors, e.g. each model) and
subscale: Cronbach's α, McDonald's ω, and the weakest item (the lowest
corrected item–total correlation). :func:`reliability_section` builds the
report's section from it, and :func:`scale_reliability_section` is the section's
entry in the list of sections.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ...analysis.keying import SUBSCALE_DIM
from ...analysis.reliability import reliability
from ...dims import factor_dims
from ...errors import XlikertError
from ...io import read_attrs
from ..context import ReportContext
from ..page import Section
from ..tables import markdown_escape as md
from .formats import format_factor

__all__ = [
    "RELIABILITY_COLUMNS",
    "default_respondents",
    "reliability_section",
    "reliability_table",
    "scale_reliability_section",
]


def default_respondents(pmf: xr.DataArray, by: Hashable = "model") -> list[Hashable]:
    """The report's population: every factor except ``by`` (the model), in dim order.

    Examples
    --------
    >>> pmf = xr.DataArray(np.full((2, 3, 2, 2), 0.5), dims=("model", "target", "item", "score"))
    >>> default_respondents(pmf)
    ['target']
    """
    return [f for f in factor_dims(pmf) if f != by]


def reliability_table(
    pmf: xr.DataArray | xr.Dataset, respondent_dims: Hashable | Sequence[Hashable]
) -> pd.DataFrame:
    """α, ω and the weakest item per population (remaining condition) and subscale.

    Parameters
    ----------
    pmf
        Item PMFs or a results Dataset.
    respondent_dims
        The factors whose conditions are the respondents (:func:`xlikert.reliability`).

    Returns
    -------
    pandas.DataFrame
        Columns: the remaining factors, ``subscale`` (with subscales), ``items``,
        ``alpha``, ``omega``, ``weakest item`` and ``item-total r`` (its
        corrected item–total correlation). ``attrs`` carry ``respondent_dims``
        and ``n_conditions``.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "persona": 5}, n_items=3)
    >>> reliability_table(pmf, "persona").columns.tolist()
    ['model', 'items', 'alpha', 'omega', 'weakest item', 'item-total r']
    """
    rel = reliability(pmf, dim=respondent_dims)
    attrs = read_attrs(rel)
    remaining = [d for d in rel["alpha"].dims if d != SUBSCALE_DIM]
    scales = (
        [(str(s), rel["item_subscale"].values == s) for s in rel[SUBSCALE_DIM].values]
        if SUBSCALE_DIM in rel.dims
        else [(None, np.ones(rel.sizes["item"], dtype=bool))]
    )
    items = np.asarray(rel["item"].values).astype(str)
    rows = []
    for cell in np.ndindex(*[rel.sizes[d] for d in remaining]):
        at = rel.isel(dict(zip(remaining, cell, strict=True)))
        labels = {str(d): str(at[d].values) for d in remaining}
        for name, mask in scales:
            one = at.sel({SUBSCALE_DIM: name}) if name is not None else at
            r = np.asarray(at["item_total"].values)[mask]
            worst = int(np.argmin(r))
            rows.append(
                {
                    **labels,
                    **({"subscale": name} if name is not None else {}),
                    "items": int(mask.sum()),
                    "alpha": float(one["alpha"]),
                    "omega": float(one["omega"]),
                    "weakest item": items[mask][worst],
                    "item-total r": float(r[worst]),
                }
            )
    table = pd.DataFrame(rows)
    table.attrs["respondent_dims"] = list(attrs["respondent_dims"])
    table.attrs["n_conditions"] = int(attrs["n_conditions"])
    return table


def reliability_section(
    pmf: xr.DataArray,
    out: Path,
    section,
    *,
    respondent_dims: Sequence[Hashable] | None = None,
    by: Hashable = "model",
):
    """The report section "Reliability": α, ω and the weakest item per ``by`` level and subscale.

    ``section`` is the report's section class (called with the title);
    ``respondent_dims`` defaults to :func:`default_respondents`. A design where
    reliability is undefined (no factor besides ``by``, a single condition, an
    item that never varies) gets a sentence saying why instead of a table.
    """
    s = section("Reliability")
    respondents = default_respondents(pmf, by) if respondent_dims is None else respondent_dims
    if not respondents:
        s.text(
            f"No factor besides {md(by)}: there is no population of conditions (respondents) to "
            "compute α and ω over."
        )
        return s
    try:
        table = reliability_table(pmf, respondents)
    except XlikertError as exc:
        s.text(f"Reliability over the conditions of {md(list(map(str, respondents)))}: {md(exc)}.")
        return s
    n = table.attrs["n_conditions"]
    per = [c for c in table.columns if c not in RELIABILITY_COLUMNS and c != "subscale"]
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


#: The value columns of :func:`reliability_table` (the others name the population).
RELIABILITY_COLUMNS = ("items", "alpha", "omega", "weakest item", "item-total r")


def scale_reliability_section(ctx: ReportContext) -> Section:
    """α, ω and the weakest item per ``by`` level and subscale, over the other factors'
    conditions.

    A response format is a way of measuring, not a respondent: with a factor of
    kind ``format`` the respondents are the other factors' conditions, and each
    format level is a population of its own (per model and format).
    """
    fmt = format_factor(ctx.ds)
    respondents = None
    if fmt is not None:
        respondents = [f for f in default_respondents(ctx.pmf, ctx.by) if f != fmt]
    return reliability_section(ctx.pmf, ctx.out, Section, respondent_dims=respondents, by=ctx.by)
