"""Exact moments of one sampled composite answer, and the standard error of ``N`` of them."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import cast

import numpy as np
import xarray as xr

from ...core.dims import DECODING_DIMS, SUBSCALE_DIM, factor_dims
from ...core.errors import DesignError, InvalidPMFError
from ...core.validate import (
    as_pmf,
    check_item_dim,
    check_pmf,
    check_score_axis,
)
from ..keying import reflect_pending, subscale_coords, subscale_groups
from ..support import require_ordinal

__all__ = [
    "DEFAULT_BUDGETS",
    "budget_axis",
    "composite_aux",
    "composite_moments",
    "design_factors",
    "mixture_moments",
    "standard_error",
]

#: Per-condition budgets of the paper's tables.
DEFAULT_BUDGETS: tuple[int, ...] = (10, 100, 1000)


def composite_aux(pmf: xr.DataArray, item_dim: Hashable) -> list[Hashable]:
    """``["subscale"]`` for composite PMFs (no item dim), whose subscale dim is xlikert's own."""
    return [] if item_dim in pmf.dims else [SUBSCALE_DIM]


def design_factors(
    pmf: xr.DataArray,
    factors: Hashable | Sequence[Hashable] | None,
    item_dim: Hashable,
    score_dim: Hashable,
) -> list[Hashable]:
    """The factors of a design PMF; every other dim must be a core dim (no batch dims)."""
    aux = composite_aux(pmf, item_dim)
    fac = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim, auxiliary=aux)
    extra = [d for d in pmf.dims if d not in fac and d not in (item_dim, score_dim, *aux)]
    if extra:
        raise DesignError(f"dims {extra} are neither factors nor item/score")
    return fac


def budget_axis(n: int | Sequence[int]) -> xr.DataArray:
    values = np.atleast_1d(np.asarray(n))
    if values.ndim != 1 or values.size == 0:
        raise InvalidPMFError(
            f"budget n must be a positive integer or a 1-D list of them, got {n!r}"
        )
    if (
        not np.issubdtype(values.dtype, np.number)
        or np.any(values != np.round(values))
        or np.any(values < 1)
    ):
        raise InvalidPMFError(f"budget n must hold positive integers, got {values.tolist()}")
    values = values.astype(np.int64)
    return xr.DataArray(values, dims="n", coords={"n": values}, name="n")


def composite_moments(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Hashable | None = SUBSCALE_DIM,
) -> xr.Dataset:
    """Exact mean and variance of one sampled composite answer per condition.

    Items are context-isolated and therefore independent given the condition,
    so the composite ``S = sum_k Y_k`` has ``E[S] = sum_k E[Y_k]`` and
    ``Var(S) = sum_k Var(Y_k)``. The composite is :func:`xlikert.composite`'s:
    reverse-keyed items reflected, one composite per subscale.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``); a composite PMF (no ``item_dim``) is accepted
        too. The decoding grid (``temperature``, ``top_p``) is carried along.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.
    reflect, subscale : keyword-only
        As in :func:`xlikert.composite`: ``reflect=False`` keeps the answers
        as given, ``subscale=None`` sums all items.

    Returns
    -------
    xr.Dataset
        ``mean`` and ``var`` with dims ``(*factors)``, plus ``subscale``
        (with its ``n_items`` coordinate) for an instrument with subscales.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order: no sum of scores), naming it.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> m = composite_moments(synthetic_pmf({"model": 2}, n_items=3))
    >>> sorted(m.data_vars), dict(m.sizes)
    (['mean', 'var'], {'model': 2})
    """
    pmf = as_pmf(pmf)
    require_ordinal(pmf, "the composite's moments", item_dim=item_dim)
    aux = [*DECODING_DIMS, *composite_aux(pmf, item_dim)]
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=aux)
    pmf = check_pmf(pmf, score_dim)
    groups = None
    if item_dim in pmf.dims:
        check_item_dim(pmf, item_dim)
        if reflect:
            pmf = reflect_pending(pmf, item_dim=item_dim, score_dim=score_dim)
        groups = subscale_groups(pmf, subscale, item_dim=item_dim)
        pmf = pmf.drop_vars([c for c in pmf.coords if c != item_dim and item_dim in pmf[c].dims])
    y = pmf[score_dim].astype(float)
    mean_k = (pmf * y).sum([score_dim])
    var_k = (pmf * y**2).sum([score_dim]) - mean_k**2
    moments = xr.Dataset({"mean": mean_k, "var": var_k.clip(min=0.0)})
    if item_dim not in pmf.dims:
        return moments
    if groups is None:
        return moments.sum([item_dim])
    # one row of 0/1 weights per subscale: each subscale's composite is the sum of its items
    weights = np.zeros((len(groups), pmf.sizes[item_dim]))
    for row, (_, idx) in enumerate(groups):
        weights[row, idx] = 1.0
    y_range = check_score_axis(pmf, score_dim)
    names, sizes = [g for g, _ in groups], [idx.size for _, idx in groups]
    w = xr.DataArray(weights, dims=(SUBSCALE_DIM, item_dim)).assign_coords(
        subscale_coords(names, sizes, int(y_range[0]), int(y_range[-1]))
    )
    moments = moments.drop_vars([item_dim], errors="ignore")
    return moments.map(lambda m: xr.dot(m, w, dim=[item_dim]).transpose(..., SUBSCALE_DIM))


