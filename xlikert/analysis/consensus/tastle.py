"""Tastle & Wierman Consensus of each item PMF, exact."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import xarray as xr

from ..support import check_support, require_ordinal, support_bounds
from .inputs import layer_attrs, prepare_consensus

__all__ = ["tastle_consensus"]


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
    result: np.ndarray = 1.0 + term.sum(axis=-1)
    return result


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
    pmf, y = prepare_consensus(pmf, None, score_dim)
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
    out.attrs = layer_attrs(pmf, long_name="Tastle Consensus", units="1")
    result: xr.DataArray = out.rename("tastle_consensus")
    return result
