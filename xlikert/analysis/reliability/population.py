"""The exact population of conditions: :func:`reliability` (``xl.reliability``).

The respondents are the conditions spanned by ``dim``, each answering every item
independently from its exact PMFs; the item covariance is exact (see
:mod:`xlikert.analysis.reliability`), and :mod:`.coefficients` turns it into α, ω and
the item–total correlations.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ...core.dims import DECODING_DIMS, SUBSCALE_DIM, factor_dims
from ...core.errors import DesignError
from ...core.io import encode_attrs
from ...core.schema import N_CONDITIONS_ATTR, RESPONDENT_DIMS_ATTR
from ...core.validate import (
    as_pmf,
    check_fully_crossed,
    check_item_dim,
    check_pmf,
    check_score_axis,
    describe_cells,
)
from ..keying import reflect_pending, subscale_groups
from ..support import require_ordinal
from .coefficients import (
    UNIQUENESS_BOUND,
    cronbach_alpha,
    item_covariance,
    item_rest_correlation,
    mcdonald_omega,
)

__all__ = ["CONVENTION", "ZERO_VARIANCE_RTOL", "reliability"]

#: An item whose population variance is at most this times ``(y_max - y_min)²`` has none.
ZERO_VARIANCE_RTOL = 1e-12


#: How the population and the coefficients are defined (the result's ``attrs["convention"]``).
CONVENTION = (
    "population: the conditions spanned by the respondent dims, equal weights; items independent "
    "given the condition. Sigma_kk = mean_c Var(y|c,k) + var_c E(y|c,k), Sigma_jk = "
    "cov_c(E(y|c,j), E(y|c,k)), moments over conditions divided by their number (population "
    "covariance; alpha, omega, item_total are scale-free, so the convention does not change "
    "them). alpha = K/(K-1) (1 - tr Sigma / 1'Sigma 1); item_total = corr(item, sum of the "
    "other items of its subscale); omega = (sum lambda)^2 / ((sum lambda)^2 + sum psi) of the "
    "unweighted sum, one-factor ML fit to the correlation matrix (factanal objective, "
    f"uniquenesses >= {UNIQUENESS_BOUND}), lambda_k = sd_k * loading_k, psi_k = sd_k^2 "
    "(1 - loading_k^2); K = 2: loading = sqrt(r) for both items. Reverse-keyed items reflected "
    "first; each subscale its own scale."
)


_RESPONDENT = "_respondent"


def _as_list(dims: Hashable | Iterable[Hashable]) -> list[Hashable]:
    if isinstance(dims, str) or not isinstance(dims, Iterable):
        return [dims]
    return list(dims)


def _check_respondents(
    pmf: xr.DataArray,
    dim: Any,
    factors: list[Hashable],
    item_dim: Hashable,
    score_dim: Hashable,
) -> list[Hashable]:
    if dim is None:
        raise DesignError(
            f"dim (the respondents) is required: the factors whose conditions form the "
            f"population of respondents (e.g. personas), out of {factors}"
        )
    chosen = _as_list(dim)
    if not chosen:
        raise DesignError(f"dim (the respondents) is empty; choose factors out of {factors}")
    if len(set(chosen)) != len(chosen):
        raise DesignError(f"dim (the respondents) names a factor twice: {chosen}")
    for d in chosen:
        if d in (item_dim, score_dim):
            raise DesignError(
                f"dim (the respondents): {d!r} is the {'item' if d == item_dim else 'score'} "
                f"dimension, not a factor; choose factors out of {factors}"
            )
        if d not in factors:
            raise DesignError(
                f"dim (the respondents): {d!r} is not a factor of the PMF; its factors are "
                f"{factors}"
            )
    n = int(np.prod([pmf.sizes[d] for d in chosen]))
    if n < 2:
        levels = {str(d): pmf[d].values.tolist() if d in pmf.coords else 0 for d in chosen}
        raise DesignError(
            f"the population spanned by the respondent dims {chosen} has a single condition "
            f"({levels}): reliability needs at least two conditions (respondents) to vary "
            "between; add a factor with two or more levels"
        )
    return [d for d in pmf.dims if d in chosen]


def _item_ids(pmf: xr.DataArray, item_dim: Hashable) -> np.ndarray:
    if item_dim in pmf.coords:
        return np.asarray(pmf[item_dim].values).astype(str)
    return np.arange(pmf.sizes[item_dim]).astype(str)


def reliability(
    pmf: xr.DataArray | xr.Dataset,
    *,
    dim: Hashable | Sequence[Hashable],
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Hashable | xr.DataArray | Sequence[str] | Mapping[str, str] | None = SUBSCALE_DIM,
) -> xr.Dataset:
    """Exact Cronbach's α, McDonald's ω and corrected item–total correlations.

    The population of respondents is the set of conditions spanned by
    ``dim``, with equal weights; every other factor (e.g.
    ``model``) indexes a separate population. Each condition answers the
    items independently from its exact PMFs, so the item covariance matrix is
    exact (within-condition variance plus between-condition covariance of the
    item means; see :mod:`xlikert.analysis.reliability` for the formulas and the
    conventions, also in ``attrs["convention"]``). Reverse-keyed items are
    reflected first, and an instrument with two or more subscales gets one α
    and ω per subscale, as :func:`xlikert.composite` scores it.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs ``(*factors, item, score)`` or a results Dataset (its ``pmf``).
        The decoding grid (``temperature``, ``top_p``) is carried along like a
        remaining factor.
    dim : keyword-only
        The factor(s) whose conditions are the respondents, drawn uniformly
        (e.g. ``"persona"`` or ``["target", "prompt"]``); together at least two
        conditions.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect : keyword-only
        If True (default), reflect the reverse-keyed items (item coordinate
        ``reverse_keyed``) not yet reflected; False: use the PMFs as given.
    subscale : keyword-only
        The item coordinate grouping the items into subscales (default
        ``"subscale"``; fewer than two subscales: one scale of all items), a
        per-item spec (str DataArray on ``item_dim``, sequence, mapping item id
        -> subscale), or None (one scale). Items with subscale ``""`` are left
        out when there are subscales (attr ``items_without_subscale``).

    Returns
    -------
    xr.Dataset
        ``alpha`` and ``omega`` with dims ``(*remaining, [subscale])``;
        ``item_total`` (corrected item–total correlation, within the item's
        subscale) and ``loading`` (standardized one-factor loading) with dims
        ``(*remaining, item)``. ``remaining`` are the factors not in
        ``dim``, in the PMF's order. With subscales the ``subscale``
        dim carries ``n_items`` and the item coordinate ``item_subscale`` names each
        item's subscale (the dim takes the name ``subscale``). Attrs (netCDF-ready):
        ``respondent_dims``, ``n_conditions``, ``convention`` and, when any,
        ``reflected_items`` and ``items_without_subscale``. Dask input is
        reduced to item moments lazily, then those (small) arrays are loaded.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    DesignError
        ``dim`` missing, empty, not factors of the PMF, or spanning a
        single condition; a (sub)scale with fewer than two items; an item with
        zero variance in the population, or a sum score with zero variance
        (naming the item and the condition); a reserved factor name.
    InvalidPMFError
        Malformed PMFs (negative or NaN mass, not summing to 1, bad score axis).

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "persona": 6}, n_items=4, scale=(1, 5))
    >>> rel = xl.reliability(pmf, dim="persona")
    >>> rel.alpha.dims, rel.item_total.dims, int(rel.attrs["n_conditions"])
    (('model',), ('model', 'item'), 6)
    >>> keyed = pmf.assign_coords(subscale=("item", ["E", "E", "A", "A"]),
    ...                           reverse_keyed=("item", [False, True, False, False]))
    >>> xl.reliability(keyed, dim="persona").alpha.dims
    ('model', 'subscale')
    """
    pmf = as_pmf(pmf)
    require_ordinal(pmf, "reliability", item_dim=item_dim)
    factors = factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    check_item_dim(pmf, item_dim)
    y = check_score_axis(pmf, score_dim).astype(np.float64)
    respondents = _check_respondents(pmf, dim, factors, item_dim, score_dim)
    check_fully_crossed(pmf, [d for d in pmf.dims if d not in (item_dim, score_dim)], score_dim)
    pmf = check_pmf(pmf, score_dim)
    if reflect:
        pmf = reflect_pending(pmf, item_dim=item_dim, score_dim=score_dim)
    ids = _item_ids(pmf, item_dim)
    groups = subscale_groups(pmf, subscale, item_dim=item_dim)
    named = groups is not None
    if groups is None:
        groups = [("", np.arange(ids.size))]
    _check_group_sizes(groups, ids, named)
    remaining = [d for d in pmf.dims if d not in (*respondents, item_dim, score_dim)]

    cov = _population_covariance(pmf, y, respondents, remaining, item_dim, score_dim)
    item_coords = {c: pmf[c].variable for c in pmf.coords if pmf[c].dims == (item_dim,)}
    rem_coords = {
        c: pmf[c].variable
        for c in pmf.coords
        if c not in item_coords and set(pmf[c].dims) <= set(remaining)
    }
    spread = (y[-1] - y[0]) ** 2
    _check_item_variance(
        cov, spread, remaining, item_dim, pmf, rem_coords, item_coords, respondents
    )
    alphas, omegas, item_total, loading = _fit_groups(
        cov, groups, ids.size, spread, named, remaining, pmf, respondents
    )
    used = np.sort(np.concatenate([idx for _, idx in groups]))
    ds = _reliability_dataset(
        (alphas, omegas, item_total, loading), groups, used, ids, named, remaining,
        rem_coords, item_coords, item_dim,
    )  # fmt: skip
    ds.attrs = _reliability_attrs(pmf, respondents, ids, used, item_dim)
    out: xr.Dataset = encode_attrs(ds)
    return out


def _reliability_dataset(
    fits: tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray],
    groups: list[tuple[str, np.ndarray]],
    used: np.ndarray,
    ids: np.ndarray,
    named: bool,
    remaining: list[Hashable],
    rem_coords: dict[Hashable, xr.Variable],
    item_coords: dict[Hashable, xr.Variable],
    item_dim: Hashable,
) -> xr.Dataset:
    """``alpha``, ``omega`` per (sub)scale and ``item_total``, ``loading`` per used item."""
    alphas, omegas, item_total, loading = fits
    scale_dims = [*remaining, SUBSCALE_DIM] if named else remaining

    def stack(xs: list[np.ndarray]) -> np.ndarray:
        return np.stack(xs, axis=-1) if named else xs[0]

    coords: dict[Hashable, Any] = dict(rem_coords)
    if named:
        coords[SUBSCALE_DIM] = np.array([g for g, _ in groups], dtype=str)
        coords["n_items"] = (SUBSCALE_DIM, np.array([i.size for _, i in groups], dtype=np.int64))
    items = {c: v.isel({item_dim: used}) for c, v in item_coords.items()}
    if named:  # the subscale dim takes the name: each item's subscale is ``item_subscale``
        items.pop(SUBSCALE_DIM, None)
        labels = np.empty(ids.size, dtype=object)
        for g, idx in groups:
            labels[idx] = g
        items["item_subscale"] = xr.Variable(item_dim, labels[used].astype(str))
    ds = xr.Dataset(
        {
            "alpha": (scale_dims, stack(alphas)),
            "omega": (scale_dims, stack(omegas)),
            "item_total": ([*remaining, item_dim], item_total[..., used]),
            "loading": ([*remaining, item_dim], loading[..., used]),
        },
        coords={**coords, **items},
    )
    ds["alpha"].attrs = {"long_name": "Cronbach's alpha of the sum score"}
    ds["omega"].attrs = {"long_name": "McDonald's omega total (one-factor ML) of the sum score"}
    ds["item_total"].attrs = {
        "long_name": "corrected item-total correlation (item vs the sum of the other items "
        "of its subscale)"
    }
    ds["loading"].attrs = {"long_name": "standardized loading of the one-factor ML model"}
    return ds


def _reliability_attrs(
    pmf: xr.DataArray,
    respondents: list[Hashable],
    ids: np.ndarray,
    used: np.ndarray,
    item_dim: Hashable,
) -> dict[str, Any]:
    """The population, the convention, the items reflected and those without a subscale."""
    attrs: dict[str, Any] = {
        RESPONDENT_DIMS_ATTR: [str(d) for d in respondents],
        N_CONDITIONS_ATTR: int(np.prod([pmf.sizes[d] for d in respondents])),
        "convention": CONVENTION,
    }
    flagged = "reflected" in pmf.coords and pmf["reflected"].dims == (item_dim,)
    if flagged and np.asarray(pmf["reflected"].values, dtype=bool).any():
        attrs["reflected_items"] = json.dumps(
            ids[np.asarray(pmf["reflected"].values, dtype=bool)].tolist()
        )
    if used.size < ids.size:
        attrs["items_without_subscale"] = json.dumps(np.delete(ids, used).tolist())
    return attrs


def _check_group_sizes(groups: list[tuple[str, np.ndarray]], ids: np.ndarray, named: bool) -> None:
    """Every (sub)scale needs two items for α, ω and item–total correlations."""
    for name, idx in groups:
        if idx.size < 2:
            where = f"subscale {name!r}" if named else "the instrument"
            raise DesignError(
                f"{where} has {idx.size} item ({', '.join(ids[idx])}): α, ω and item–total "
                "correlations need at least two items"
            )


def _population_covariance(
    pmf: xr.DataArray,
    y: np.ndarray,
    respondents: list[Hashable],
    remaining: list[Hashable],
    item_dim: Hashable,
    score_dim: Hashable,
) -> np.ndarray:
    """``(*remaining, item, item)`` exact covariance of the items over the conditions.

    The exact moments of every (condition, item) from its PMF, then
    :func:`item_covariance` over the conditions spanned by ``respondents``.
    """
    support = xr.DataArray(y, dims=(score_dim,))
    mean = (pmf * support).sum([score_dim])
    var = (pmf * (support - mean) ** 2).sum([score_dim]).clip(min=0.0)
    order = [*remaining, _RESPONDENT, item_dim]
    mean_np = mean.stack({_RESPONDENT: respondents}, create_index=False).transpose(*order)
    var_np = var.stack({_RESPONDENT: respondents}, create_index=False).transpose(*order)
    return item_covariance(np.asarray(mean_np.values), np.asarray(var_np.values))


def _check_item_variance(
    cov: np.ndarray,
    spread: float,
    remaining: list[Hashable],
    item_dim: Hashable,
    pmf: xr.DataArray,
    rem_coords: dict[Hashable, Any],
    item_coords: dict[Hashable, Any],
    respondents: list[Hashable],
) -> None:
    """An item that does not vary over the conditions is named (α and ω would be NaN)."""
    diag = xr.DataArray(
        np.diagonal(cov, axis1=-2, axis2=-1),
        dims=[*remaining, item_dim],
        coords={
            **rem_coords,
            **({item_dim: item_coords[item_dim]} if item_dim in pmf.coords else {}),
        },
    )
    flat = diag <= ZERO_VARIANCE_RTOL * spread
    if bool(flat.any()):
        raise DesignError(
            f"items with zero variance over the conditions of {respondents} at "
            f"{describe_cells(flat)}: every condition gives the same single answer, so the "
            "item does not vary between respondents; leave the item out (pmf.drop_sel) or "
            "choose other respondents (dim=)"
        )


def _fit_groups(
    cov: np.ndarray,
    groups: list[tuple[str, np.ndarray]],
    n_items: int,
    spread: float,
    named: bool,
    remaining: list[Hashable],
    pmf: xr.DataArray,
    respondents: list[Hashable],
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray]:
    """α, ω, corrected item–total r and loadings of every (sub)scale's sum score."""
    alphas, omegas = [], []
    item_total = np.full((*cov.shape[:-2], n_items), np.nan)
    loading = np.full_like(item_total, np.nan)
    for name, idx in groups:
        sub = cov[..., idx[:, None], idx[None, :]]
        total = sub.sum(axis=(-2, -1))
        if np.any(total <= ZERO_VARIANCE_RTOL * spread):
            bad = xr.DataArray(total <= ZERO_VARIANCE_RTOL * spread, dims=remaining)
            bad = bad.assign_coords({d: pmf[d].variable for d in remaining if d in pmf.coords})
            where = f"subscale {name!r}" if named else "the instrument"
            raise DesignError(
                f"the sum score of {where} has zero variance over the conditions of "
                f"{respondents}"
                + (f" at {describe_cells(bad)}" if remaining else "")
                + ": its items cancel out exactly; α and ω are undefined"
            )
        alphas.append(cronbach_alpha(sub))
        om, lam = mcdonald_omega(sub)
        omegas.append(om)
        item_total[..., idx] = item_rest_correlation(sub)
        loading[..., idx] = lam
    return alphas, omegas, item_total, loading
