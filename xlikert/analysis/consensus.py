"""The Consensus layer: ordinal certainty of item PMFs.

The module is ``xlikert.analysis.consensus``; its functions are exported at the
top level (``xl.consensus``, ``xl.dissension``, ...). It is not called
``xlikert.consensus``: that name is the function, and a module of the same
name would be shadowed by it (``import xlikert.consensus as m`` gave the
function). ``xlikert.kernels.consensus`` holds the kernels.

* :func:`tastle_consensus` -- Tastle & Wierman Consensus of each PMF
  (:ref:`eq-consensus-original`), exact.
* :func:`consensus` -- the paper's Multivariate Consensus of the ``K`` items of a
  condition (:ref:`eq-consensus-multivariate`) with a *certified* error: the value
  returned is within ``tol`` of the exact sum over all ``n^K`` response vectors;
* :func:`consensus_bounds` -- the same value with its certified lower and upper
  bounds and the guaranteed error, as a Dataset;
* :func:`dissension`, :func:`dissension_bounds` -- ``1 - consensus`` (:ref:`eq-dissension`).
* :func:`entropy` -- Shannon entropy in bits, of each item or of the K-item joint
  under conditional independence; :func:`consensus_entropy` tabulates both per
  condition (the paper's entropy-vs-consensus table).

Items are conditionally independent given the condition (paper, "Conditional
Independence via Context Isolation"), so the joint PMF is the product of the
item PMFs. Each PMF is divided by its sum before use, so storage round-off
(validated to ``PMF_ATOL``) does not leak into the result.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from .. import kernels
from ..core.dims import CORE_DIMS, DECODING_DIMS, factor_dims
from ..core.errors import DesignError, InternalError, InvalidPMFError, XlikertError
from ..core.validate import (
    as_pmf,
    check_item_dim,
    check_pmf,
    check_score_axis,
    describe_cells,
    is_lazy,
)
from ..kernels import DEFAULT_MAX_CELLS
from .support import check_support, require_ordinal, support_bounds

__all__ = [
    "consensus",
    "consensus_bounds",
    "consensus_entropy",
    "dissension",
    "dissension_bounds",
    "entropy",
    "tastle_consensus",
]

#: Smallest ``tol`` accepted by :func:`consensus`: the rigorous allowance for
#: float64 round-off that widens the bounds reaches ~1e-11 on the finest grids.
MIN_TOL = 1e-10

# --------------------------------------------------------------------------- helpers


def _scale(pmf: xr.DataArray, score_dim: Hashable) -> np.ndarray:
    """Validated scale values as float64; the scale needs two points for ``d_max > 0``."""
    y = check_score_axis(pmf, score_dim).astype(np.float64)
    if y.size < 2:
        raise InvalidPMFError(
            f"score coordinate {score_dim!r} holds a single value {y.tolist()}; Consensus "
            "needs a scale of at least two points (d_max = y_max - y_min > 0)"
        )
    return y


def _prepare(
    pmf: xr.DataArray | xr.Dataset, item_dim: Hashable | None, score_dim: Hashable
) -> tuple[xr.DataArray, np.ndarray]:
    pmf = as_pmf(pmf)
    # extra dims are carried along: the decoding grid too, and items when item_dim is None
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=[*DECODING_DIMS, *CORE_DIMS])
    pmf = check_pmf(pmf, score_dim)
    y = _scale(pmf, score_dim)
    if item_dim is not None:
        if item_dim == score_dim:
            raise XlikertError(f"item_dim and score_dim are both {item_dim!r}")
        check_item_dim(pmf, item_dim)
    if pmf.dtype != np.float64:
        pmf = pmf.astype(np.float64)
    if is_lazy(pmf):
        core = {score_dim: -1} if item_dim is None else {item_dim: -1, score_dim: -1}
        pmf = pmf.chunk(core)
    return pmf, y


def _one_scale(
    pmf: xr.DataArray | xr.Dataset, item_dim: Hashable, score_dim: Hashable
) -> xr.DataArray:
    """The items on their common scale (Multivariate Consensus has one ``d_max``).

    Raises where an item is nominal or the items have different supports.
    """
    pmf = as_pmf(pmf)
    require_ordinal(pmf, "Multivariate Consensus", item_dim=item_dim)
    if "score_min" not in pmf.coords and "score_max" not in pmf.coords:
        return pmf
    check_support(pmf, item_dim=item_dim, score_dim=score_dim)
    lo, hi = (
        np.unique(b.values) for b in support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    )
    if lo.size > 1 or hi.size > 1:
        ids = (
            [str(v) for v in np.atleast_1d(pmf[item_dim].values)] if item_dim in pmf.coords else []
        )
        spans = [
            f"{i}: {a}..{b}"
            for i, a, b in zip(
                ids,
                *(np.atleast_1d(c.values) for c in (pmf.score_min, pmf.score_max)),
                strict=False,
            )
        ]
        raise DesignError(
            "Multivariate Consensus needs the items of a condition on one scale (one d_max); "
            f"these items have their own: {spans}; compute it per group of items with the "
            "same scale, or use tastle_consensus per item"
        )
    return pmf.sel({score_dim: slice(int(lo[0]), int(hi[0]))})


def _tastle_numpy(
    p: np.ndarray, ymin: np.ndarray | float, ymax: np.ndarray | float, *, y: np.ndarray
) -> np.ndarray:
    """Tastle Consensus over the last axis of ``p`` (plain numpy, vectorised).

    ``ymin`` and ``ymax`` are the ends of each PMF's own scale (broadcast over the
    leading axes); ``p`` is 0 off them. ``1 - |y - mu| / d_max`` is computed as
    ``(d_max - |y - mu|) / d_max`` with ``d_max - |y - mu|`` written as a sum of
    non-negative terms, so the result stays exact near the ``log`` singularity.
    """
    p = np.asarray(p, dtype=np.float64)
    ymin = np.asarray(ymin, dtype=np.float64)[..., None]
    ymax = np.asarray(ymax, dtype=np.float64)[..., None]
    rng = ymax - ymin
    q = p / p.sum(axis=-1, keepdims=True)
    mu = (q * y).sum(axis=-1, keepdims=True)
    u = (q * (y - ymin)).sum(axis=-1, keepdims=True)  # mu - y_min
    v = (q * (ymax - y)).sum(axis=-1, keepdims=True)  # y_max - mu
    comp = np.where(y >= mu, (ymax - y) + u, (y - ymin) + v)  # d_max - |y - mu|
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(q > 0.0, q * np.log2(comp / rng), 0.0)
    return 1.0 + term.sum(axis=-1)


def _entropy_numpy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy in bits over the last axis (``0 log 0 = 0``), after normalising."""
    p = np.asarray(p, dtype=np.float64)
    p = p / p.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(p > 0.0, -p * np.log2(p), 0.0)
    return term.sum(axis=-1)


