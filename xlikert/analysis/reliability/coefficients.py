"""Cronbach's α, McDonald's ω and corrected item–total correlations of a covariance matrix.

Plain numpy on ``(..., K, K)`` item covariance matrices (any leading dims are separate
populations); the conventions are in :mod:`xlikert.analysis.reliability`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

__all__ = [
    "UNIQUENESS_BOUND",
    "cronbach_alpha",
    "item_covariance",
    "item_rest_correlation",
    "mcdonald_omega",
    "one_factor_ml",
]

#: Lower bound of the standardized uniquenesses in the ML fit (as R's ``factanal``
#: and ``factor_analyzer``); a fit that reaches it is a Heywood case.
UNIQUENESS_BOUND = 0.005


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
    out: np.ndarray = between + within[..., :, None] * np.eye(k)
    return out


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
    out: np.ndarray = k / (k - 1) * (1.0 - trace / total)
    return out


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
    out: np.ndarray = with_rest / np.sqrt(diag * rest_var)
    return out


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
