"""Dissension, ``1 - consensus``, with its certified bounds."""

from __future__ import annotations

from collections.abc import Hashable

import xarray as xr

from ...kernels import DEFAULT_MAX_CELLS
from .multivariate import consensus_bounds

__all__ = ["dissension", "dissension_bounds"]


def dissension_bounds(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
    tol: float = 1e-4,
    max_cells: int = DEFAULT_MAX_CELLS,
    kernels: str | None = None,
) -> xr.Dataset:
    """Multivariate Dissension with its certified bounds and guaranteed error, as a Dataset.

    ``1 -`` :func:`consensus_bounds` (the bounds swap; :ref:`eq-dissension`), with the
    guarantee of :func:`consensus`.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``).
    item_dim : hashable or None, keyword-only
        The items of one condition; ``None``: Tastle's per item.
    score_dim : hashable, keyword-only
        Score dimension.
    tol : float, keyword-only
        Guaranteed bound on ``|dissension - exact|``; at least ``1e-10``.
    max_cells : int, keyword-only
        Largest grid one refinement pass may use (see :func:`consensus`).
    kernels : {"numba", "numpy"}, optional, keyword-only
        Kernel or its plain-numpy twin.

    Returns
    -------
    xr.Dataset
        ``dissension``, ``lower``, ``upper`` and ``error``, each with the dims of
        :func:`consensus_bounds`'s.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).
    XlikertError
        ``tol`` or ``max_cells`` out of range.

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[0.5, 0, 0, 0, 0, 0, 0.5]], dims=("item", "score"),
    ...                    coords={"score": range(1, 8)})
    >>> ds = dissension_bounds(pmf)
    >>> float(ds.dissension), float(ds.error) <= 1e-4
    (1.0, True)
    """
    res = consensus_bounds(
        pmf, item_dim=item_dim, score_dim=score_dim, tol=tol, max_cells=max_cells, kernels=kernels
    )
    dsn = (1.0 - res.consensus).rename("dissension")
    dsn.attrs = dict(res.consensus.attrs)
    dsn.attrs["long_name"] = dsn.attrs["long_name"].replace("Consensus", "Dissension")
    lower = (1.0 - res.upper).rename("lower")
    upper = (1.0 - res.lower).rename("upper")
    lower.attrs = {"long_name": "certified lower bound of the exact Dissension"}
    upper.attrs = {"long_name": "certified upper bound of the exact Dissension"}
    return xr.Dataset(
        {"dissension": dsn, "lower": lower, "upper": upper, "error": res.error},
        attrs=res.attrs,
    )


def dissension(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
    tol: float = 1e-4,
    max_cells: int = DEFAULT_MAX_CELLS,
    kernels: str | None = None,
) -> xr.DataArray:
    """Multivariate Dissension ``1 - consensus``, within ``tol`` of the exact value.

    :ref:`eq-dissension`; the guarantee is :func:`consensus`'s, and the certified
    bounds are :func:`dissension_bounds`'s.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``).
    item_dim : hashable or None, keyword-only
        The items of one condition; ``None``: ``1 -`` Tastle's per item.
    score_dim : hashable, keyword-only
        Score dimension.
    tol : float, keyword-only
        Guaranteed bound on ``|returned - exact|``; at least ``1e-10``.
    max_cells : int, keyword-only
        Largest grid one refinement pass may use (see :func:`consensus`).
    kernels : {"numba", "numpy"}, optional, keyword-only
        Kernel or its plain-numpy twin.

    Returns
    -------
    xr.DataArray
        ``dissension`` with the dims of :func:`consensus`'s result, in [0, 1].

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).
    XlikertError
        ``tol`` or ``max_cells`` out of range.

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[0.5, 0, 0, 0, 0, 0, 0.5]], dims=("item", "score"),
    ...                    coords={"score": range(1, 8)})
    >>> float(dissension(pmf))
    1.0
    """
    bounds = dissension_bounds(
        pmf, item_dim=item_dim, score_dim=score_dim, tol=tol, max_cells=max_cells, kernels=kernels
    )
    return bounds["dissension"]