def _attrs(pmf: xr.DataArray, **extra) -> dict:
    attrs = dict(pmf.attrs)
    attrs.update(extra)
    return attrs


# --------------------------------------------------------------------------- public


def tastle_consensus(
    pmf: xr.DataArray | xr.Dataset, *, score_dim: Hashable = "score"
) -> xr.DataArray:
    """Tastle & Wierman Consensus of each PMF, exact (:ref:`eq-consensus-original`).

    ``Cns(Y) = 1 + sum_y P(y) log2(1 - |y - mu| / d_max)`` with ``mu`` the mean
    of the PMF and ``d_max = y_max - y_min`` the width of the item's own scale:
    its ``score_min..score_max`` where the items have their own options
    (:mod:`xlikert.analysis.support`), else the ``score`` coordinate (the scale,
    not the support of the PMF).

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        PMFs with dims ``(..., score_dim)``; ``score_dim`` holds the scale
        values. A results Dataset is read through its ``pmf``.
    score_dim : hashable, keyword-only
        Name of the score dimension.

    Returns
    -------
    xr.DataArray
        ``tastle_consensus`` with the dims of ``pmf`` less ``score_dim``, in [0, 1].

    Raises
    ------
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).
    NominalItemError
        A nominal item (options without an order), naming it.

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray(
    ...     [[1, 0, 0, 0, 0, 0, 0], [1 / 7] * 7, [0, 0, 0.5, 0, 0.5, 0, 0], [0.5, 0, 0, 0, 0, 0, 0.5]],
    ...     dims=("case", "score"), coords={"score": range(1, 8)})
    >>> tastle_consensus(pmf).round(2).values
    array([1.  , 0.47, 0.74, 0.  ])
    """
    pmf, y = _prepare(pmf, None, score_dim)
    require_ordinal(pmf, "tastle_consensus")
    check_support(pmf, score_dim=score_dim)
    ymin, ymax = support_bounds(pmf, score_dim=score_dim)
    out = xr.apply_ufunc(
        _tastle_numpy,
        pmf,
        ymin,
        ymax,
        kwargs={"y": y},
        input_core_dims=[[score_dim], [], []],
        dask="parallelized",
        output_dtypes=[np.float64],
    )
    out.attrs = _attrs(pmf, long_name="Tastle Consensus", units="1")
    return out.rename("tastle_consensus")


