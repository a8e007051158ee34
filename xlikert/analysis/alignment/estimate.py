"""Alignment with the human side's sampling error: SE, Wald interval, noise ceiling."""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

import numpy as np
import xarray as xr
from scipy.stats import norm

from ..._version import __version__
from ...core.dims import factor_dims
from ...core.errors import DesignError
from ...core.io import encode_attrs
from ...core.validate import check_score_axis, single_chunk
from ...kernels import get_kernel
from ..nonsubstantive import nonsubstantive_alignment
from ..support import item_points, nominal_items
from .pairs import (
    GRID,
    KERNEL_ORDER,
    METRICS,
    ORDER_METRICS,
    has_rate,
    human_parts,
    kernel_metrics,
    order_dims,
    prepare_alignment,
)

__all__ = ["alignment", "noise_ceiling"]


def _ceiling(
    q: xr.DataArray, size: xr.DataArray, y: np.ndarray, score_dim: Hashable, kernels: str | None
) -> xr.DataArray:
    q = single_chunk(q.astype(np.float64), [score_dim])
    out = xr.apply_ufunc(
        get_kernel("noise_ceiling", kernels),
        q,
        xr.DataArray(y.astype(np.float64), dims=[score_dim]),
        size,
        xr.DataArray(np.zeros(len(KERNEL_ORDER)), dims=GRID),
        input_core_dims=[[score_dim], [score_dim], [], [GRID]],
        output_core_dims=[[GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=False,
    )
    result: xr.DataArray = out.drop_vars(
        [c for c in out.coords if score_dim in getattr(out[c], "dims", ())]
    )
    return result


def _by_metric(four: xr.DataArray, n_points: xr.DataArray, kind: str) -> xr.DataArray:
    """The 4 kernel metrics along ``_metric`` -> the 5 :data:`METRICS` along ``metric``.

    ``kind`` is ``"value"`` (representativeness ``1 - W1/(K - 1)``) or ``"se"`` (its SE
    ``SE(W1)/(K - 1)``); ``K`` is each item's own number of points.
    """
    parts = dict(zip(KERNEL_ORDER, [four.isel({GRID: i}) for i in range(4)], strict=True))
    scaled = parts["wasserstein"] / (n_points - 1)
    parts["representativeness"] = scaled if kind == "se" else 1.0 - scaled
    return xr.concat([parts[m] for m in METRICS], dim="metric").assign_coords(metric=list(METRICS))


def noise_ceiling(
    human: xr.Dataset,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.DataArray:
    """Expected alignment of two independent human samples of the same size (no Monte Carlo).

    For each group (and item) with PMF ``q`` and ``N`` respondents (``n_eff``
    when weighted): the expected Wasserstein-1, representativeness, total
    variation, Jensen-Shannon divergence (bits) and ``|mean difference|``
    between two independent samples of ``N`` respondents from ``q``. See
    :mod:`xlikert.analysis.alignment` for which are exact and which approximations are used.

    Parameters
    ----------
    human : xr.Dataset
        A human PMF Dataset with its sample size (``n``, or ``n_eff`` when
        weighted): :func:`xlikert.human_pmf` and friends.
    score_dim, item_dim : keyword-only
        Names of the score and item dims.
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``ceiling`` with dims ``(*groups, item, metric)``; attrs name the
        sample size used and the methods.

    Raises
    ------
    DesignError
        ``human`` without a sample size (a bare PMF), or a dim with a name
        xlikert reserves (:mod:`xlikert.core.dims`).
    InvalidPMFError
        A malformed score axis or an invalid PMF.
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2] * 50}), ["q"], scale=(1, 2))
    >>> c = xl.noise_ceiling(h).sel(item="q")
    >>> round(float(c.sel(metric="total_variation")), 4)    # E|X - X'| / 100, X ~ Bin(100, 1/2)
    0.0563
    """
    q, size, size_name = human_parts(human)
    if size is None:
        raise DesignError(
            "the noise ceiling needs the human sample size: pass xl.human_pmf's Dataset"
        )
    y = check_score_axis(q, score_dim)
    factor_dims(q, item_dim=item_dim, score_dim=score_dim, what="the human PMF")
    k = item_points(q, item_dim=item_dim, score_dim=score_dim)
    out = _by_metric(_ceiling(q, size, y, score_dim, kernels), k, "value")
    out = order_dims(out, q, q, item_dim)
    out.name = "ceiling"
    out.attrs = encode_attrs({"sample_size": size_name, **_METHODS})
    result: xr.DataArray = out
    return result


_METHODS = {
    "se_method": "delta method on the multinomial covariance (diag q - q q')/N of the human PMF "
    "(N = n, or Kish n_eff when weighted); the model PMF is exact",
    "interval_method": "Wald: estimate -+ z SE, clipped to the metric's range",
    "ceiling_method": "expected metric between two independent human samples of size N from q: "
    "W1, TV and representativeness exact for integer N (binomial Gini mean difference), normal "
    "approximation for non-integer N; JS second order (K+ - 1)/(4 N ln 2); |mean difference| "
    "normal 2 SD/sqrt(pi N)",
    "js_log_base": 2,
    "representativeness": "1 - W1/(K - 1), K = number of points of the item's own scale "
    "(OpinionQA)",
}


def alignment(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset,
    *,
    confidence: float = 0.95,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.Dataset:
    """Every alignment metric of model vs human PMFs, with its SE, interval and noise ceiling.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``); item PMFs, composites
        or mixtures, on the same score axis as ``human``.
    human : xr.Dataset
        A human PMF Dataset (:func:`xlikert.human_pmf`,
        :func:`xlikert.human_composite`, :func:`xlikert.human_marginal`) with
        ``n`` (and ``n_eff`` when weighted).
    confidence : keyword-only
        Coverage of the interval.
    score_dim, item_dim : keyword-only
        Names of the score and item dims.
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.Dataset
        Variables ``estimate``, ``se``, ``lower``, ``upper``, ``ceiling`` with
        dims (every dim of both inputs but ``score``, ``metric``); ``metric``
        holds :data:`METRICS`. Attrs name the methods (``se_method``,
        ``interval_method``, ``ceiling_method``, ``js_log_base``, ...).
        Representativeness divides by each item's own ``K - 1`` (item coordinate
        ``n_points`` where the items have their own scales, else the attr).
        For nominal items (item coordinate ``nominal``) the metrics that need an
        order (:data:`ORDER_METRICS`) are NaN and the attr ``nominal_items`` names
        them. When ``model`` is a results Dataset with ``nonsubstantive_mass`` and
        ``human`` counts non-substantive answers, the ``nonsubstantive_*``
        variables of :func:`xlikert.analysis.nonsubstantive.nonsubstantive_alignment`
        (model minus human rates, with the human binomial SE) are added on an
        ``option`` dim.

    Raises
    ------
    InvalidPMFError
        Different score axes, or an invalid PMF.
    DesignError
        Dims shared by both with different items or levels (naming them).

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3] * 25}), ["q"], scale=(1, 3))
    >>> m = xr.DataArray([[0.25, 0.5, 0.25]], dims=("item", "score"),
    ...                  coords={"item": ["q"], "score": [1, 2, 3]})
    >>> a = xl.alignment(m, h).sel(item="q", metric="wasserstein")
    >>> float(a.estimate), round(float(a.ceiling), 3)      # a perfect model, and two samples
    (0.0, 0.098)
    """
    if not 0 < confidence < 1:
        raise DesignError(f"confidence must be in (0, 1), got {confidence!r}")
    p, q, size, size_name, y = prepare_alignment(model, human, score_dim, item_dim)
    if size is None:
        raise DesignError("alignment needs the human sample size: pass xl.human_pmf's Dataset")
    k = item_points(p, item_dim=item_dim, score_dim=score_dim)
    raw = kernel_metrics(p, q, y, score_dim, kernels)
    estimate = _by_metric(raw.isel({GRID: slice(0, 4)}), k, "value")
    se = _by_metric(cast(xr.DataArray, np.sqrt(raw.isel({GRID: slice(4, 8)}) / size)), k, "se")
    z = float(norm.ppf(0.5 + confidence / 2))
    metric = {"metric": list(METRICS)}
    lo_bound = xr.DataArray([0.0, 0.0, 0.0, 0.0, -np.inf], dims="metric", coords=metric)
    hi_bound = xr.concat(
        [k - 1.0, *(xr.DataArray(v) for v in (1.0, 1.0, 1.0, np.inf))], dim="metric"
    ).assign_coords(metric)
    ds = xr.Dataset(
        {
            "estimate": estimate,
            "se": se,
            "lower": np.maximum(estimate - z * se, lo_bound),
            "upper": np.minimum(estimate + z * se, hi_bound),
            "ceiling": _by_metric(_ceiling(q, size, y, score_dim, kernels), k, "value"),
        }
    )
    nominal = nominal_items(p, item_dim=item_dim)
    if nominal:
        ordered = xr.DataArray([m in ORDER_METRICS for m in METRICS], dims="metric", coords=metric)
        ds = ds.where(~(p.coords["nominal"].reset_coords(drop=True) & ordered))
    ds = order_dims(ds, p, q, item_dim)
    ds["estimate"].attrs["long_name"] = "alignment of the model PMF with the human PMF"
    ds["se"].attrs["long_name"] = "standard error from the human sample (delta method)"
    ds["ceiling"].attrs["long_name"] = "expected value for two independent human samples of size N"
    ds.attrs = {
        **_METHODS,
        "confidence": confidence,
        "sample_size": size_name,
        "history": f"xlikert {__version__}: alignment",
    }
    if k.ndim:
        ds = ds.assign_coords(n_points=k)
    else:
        ds.attrs["n_points"] = int(k)
    if isinstance(model, xr.Dataset) and {"nonsubstantive_mass", "valid_mass"} <= set(model):
        ns = (
            nonsubstantive_alignment(model, human, confidence=confidence)
            if has_rate(human)
            else None
        )
        ds = ds if ns is None else ds.merge(ns, compat="override")
    if nominal:
        ds.attrs["nominal_items"] = nominal
        ds.attrs["nominal_note"] = (
            f"{', '.join(ORDER_METRICS)} need ordered options: NaN for the nominal items"
        )
    result: xr.Dataset = encode_attrs(ds)
    return result
