"""Each level's distance to the human PMFs, with the humans' SEs, and the paired
differences between levels (the xarray side of :func:`xlikert.validity`)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import xarray as xr

from ...core.errors import DesignError
from ...core.validate import as_pmf
from ..alignment.pairs import check_pair, human_parts, prepare_alignment
from ..support import nominal_items
from .core import DISTANCES, delta_variance, distance_gradients, level_pairs

__all__ = ["check_human", "level_distances", "model_population"]

#: The distances that need ordered options (NaN for a nominal item).
_ORDERED = ("wasserstein",)


def check_human(human: Any, items: list[str], item_dim: Any) -> tuple[xr.Dataset, list[str]]:
    """The human PMF Dataset at the results' items, and the human items not compared.

    Raises
    ------
    DesignError
        ``human`` without a sample size, without an item dim, or without some item of the
        results (naming the items it lacks).
    """
    q, size, _ = human_parts(human)
    if size is None:
        raise DesignError(
            "validity needs the humans' sample size: pass a human PMF Dataset with 'n' "
            "(xl.human_pmf, xl.human_pmf_from_counts), not a bare PMF"
        )
    if item_dim not in q.dims:
        raise DesignError(f"the human data have no {item_dim!r} dim; dims {tuple(q.dims)}")
    have = [str(i) for i in q[item_dim].values]
    lacking = [i for i in items if i not in have]
    if lacking:
        raise DesignError(
            f"the human data lack the results' items {lacking} (human items {have}): each "
            "reading is compared with the people on the same items; give the human data "
            f"for them, or select the items both have, results.sel({item_dim}=[...])"
        )
    unused = [i for i in have if i not in items]
    return human.sel({item_dim: items}), unused


def model_population(p: xr.DataArray, human: xr.Dataset, respondent_dim: Any) -> xr.DataArray:
    """The model's PMF of the population: a ``respondent`` factor the human data do not have
    is mixed uniformly (each respondent one person; a cell without a PMF stays NaN)."""
    if respondent_dim in p.dims and respondent_dim not in human["pmf"].dims:
        return p.mean(respondent_dim, skipna=False)
    return p


def _apply(p: xr.DataArray, q: xr.DataArray, score_dim: Any) -> tuple[xr.DataArray, ...]:
    values, grads = xr.apply_ufunc(
        distance_gradients,
        p,
        q,
        input_core_dims=[[score_dim], [score_dim]],
        output_core_dims=[["metric"], ["metric", score_dim]],
        dask="parallelized",
        output_dtypes=[np.float64, np.float64],
        dask_gufunc_kwargs={"output_sizes": {"metric": len(DISTANCES)}},
    )
    return values.assign_coords(metric=list(DISTANCES)), grads.assign_coords(metric=list(DISTANCES))


def _variance(q: xr.DataArray, g: xr.DataArray, size: xr.DataArray, score_dim: Any) -> xr.DataArray:
    one = xr.apply_ufunc(
        delta_variance, q, g, input_core_dims=[[score_dim], [score_dim]], dask="parallelized",
        output_dtypes=[np.float64],
    )  # fmt: skip
    out: xr.DataArray = np.sqrt(one / size)
    return out


def level_distances(
    p: xr.DataArray, human: xr.Dataset, dim: Any, item_dim: Any, score_dim: Any
) -> xr.Dataset:
    """Per cell: each level's W1, TV, JS to the humans with the SE, and each pair's
    difference with its paired SE; per condition: the means over the items every level
    answers, with an SE bound.

    A cell whose model PMF is NaN (a reply without an answer) has no distance; it is
    counted in ``n_unanswered`` and its item left out of that condition's means.
    """
    q_raw, _, _ = human_parts(human)
    _, reorder = check_pair(p, q_raw, score_dim, item_dim)  # one scale, the same levels
    human = human.sel(reorder) if reorder else human
    answered = p.notnull().all(score_dim)
    # a cell without a PMF reads the human PMF as a placeholder (checks pass); masked below
    p_filled = p.where(answered, as_pmf(human)).transpose(*p.dims, ...)
    p_filled, q, size_or_none, size_name, _ = prepare_alignment(
        p_filled, human, score_dim, item_dim
    )
    size = cast(xr.DataArray, size_or_none)  # check_human refused a human PMF without one
    values, grads = _apply(p_filled, q, score_dim)
    nominal = nominal_items(p, item_dim=item_dim)
    keep = answered
    if nominal:
        is_nominal = p[item_dim].isin(nominal)
        ordered = xr.DataArray([m in _ORDERED for m in DISTANCES], dims="metric")
        keep = keep & ~(is_nominal & ordered.assign_coords(metric=list(DISTANCES)))
    est = values.where(keep)
    se = _variance(q, grads, size, score_dim).where(keep)
    levels = [str(v) for v in p[dim].values]
    ia, ib, labels = level_pairs(levels)
    pa = xr.DataArray(ia, dims="pair")
    pb = xr.DataArray(ib, dims="pair")
    both = keep.isel({dim: pa}, drop=True) & keep.isel({dim: pb}, drop=True)
    diff = (est.isel({dim: pa}, drop=True) - est.isel({dim: pb}, drop=True)).where(both)
    g_diff = grads.isel({dim: pa}, drop=True) - grads.isel({dim: pb}, drop=True)
    diff_se = _variance(q, g_diff, size, score_dim).where(both)
    common = keep.all(dim)  # the items every level answers, per condition and metric
    n_items = common.sum(item_dim)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = est.where(common).sum(item_dim) / n_items
        mean_se = se.where(common).sum(item_dim) / n_items
        mean_diff = diff.where(common).sum(item_dim) / n_items
        mean_diff_se = diff_se.where(common).sum(item_dim) / n_items
    pair_coords = {"pair": labels, "level_a": ("pair", [levels[i] for i in ia]),
                   "level_b": ("pair", [levels[i] for i in ib])}  # fmt: skip
    ds = xr.Dataset(
        {
            "estimate": est, "se": se, "difference": diff, "difference_se": diff_se,
            "overall": mean.where(n_items > 0), "overall_se": mean_se.where(n_items > 0),
            "overall_difference": mean_diff.where(n_items > 0),
            "overall_difference_se": mean_diff_se.where(n_items > 0),
            "items_compared": n_items, "cells_unanswered": (~answered).sum(item_dim),
        }
    ).assign_coords(pair_coords)  # fmt: skip
    ds.attrs["sample_size"] = size_name
    ds.attrs["human_items_nominal"] = nominal
    return ds