def consensus_bounds(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
    tol: float = 1e-4,
    max_cells: int = DEFAULT_MAX_CELLS,
    engine: str | None = None,
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
    engine : {"numba", "numpy"}, optional, keyword-only
        Kernel or its plain-numpy twin; default :func:`xlikert.kernels.get_engine`.

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
    kernel = kernels.get_kernel("consensus_bounds", engine)
    pmf, y = _prepare(_one_scale(pmf, item_dim, score_dim), item_dim, score_dim)
    kwargs = {
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
    value.attrs = _attrs(
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
    engine: str | None = None,
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
    engine : {"numba", "numpy"}, optional, keyword-only
        Kernel or its plain-numpy twin; default :func:`xlikert.kernels.get_engine`.

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
        pmf, item_dim=item_dim, score_dim=score_dim, tol=tol, max_cells=max_cells, engine=engine
    )
    return bounds["consensus"]


_BOUND_VARS = ("consensus", "lower", "upper", "error")


def _bounds_block(
    pmf: xr.DataArray,
    *,
    y: np.ndarray,
    tol: float,
    max_cells: int,
    kernel: kernels.KernelHandle,
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


def dissension_bounds(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
    tol: float = 1e-4,
    max_cells: int = DEFAULT_MAX_CELLS,
    engine: str | None = None,
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
    engine : {"numba", "numpy"}, optional, keyword-only
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
        pmf, item_dim=item_dim, score_dim=score_dim, tol=tol, max_cells=max_cells, engine=engine
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
    engine: str | None = None,
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
    engine : {"numba", "numpy"}, optional, keyword-only
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
        pmf, item_dim=item_dim, score_dim=score_dim, tol=tol, max_cells=max_cells, engine=engine
    )
    return bounds["dissension"]


def entropy(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Shannon entropy in bits: of the K-item joint, or of each item.

    Under conditional independence the joint entropy is the sum of the item
    entropies; ``0 log 0 = 0``. The paper contrasts it with Consensus (its
    table of Consensus and entropy per condition): entropy ignores the ordinal
    distance between answers.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``).
    item_dim : hashable or None, keyword-only
        Items of one condition; ``None`` gives the entropy of each item.
    score_dim : hashable, keyword-only
        Score dimension.

    Returns
    -------
    xr.DataArray
        ``entropy`` (bits) with dims ``(*factors)``, or ``(*factors, item_dim)``.

    Raises
    ------
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray(
    ...     [[1, 0, 0, 0, 0, 0, 0], [1 / 7] * 7, [0, 0, 0.5, 0, 0.5, 0, 0], [0.5, 0, 0, 0, 0, 0, 0.5]],
    ...     dims=("item", "score"), coords={"score": range(1, 8)})
    >>> entropy(pmf, item_dim=None).round(2).values
    array([0.  , 2.81, 1.  , 1.  ])
    >>> round(float(entropy(pmf)), 2)
    4.81
    """
    pmf, _ = _prepare(pmf, item_dim, score_dim)
    core = [score_dim] if item_dim is None else [item_dim, score_dim]

    def _joint(p):
        h = _entropy_numpy(p)
        return h if item_dim is None else h.sum(axis=-1)

    out = xr.apply_ufunc(
        _joint,
        pmf,
        input_core_dims=[core],
        dask="parallelized",
        output_dtypes=[np.float64],
    )
    long_name = "Shannon entropy" + (" per item" if item_dim is None else " of the item joint")
    out.attrs = _attrs(pmf, long_name=long_name, units="bit")
    return out.rename("entropy")


def consensus_entropy(cns: xr.DataArray, ent: xr.DataArray | None = None) -> pd.DataFrame:
    """Consensus (and joint entropy, bits) per condition, one row per condition
    (the paper's Consensus-vs-entropy table): columns the factors, ``Cns`` and
    ``Entropy (bits)``.

    Examples
    --------
    >>> c = xr.DataArray([0.9, 0.7], dims="model", coords={"model": ["a", "b"]}, name="Cns")
    >>> consensus_entropy(c).columns.tolist()
    ['model', 'Cns']
    """
    data = {"Cns": cns}
    if ent is not None:
        data["Entropy (bits)"] = ent
    ds = xr.Dataset(
        {k: v.drop_vars([c for c in v.coords if c not in v.dims]) for k, v in data.items()}
    )
    df = (
        ds.to_dataframe().reset_index()
        if ds["Cns"].ndim
        else pd.DataFrame({k: [float(v)] for k, v in ds.items()})
    )
    return df


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
