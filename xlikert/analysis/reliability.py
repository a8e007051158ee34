"""Exact reliability of an instrument over a population of conditions (``xl.reliability``).

(The module is ``xlikert.analysis.reliability``; the name ``xlikert.reliability``
is the function.)

Cronbach's α, McDonald's ω (one-factor model) and corrected item–total
correlations, computed from the exact item PMFs, with no sampling.

The population
--------------
The respondents are the conditions spanned by the dims ``dim`` (e.g.
personas, or targets × framings), each with equal weight: a respondent is a
condition ``c`` drawn uniformly, who then answers every item from that
condition's PMFs. Items are asked in separate prompts, so given the condition
the answers are independent, and every moment of the population is exact:

* ``Var(X_k) = mean_c Var(y | c, k) + var_c E(y | c, k)`` (within plus between),
* ``Cov(X_j, X_k) = cov_c(E(y | c, j), E(y | c, k))`` for ``j != k``,

where ``mean_c``, ``var_c`` and ``cov_c`` are over the conditions with equal
weights and divide by their number ``C`` (the population moments, the limit of
a sample of ``N -> inf`` respondents: the same mixture as
:func:`xlikert.grand_mixture`). α, ω and the item–total correlations are
invariant to a common scale of the covariance matrix ``Σ``, so the denominator
convention (``C`` or ``C - 1``, ``N`` or ``N - 1`` for a sample) does not change
them; ``Σ`` is the population covariance. Every remaining dim (e.g. ``model``)
indexes a separate population.

The coefficients, from ``Σ`` of the ``K`` items of a (sub)scale
-----------------------------------------------------------------
* ``alpha = K / (K - 1) * (1 - tr Σ / 1'Σ1)`` (Cronbach's α of the sum score);
* ``item_total``: correlation of each item with the sum of the *other* items
  of its (sub)scale (corrected item–total correlation);
* ``omega = (Σ_k λ_k)² / ((Σ_k λ_k)² + Σ_k ψ_k)`` (McDonald's ω total of the
  sum score), from a one-factor model fitted by maximum likelihood to the
  correlation matrix (the objective of R's ``factanal``, uniquenesses bounded
  below by :data:`UNIQUENESS_BOUND`; ML is scale-invariant, so this is the ML fit
  to ``Σ`` as well). The standardized loadings ``λ*_k`` are the output
  ``loading``; ω uses them on the items' own scale, ``λ_k = sd_k λ*_k``,
  ``ψ_k = sd_k² (1 - λ*_k²)``, so it is about the same unweighted sum as α. With
  ``K = 2`` items a one-factor model is not identified; ω then takes the
  symmetric solution ``λ*_1 = λ*_2 = sqrt(r)``.

Reverse-keyed items are reflected first and each subscale is its own scale,
as in :func:`xlikert.composite`.

Examples
--------
>>> import xlikert as xl
>>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 5}, n_items=4)
>>> rel = xl.reliability(pmf, dim="target")
>>> sorted(rel.data_vars), rel.alpha.dims
(['alpha', 'item_total', 'loading', 'omega'], ('model',))
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from scipy.optimize import minimize

from .._compat import renamed_keywords
from ..dims import DECODING_DIMS, factor_dims
from ..errors import DesignError
from ..io import encode_attrs
from ..validate import (
    as_pmf,
    check_fully_crossed,
    check_item_dim,
    check_pmf,
    check_score_axis,
    describe_cells,
)
from .keying import SUBSCALE_DIM, reflect_pending, subscale_groups

__all__ = [
    "CONVENTION",
    "UNIQUENESS_BOUND",
    "ZERO_VARIANCE_RTOL",
    "cronbach_alpha",
    "item_covariance",
    "item_rest_correlation",
    "mcdonald_omega",
    "one_factor_ml",
    "reliability",
]

#: Lower bound of the standardized uniquenesses in the ML fit (as R's ``factanal``
#: and ``factor_analyzer``); a fit that reaches it is a Heywood case.
UNIQUENESS_BOUND = 0.005
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


# --------------------------------------------------------------------------- array core
def item_covariance(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Exact item covariance matrix of the population of conditions.

    Parameters
    ----------
    mean, var
        ``E(y | c, k)`` and ``Var(y | c, k)``, shape ``(..., C, K)``: ``C``
        conditions (equal weights), ``K`` items independent given the condition.

    Returns
    -------
    numpy.ndarray
        ``Σ``, shape ``(..., K, K)``: the between-condition covariance of the
        item means plus, on the diagonal, the mean within-condition variance;
        moments divided by ``C``.

    Examples
    --------
    >>> item_covariance(np.array([[1.0, 2.0], [2.0, 4.0]]), np.full((2, 2), 0.5))
    array([[0.75, 0.5 ],
           [0.5 , 1.5 ]])
    """
    mean = np.asarray(mean, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    d = mean - mean.mean(axis=-2, keepdims=True)
    between = np.einsum("...cj,...ck->...jk", d, d) / mean.shape[-2]
    within = var.mean(axis=-2)
    k = mean.shape[-1]
    return between + within[..., :, None] * np.eye(k)


def cronbach_alpha(cov: np.ndarray) -> np.ndarray:
    """Cronbach's α of the sum of ``K`` items from their covariance matrix ``(..., K, K)``.

    ``alpha = K / (K - 1) * (1 - tr Σ / 1'Σ1)``.

    Examples
    --------
    >>> round(float(cronbach_alpha(np.array([[1.0, 0.5], [0.5, 1.0]]))), 12)
    0.666666666667
    """
    cov = np.asarray(cov, dtype=np.float64)
    k = cov.shape[-1]
    total = cov.sum(axis=(-2, -1))
    trace = np.trace(cov, axis1=-2, axis2=-1)
    return k / (k - 1) * (1.0 - trace / total)


def item_rest_correlation(cov: np.ndarray) -> np.ndarray:
    """Corrected item–total correlations: each item with the sum of the others, ``(..., K)``.

    Examples
    --------
    >>> item_rest_correlation(np.array([[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]]))
    array([0.57735027, 0.57735027, 0.57735027])
    """
    cov = np.asarray(cov, dtype=np.float64)
    diag = np.diagonal(cov, axis1=-2, axis2=-1)
    rows = cov.sum(axis=-1)
    total = rows.sum(axis=-1, keepdims=True)
    with_rest = rows - diag
    rest_var = total - 2.0 * rows + diag
    return with_rest / np.sqrt(diag * rest_var)


def _ml_objective(psi: np.ndarray, corr: np.ndarray) -> tuple[float, np.ndarray]:
    """R ``factanal``'s ML discrepancy for one factor and its gradient in the uniquenesses."""
    scale = 1.0 / np.sqrt(psi)
    values, vectors = np.linalg.eigh(corr * np.outer(scale, scale))
    rest = np.clip(values[:-1], 1e-300, None)  # all but the largest (ascending order)
    f = -(np.sum(np.log(rest) - rest) - 1.0 + corr.shape[0])
    load = np.sqrt(psi) * vectors[:, -1] * math.sqrt(max(values[-1] - 1.0, 0.0))
    grad = (load**2 + psi - np.diag(corr)) / psi**2
    return float(f), grad


def one_factor_ml(corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood one-factor model of a correlation matrix ``(K, K)``, ``K >= 3``.

    Minimises R ``factanal``'s discrepancy over the uniquenesses ``ψ*`` in
    ``[UNIQUENESS_BOUND, 1]`` (L-BFGS-B, analytic gradient, start
    ``(1 - 0.5 / K) / diag(R⁻¹)``); the loadings are the first eigenvector of
    ``Ψ^-1/2 R Ψ^-1/2`` scaled by ``Ψ^1/2`` and ``sqrt(θ_1 - 1)``.

    Returns
    -------
    loadings, uniquenesses
        Standardized loadings ``λ*`` (sign chosen so that their sum is
        positive) and ``1 - λ*²`` (clipped at 0).

    Examples
    --------
    >>> lam = np.array([0.8, 0.7, 0.6, 0.5])
    >>> corr = np.outer(lam, lam) + np.diag(1 - lam**2)
    >>> np.round(one_factor_ml(corr)[0], 6)
    array([0.8, 0.7, 0.6, 0.5])
    """
    corr = np.asarray(corr, dtype=np.float64)
    k = corr.shape[0]
    start = (1.0 - 0.5 / k) / np.diag(np.linalg.pinv(corr))
    start = np.clip(start, UNIQUENESS_BOUND, 1.0)
    res = minimize(
        _ml_objective,
        start,
        args=(corr,),
        jac=True,
        method="L-BFGS-B",
        bounds=[(UNIQUENESS_BOUND, 1.0)] * k,
        options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-12},
    )
    psi = res.x
    scale = 1.0 / np.sqrt(psi)
    values, vectors = np.linalg.eigh(corr * np.outer(scale, scale))
    load = np.sqrt(psi) * vectors[:, -1] * math.sqrt(max(values[-1] - 1.0, 0.0))
    if load.sum() < 0:
        load = -load
    return load, np.clip(1.0 - load**2, 0.0, None)


def mcdonald_omega(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """McDonald's ω of the unweighted sum, and the standardized loadings, from ``Σ (..., K, K)``.

    A one-factor model is fitted to the correlation matrix (:func:`one_factor_ml`;
    ``K = 2``: ``λ*_1 = λ*_2 = sqrt(|r|)``, the second signed like ``r``), then
    ``ω = (Σ λ)² / ((Σ λ)² + Σ ψ)`` with ``λ_k = sd_k λ*_k`` and
    ``ψ_k = sd_k² (1 - λ*_k²)``.

    Returns
    -------
    omega, loadings
        Shapes ``(...)`` and ``(..., K)``.

    Examples
    --------
    >>> lam = np.array([0.8, 0.7, 0.6])
    >>> corr = np.outer(lam, lam) + np.diag(1 - lam**2)
    >>> omega, loadings = mcdonald_omega(corr)
    >>> round(float(omega), 6), round(float(lam.sum() ** 2 / (lam.sum() ** 2 + 1.51)), 6)
    (0.744932, 0.744932)
    """
    cov = np.asarray(cov, dtype=np.float64)
    k = cov.shape[-1]
    batch = cov.shape[:-2]
    omega = np.empty(batch)
    loadings = np.empty((*batch, k))
    for idx in np.ndindex(*batch):
        c = cov[idx]
        sd = np.sqrt(np.diag(c))
        corr = c / np.outer(sd, sd)
        if k == 2:
            r = corr[0, 1]
            lam_std = math.sqrt(abs(r)) * np.array([1.0, math.copysign(1.0, r)])
        else:
            lam_std, _ = one_factor_ml(corr)
        lam = sd * lam_std
        psi = sd**2 * np.clip(1.0 - lam_std**2, 0.0, None)
        common = lam.sum() ** 2
        omega[idx] = common / (common + psi.sum())
        loadings[idx] = lam_std
    return omega, loadings


# --------------------------------------------------------------------------- xarray layer
def _as_list(dims: Hashable | Iterable[Hashable]) -> list[Hashable]:
    if isinstance(dims, str) or not isinstance(dims, Iterable):
        return [dims]
    return list(dims)


def _check_respondents(
    pmf: xr.DataArray, dim: Any, factors: list[Hashable], item_dim, score_dim
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


@renamed_keywords(respondent_dims="dim")
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
    pmf
        Item PMFs ``(*factors, item, score)`` or a results Dataset (its ``pmf``).
        The decoding grid (``temperature``, ``top_p``) is carried along like a
        remaining factor.
    dim : keyword-only
        The factor(s) whose conditions are the respondents, drawn uniformly
        (e.g. ``"persona"`` or ``["target", "prompt"]``); together at least two
        conditions. ``respondent_dims=`` is its deprecated name.
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
    used = np.concatenate([idx for _, idx in groups])
    used.sort()

    scale_dims = [*remaining, SUBSCALE_DIM] if named else remaining
    stack = (lambda xs: np.stack(xs, axis=-1)) if named else (lambda xs: xs[0])
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
    attrs: dict[str, Any] = {
        "respondent_dims": [str(d) for d in respondents],
        "n_conditions": int(np.prod([pmf.sizes[d] for d in respondents])),
        "convention": CONVENTION,
    }
    flagged = "reflected" in pmf.coords and pmf["reflected"].dims == (item_dim,)
    if flagged and np.asarray(pmf["reflected"].values, dtype=bool).any():
        attrs["reflected_items"] = json.dumps(
            ids[np.asarray(pmf["reflected"].values, dtype=bool)].tolist()
        )
    if used.size < ids.size:
        attrs["items_without_subscale"] = json.dumps(np.delete(ids, used).tolist())
    ds.attrs = attrs
    return encode_attrs(ds)


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
    support = xr.DataArray(y, dims=score_dim)
    mean = (pmf * support).sum(score_dim)
    var = (pmf * (support - mean) ** 2).sum(score_dim).clip(min=0.0)
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