def standard_error(
    pmf: xr.DataArray | xr.Dataset,
    n: int | Sequence[int] = DEFAULT_BUDGETS,
    *,
    dim: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Standard error of the ``N``-sample estimator of the composite score.

    Per condition the estimator is the mean of ``N`` sampled composite answers,
    ``SE = SD(S) / sqrt(N)``. With ``dim``, the estimator is the mean over the
    conditions along ``dim`` (e.g. a model-level score averaged over targets),
    each sampled ``N`` times independently:
    ``SE = sqrt(mean_c Var(S_c) / |dim|) / sqrt(N)``.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs ``(*factors, item, score)`` (or composite PMFs), or a
        results Dataset (its ``pmf``).
    n : int or sequence of int
        Per-condition budget(s); the result has a dim ``n``.
    dim : keyword-only
        Factor(s) the estimator averages over, or None (per condition).
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Returns
    -------
    xr.DataArray
        ``se`` with dims ``(*remaining factors, [subscale], n)``.

    Raises
    ------
    DesignError
        ``dim`` not a factor, or a factor with a name xlikert reserves
        (:mod:`xlikert.core.dims`; e.g. ``n``, which the result adds).

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=4)
    >>> se = standard_error(pmf, n=[10, 1000])
    >>> dict(se.sizes)
    {'model': 2, 'target': 3, 'n': 2}
    >>> bool(np.allclose(se.sel(n=10) / se.sel(n=1000), 10.0))
    True
    """
    pmf = as_pmf(pmf)
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=composite_aux(pmf, item_dim))
    var = composite_moments(pmf, item_dim=item_dim, score_dim=score_dim)["var"]
    if dim is not None:
        dims = factor_dims(var, dim, item_dim=None, score_dim=None, auxiliary=[SUBSCALE_DIM])
        size = int(np.prod([var.sizes[d] for d in dims]))
        var = var.mean(dims) / size
    out = cast(xr.DataArray, np.sqrt(var) / np.sqrt(budget_axis(n)))
    out.name = "se"
    out.attrs = {
        "long_name": "standard error of the N-sample composite estimator",
        "units": "composite-score points",
    }
    return out


def mixture_moments(
    mean: xr.DataArray, var: xr.DataArray, dim: Hashable | Sequence[Hashable]
) -> xr.Dataset:
    """Exact mean and variance of the uniform mixture over ``dim`` of per-cell moments.

    ``E = mean(E_c)``, ``Var = mean(Var_c + E_c^2) - E^2`` (law of total variance): the
    moments of one answer of a condition drawn uniformly from the cells along ``dim``
    (no dim: the moments as given).

    Parameters
    ----------
    mean, var : xr.DataArray
        The mean and variance of one answer of each cell.
    dim : hashable or sequence of hashable
        The dims to mix over.

    Returns
    -------
    xr.Dataset
        ``mean`` and ``var`` of the mixture, with the dims of ``mean`` less ``dim``.

    Examples
    --------
    >>> m = xr.DataArray([0.0, 2.0], dims="a"); v = xr.DataArray([1.0, 1.0], dims="a")
    >>> float(mixture_moments(m, v, ["a"])["var"])
    2.0
    """
    dims = list(dim) if isinstance(dim, Sequence) and not isinstance(dim, str) else [dim]
    if not dims:
        return xr.Dataset({"mean": mean, "var": var})
    e = mean.mean(dims)
    v = (var + mean**2).mean(dims) - e**2
    return xr.Dataset({"mean": e, "var": v.clip(min=0.0)})
