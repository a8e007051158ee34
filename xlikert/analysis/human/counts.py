"""Human PMFs from respondent counts ``(*groups, item, score)``."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import xarray as xr

from ...core.dims import check_factor_name
from ...core.errors import DesignError, InputTypeError
from ...core.validate import check_score_axis
from ..nonsubstantive import nonsubstantive_variables
from .inputs import finish_pmf

__all__ = ["human_pmf_from_counts"]


def _check_counts(counts: xr.DataArray, dim: Hashable) -> None:
    """Counts are non-negative integers; the message names the cell."""
    values = np.asarray(counts.values, dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 0) | (values != np.round(values))
    if bad.any():
        from ...core.validate import describe_cells

        raise DesignError(
            "counts must be non-negative integers; bad count at "
            f"{describe_cells(counts.copy(data=bad).any([dim]))}"
        )


def human_pmf_from_counts(
    counts: xr.DataArray,
    *,
    nonsubstantive: xr.DataArray | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Human PMF from respondent counts ``(*groups, item, score)`` (unweighted).

    Parameters
    ----------
    counts : xr.DataArray
        The number of respondents of each group (every dim but ``item_dim`` and
        ``score_dim``) who gave each answer to each item.
    nonsubstantive : xr.DataArray, keyword-only
        Respondents who gave each non-substantive answer ("Don't know"),
        ``(*groups, item, option)``: counted apart from the scale (as
        :func:`human_pmf`'s ``nonsubstantive=``).
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.Dataset
        ``pmf`` (the counts divided by their total) and ``n`` (the respondents
        of each group and item), with the attrs of :func:`human_pmf`; with
        ``nonsubstantive``, also ``n_nonsubstantive``, ``nonsubstantive_rate``
        and ``n_answered``.

    Raises
    ------
    InputTypeError
        ``counts`` is not a DataArray.
    DesignError
        Negative, non-finite or non-integer counts (naming the cell), no item
        dim, a group dim with a name xlikert reserves, or a group with no
        respondents for an item.
    InvalidPMFError
        A malformed score axis.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> c = xr.DataArray([[3, 1, 0]], dims=("item", "score"),
    ...                  coords={"item": ["q"], "score": [1, 2, 3]})
    >>> h = xl.human_pmf_from_counts(c)
    >>> h.pmf.values.tolist(), h.n.values.tolist()
    ([[0.75, 0.25, 0.0]], [4])
    """
    if not isinstance(counts, xr.DataArray):
        raise InputTypeError(f"expected a DataArray of counts, got {type(counts).__name__}")
    scores = check_score_axis(counts, score_dim)
    if item_dim not in counts.dims:
        raise DesignError(f"counts have no item dim {item_dim!r}; dims {tuple(counts.dims)}")
    groups = [d for d in counts.dims if d not in (item_dim, score_dim)]
    for g in groups:
        check_factor_name(g, where=f"group dim {g!r}")
    _check_counts(counts, score_dim)
    if nonsubstantive is not None:
        _check_counts(nonsubstantive, "option")
    n = counts.sum([score_dim])
    if bool((n == 0).any()):
        from ...core.validate import describe_cells

        raise DesignError(
            f"group with no respondents at {describe_cells(n == 0)}: its PMF is undefined; "
            "merge it with another level or leave it out"
        )
    ds = xr.Dataset({"pmf": counts.astype(np.float64) / n, "n": n.astype(np.int64)})
    ds = ds.transpose(*groups, item_dim, score_dim)
    if nonsubstantive is not None:
        ds = ds.assign(nonsubstantive_variables(nonsubstantive, None, ds["n"], None, None))
    attrs = {"human_groups": groups, "human_weighted": False, "human_weights_column": ""}
    return finish_pmf(ds, scores, attrs, "human_pmf_from_counts")
