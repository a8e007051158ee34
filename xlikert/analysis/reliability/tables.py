"""The table of ``xlikert reliability`` and of the report's section "Reliability".

:func:`reliability_table` turns :func:`xlikert.reliability` into one row per population
(each level of the remaining factors, e.g. each model) and subscale: Cronbach's α,
McDonald's ω and the weakest item (the lowest corrected item–total correlation);
:func:`default_respondents` is the population the report and the command use by default.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ...core.dims import SUBSCALE_DIM, factor_dims, preferred_factor
from ...core.io import read_attrs
from ...core.schema import N_CONDITIONS_ATTR, RESPONDENT_DIMS_ATTR
from .population import reliability

__all__ = ["RELIABILITY_COLUMNS", "default_respondents", "reliability_table"]


def default_respondents(pmf: xr.DataArray, by: Hashable | None = None) -> list[Hashable]:
    """The report's population: every factor except ``by``, in dim order.

    ``by`` (default :data:`xlikert.core.dims.MODEL_DIM` if a factor, else the first factor)
    indexes the populations: each model is its own.

    Examples
    --------
    >>> pmf = xr.DataArray(np.full((2, 3, 2, 2), 0.5), dims=("model", "target", "item", "score"))
    >>> default_respondents(pmf)
    ['target']
    """
    factors = factor_dims(pmf)
    by = preferred_factor(factors, by)
    return [f for f in factors if f != by]


def reliability_table(
    pmf: xr.DataArray | xr.Dataset, dim: Hashable | Sequence[Hashable]
) -> pd.DataFrame:
    """α, ω and the weakest item per population (remaining condition) and subscale.

    Parameters
    ----------
    pmf
        Item PMFs or a results Dataset.
    dim
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
    rel = reliability(pmf, dim=dim)
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
    table.attrs[RESPONDENT_DIMS_ATTR] = list(attrs[RESPONDENT_DIMS_ATTR])
    table.attrs[N_CONDITIONS_ATTR] = int(attrs[N_CONDITIONS_ATTR])
    return table


#: The value columns of :func:`reliability_table` (the others name the population).
RELIABILITY_COLUMNS = ("items", "alpha", "omega", "weakest item", "item-total r")
