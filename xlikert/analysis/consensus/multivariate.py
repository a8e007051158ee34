"""The paper's Multivariate Consensus of a condition's items, with certified bounds."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ...core.errors import InternalError, XlikertError
from ...core.validate import describe_cells, is_lazy
from ...kernels import DEFAULT_MAX_CELLS, KernelHandle, get_kernel
from .inputs import layer_attrs, one_scale, prepare_consensus
from .tastle import tastle_consensus

__all__ = ["MIN_TOL", "consensus", "consensus_bounds"]

#: Smallest ``tol`` accepted by :func:`consensus`: the rigorous allowance for
#: float64 round-off that widens the bounds reaches ~1e-11 on the finest grids.
MIN_TOL = 1e-10


def consensus_bounds(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
    tol: float = 1e-4,
    max_cells: int = DEFAULT_MAX_CELLS,
    kernels: str | None = None,
) -> xr.Dataset:
    """Multivariate Consensus with its certified bounds and guaranteed error, as a Dataset.

    The value :func:`consensus` returns, beside the certified lower and upper
    bounds of the exact sum over all ``n^K`` response vectors and the guaranteed
    bound ``error`` on ``|consensus - exact|`` (at most ``tol``, unless
    ``max_cells`` was reached first: see :func:`consensus`).

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``). Other dims are carried along.
    item_dim : hashable or None, keyword-only
        The items of one condition. ``None`` gives Tastle Consensus per item.
    score_dim : hashable, keyword-only
        Score dimension; its coordinate holds the consecutive scale values.
    tol : float, keyword-only
        Guaranteed bound on ``|consensus - exact|``; at least ``1e-10``.
    max_cells : int, keyword-only
        Largest grid one refinement pass may use (see :func:`consensus`).
    kernels : {"numba", "numpy"}, optional, keyword-only
        Kernel or its plain-numpy twin; default :func:`xlikert.kernels.get_kernels`.

    Returns
    -------
    xr.Dataset
        ``consensus``, ``lower``, ``upper`` and ``error``, each with dims
        ``(*factors)`` (``(*factors, item_dim)`` when ``item_dim`` is None: Tastle
        Consensus per item, exact, so the bounds equal the value and ``error`` is 0).

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis, a
        missing or empty item dimension.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).
    XlikertError
        ``tol`` not a finite number of at least ``1e-10``, ``max_cells`` not a
        positive integer.
    InternalError
        A certified lower bound above its upper bound (a bug, not bad input).

    Warns
    -----
    RuntimeWarning
        ``max_cells`` reached before ``tol``: the conditions, the largest
        error, and what to change.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": ["a", "b"]}, n_items=17, seed=1)
    >>> ds = xl.consensus_bounds(pmf, tol=1e-6)
    >>> sorted(ds.data_vars), bool((ds.error <= 1e-6).all())
    (['consensus', 'error', 'lower', 'upper'], True)
    >>> bool((ds.lower <= ds.consensus).all() and (ds.consensus <= ds.upper).all())
    True
    """
    if item_dim is None:
        cns = tastle_consensus(pmf, score_dim=score_dim).rename("consensus")
        cns.attrs["long_name"] = "Consensus (Tastle, per item)"
        zero = xr.zeros_like(cns).rename("error")
        zero.attrs = {"long_name": "bound on |consensus - exact| (float64 round-off only)"}
        return xr.Dataset(
            {
                "consensus": cns,
                "lower": cns.rename("lower"),
                "upper": cns.rename("upper"),
                "error": zero,
            },
            attrs={"method": "Tastle Consensus per item, exact"},
        )
    tol = _check_tol(tol)
    if not (isinstance(max_cells, int | np.integer) and max_cells >= 1):
        raise XlikertError(f"max_cells must be a positive integer, got {max_cells!r}")
    kernel = get_kernel("consensus_bounds", kernels)
    pmf, y = prepare_consensus(one_scale(pmf, item_dim, score_dim), item_dim, score_dim)
    kwargs: dict[str, Any] = {
        "y": y,
        "tol": tol,
        "max_cells": int(max_cells),
        "kernel": kernel,
        "item_dim": item_dim,
        "score_dim": score_dim,
    }
    if is_lazy(pmf):
        cell = pmf.isel({item_dim: 0, score_dim: 0}, drop=True).astype(np.float64)
        template = xr.Dataset({name: cell for name in _BOUND_VARS})
        res = xr.map_blocks(_bounds_block, pmf, kwargs=kwargs, template=template)
    else:
        res = _bounds_block(pmf, **kwargs)
    n_items = pmf.sizes[item_dim]
    method = "certified grid bounds on the exact sum over all n^K response vectors"
    value = res["consensus"]
    value.attrs = layer_attrs(
        pmf,
        long_name="Multivariate Consensus",
        units="1",
        tol=tol,
        n_items=n_items,
        method=method,
    )
    res["lower"].attrs = {"long_name": "certified lower bound of the exact Multivariate Consensus"}
    res["upper"].attrs = {"long_name": "certified upper bound of the exact Multivariate Consensus"}
    res["error"].attrs = {"long_name": "guaranteed bound on |consensus - exact|"}
    res["consensus"] = value
    res.attrs = {"tol": tol, "n_items": n_items, "method": method}
    return res


def consensus(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
    tol: float = 1e-4,
    max_cells: int = DEFAULT_MAX_CELLS,
    kernels: str | None = None,
) -> xr.DataArray:
    """Multivariate Consensus of each condition, within ``tol`` of the exact value.

    The paper's Multivariate Consensus (:ref:`eq-consensus-multivariate`)::

        Cns = 1 + sum_{y in Y^K} P(y) log2(1 - ||y - mu||_2 / d_max),
        d_max = sqrt(K) (y_max - y_min),

    over all ``n^K`` response vectors of the ``K`` items along ``item_dim``,
    with ``P`` the product of the item PMFs and ``mu`` the vector of item means.
    The sum is not enumerated (``7^17 ~ 2e14`` terms): the squared distance
    ``D`` is convolved on a grid whose step shrinks until certified lower and
    upper bounds of the exact sum are at most ``2 tol`` apart, and the midpoint
    is returned (see :mod:`xlikert.kernels.consensus`). The bounds include a
    rigorous allowance for float64 round-off.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``). Other dims (the decoding grid of
        ``decoding_pmf`` too) are carried along.
    item_dim : hashable or None, keyword-only
        The items of one condition. ``None`` gives Tastle Consensus per item
        (:func:`tastle_consensus`, exact).
    score_dim : hashable, keyword-only
        Score dimension; its coordinate holds the consecutive scale values.
    tol : float, keyword-only
        Guaranteed bound on ``|returned - exact|``; at least ``1e-10``.
        ``1e-4`` takes well under a millisecond per condition for K = 17.
    max_cells : int, keyword-only
        Largest grid one refinement pass may use. Should it be reached before
        ``tol`` is met, the tightest certified bounds so far are returned (if
        not even the first grid fits, the wider bounds of a single cell: never
        NaN), their ``error`` exceeds ``tol``, and a ``RuntimeWarning`` names
        those conditions and says to raise ``max_cells`` or ``tol``. For Dask
        input the warning is issued when the result is computed, once per
        chunk that holds such conditions (threaded or synchronous scheduler;
        a multi-process scheduler keeps its workers' warnings).
    kernels : {"numba", "numpy"}, optional, keyword-only
        Kernel or its plain-numpy twin; default :func:`xlikert.kernels.get_kernels`.

    Returns
    -------
    xr.DataArray
        ``consensus`` with dims ``(*factors)`` (``(*factors, item_dim)`` when
        ``item_dim`` is None). Dask-backed input gives a lazy result. The
        certified bounds and the error are :func:`consensus_bounds`'s.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis, a
        missing or empty item dimension.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).
    XlikertError
        ``tol`` not a finite number of at least ``1e-10``, ``max_cells`` not a
        positive integer.
    InternalError
        A certified lower bound above its upper bound (a bug, not bad input).

    Warns
    -----
    RuntimeWarning
        ``max_cells`` reached before ``tol``: the conditions, the largest
        error, and what to change.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": ["a", "b"]}, n_items=17, seed=1)
    >>> xl.consensus(pmf, tol=1e-6).dims
    ('model',)
    >>> xl.consensus(pmf.isel(item=[0]), tol=1e-9).round(6).values  # K = 1 is Tastle
    array([0.598794, 0.333303])
    >>> xl.tastle_consensus(pmf.isel(item=0)).round(6).values
    array([0.598794, 0.333303])
    """
    bounds = consensus_bounds(
        pmf, item_dim=item_dim, score_dim=score_dim, tol=tol, max_cells=max_cells, kernels=kernels
    )
    return bounds["consensus"]


_BOUND_VARS = ("consensus", "lower", "upper", "error")


def _bounds_block(
    pmf: xr.DataArray,
    *,
    y: np.ndarray,
    tol: float,
    max_cells: int,
    kernel: KernelHandle,
    item_dim: Hashable,
    score_dim: Hashable,
) -> xr.Dataset:
    """Consensus bounds of the in-memory ``pmf`` (the whole array or one Dask block), checked.

    Raises :class:`InternalError` where a lower bound exceeds its upper bound
    and warns where the error exceeds ``tol``, naming the conditions; for Dask
    input this runs when each block is computed.
    """
    value, lower, upper = xr.apply_ufunc(
        kernel,
        pmf,
        y,
        tol,
        np.int64(max_cells),
        input_core_dims=[[item_dim, score_dim], [], [], []],
        output_core_dims=[[], [], []],
    )
    inverted = lower > upper
    if bool(inverted.any()):
        where = describe_cells(inverted) if inverted.ndim else "(scalar)"
        raise InternalError(
            f"Multivariate Consensus: the certified lower bound exceeds the upper bound at "
            f"{where} (by up to {float((lower - upper).max()):.3g}): the certificate is "
            "broken. This is a bug in xlikert; please report it with the input PMFs."
        )
    # Cns <= 1 term by term (every log2(1 - d/d_max) <= 0), so capping stays certified
    upper, value = upper.clip(max=1.0), value.clip(max=1.0)
    error = np.maximum(value - lower, upper - value)
    _warn_unmet(error, tol, max_cells)
    return xr.Dataset(dict(zip(_BOUND_VARS, (value, lower, upper, error), strict=True)))


def _check_tol(tol: float) -> float:
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise XlikertError(f"tol must be a number, got {tol!r}") from None
    if not math.isfinite(tol) or tol < MIN_TOL:
        raise XlikertError(
            f"tol must be a finite number >= {MIN_TOL:g} (below it the float64 round-off "
            f"allowance of the certified bounds dominates), got {tol!r}"
        )
    return tol


def _warn_unmet(error: xr.DataArray, tol: float, max_cells: int) -> None:
    bad = error > tol
    if bool(bad.any()):
        where = describe_cells(bad) if bad.ndim else "(scalar)"
        warnings.warn(
            f"Multivariate Consensus: the certified error exceeds tol={tol:g} at {where} "
            f"(largest {float(error.max()):.3g}) because the grid reached max_cells="
            f"{max_cells}; the returned bounds are certified. Raise max_cells or tol.",
            RuntimeWarning,
            stacklevel=2,
        )
