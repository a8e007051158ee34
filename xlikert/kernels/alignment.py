"""Alignment of a PMF with a sampled (human) PMF, and its multinomial sampling error.

Both PMFs live on the same ``n`` consecutive integer scores ``y``. The model
PMF ``p`` is exact; the human PMF ``q`` is the share of ``N`` respondents in
each category, so ``N q`` is multinomial with covariance ``N (diag q - q q')``.

:func:`alignment_metrics` ``(n), (n), (n), (8) -> (8)`` returns, in order,

0. ``W1 = sum_k |F_p(k) - F_q(k)|``, the Wasserstein-1 distance on the scale
   (unit spacing, so the sum runs over the first ``n - 1`` CDF values);
1. ``TV = 1/2 sum_j |p_j - q_j|``;
2. ``JS = 1/2 KL(p || m) + 1/2 KL(q || m)``, ``m = (p + q)/2``, in bits (log base 2);
3. ``mean(p) - mean(q)``;

and in positions 4..7 the delta-method variance of each metric for one
respondent, ``sum_j q_j g_j^2 - (sum_j q_j g_j)^2`` with ``g = d metric / d q``
(the variance for ``N`` respondents is this divided by ``N``). The gradients:
``W1``: ``g_j = sum_{k >= j, k < n} sign(F_q(k) - F_p(k))``; ``TV``:
``g_j = sign(q_j - p_j) / 2``; ``JS``: ``g_j = log2(q_j / m_j) / 2`` (a category
with ``q_j = 0`` has weight 0); mean difference: ``g_j = -y_j``. Where the
metric is not differentiable (``F_q(k) = F_p(k)``, ``q_j = p_j``) the sign is 0.

:func:`noise_ceiling` ``(n), (n), (), (4) -> (4)`` returns the expected
``W1``, ``TV``, ``JS`` and ``|mean difference|`` between two independent
samples of ``N`` respondents drawn from ``q``:

* ``W1`` and ``TV`` exactly when ``N`` is an integer: each term is
  ``E|X - X'| / N`` for two independent binomials ``X, X' ~ Bin(N, r)``
  (``r = F_q(k)`` for ``W1``, ``r = q_j`` for ``TV``), and for i.i.d. integer
  variables ``E|X - X'| = 2 sum_t F(t) (1 - F(t))`` (Gini's mean difference);
  for a non-integer ``N`` (a Kish effective sample size) the normal
  approximation ``E|X - X'| / N = 2 sqrt(r (1 - r) / (pi N))``;
* ``JS`` by its second-order expansion ``JS ~ sum_j (d_j)^2 / (8 m_j ln 2)``,
  whose expectation is ``(K+ - 1) / (4 N ln 2)`` bits, ``K+`` the number of
  categories with ``q_j > 0``;
* ``|mean difference|`` by the normal approximation ``2 SD(q) / sqrt(pi N)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._compile import guvectorize  # numba.guvectorize under a cross-process compile lock

__all__ = [
    "N_METRICS",
    "alignment_metrics",
    "alignment_metrics_numpy",
    "noise_ceiling",
    "noise_ceiling_numpy",
]

#: Number of metrics of :func:`alignment_metrics` (it returns twice as many values).
N_METRICS = 4


@numba.njit(cache=True)
def _gini_binomial(size: float, r: float, exact: bool) -> float:  # pragma: no cover - compiled
    """``E|X - X'| / size`` for independent ``X, X' ~ Bin(size, r)``."""
    if r <= 0.0 or r >= 1.0:
        return 0.0
    if not exact:
        return 2.0 * math.sqrt(r * (1.0 - r) / (math.pi * size))
    m = int(size)
    lr = math.log(r)
    l1r = math.log1p(-r)
    base = math.lgamma(m + 1.0)
    cdf = 0.0
    acc = 0.0
    for t in range(m):
        logpmf = base - math.lgamma(t + 1.0) - math.lgamma(m - t + 1.0) + t * lr + (m - t) * l1r
        cdf = min(cdf + math.exp(logpmf), 1.0)
        acc += cdf * (1.0 - cdf)
    return 2.0 * acc / size


@guvectorize(
    ["void(float64[:], float64[:], float64[:], float64[:], float64[:])"],
    "(n),(n),(n),(m)->(m)",
    nopython=True,
    cache=True,
)
def alignment_metrics(
    p: np.ndarray, q: np.ndarray, y: np.ndarray, grid: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """W1, TV, JS (bits), mean difference of ``p`` vs ``q``, then their one-respondent variances.

    A gufunc, ``(n),(n),(n),(m)->(m)`` with ``m = 8``.

    Parameters
    ----------
    p : numpy.ndarray
        ``(..., n)``: the exact (model) PMF.
    q : numpy.ndarray
        ``(..., n)``: the sampled (human) PMF.
    y : numpy.ndarray
        ``(..., n)``: the consecutive scale values.
    grid : numpy.ndarray
        ``(..., 8)``; only its length is read.
    out : numpy.ndarray, optional
        ``(..., 8)``, filled in place.

    Returns
    -------
    numpy.ndarray
        ``(..., 8)``: the four metrics, then the delta-method variance of each
        for one respondent (divide by ``N`` for the variance of the estimate).

    Examples
    --------
    >>> import numpy as np
    >>> out = alignment_metrics(np.array([1.0, 0, 0]), np.array([0, 0, 1.0]),
    ...                         np.arange(1.0, 4), np.zeros(8))
    >>> out[:4].tolist()
    [2.0, 1.0, 1.0, -2.0]
    """
    n = p.shape[0]
    ln2 = math.log(2.0)
    for i in range(out.shape[0]):
        out[i] = 0.0
    fp = 0.0
    fq = 0.0
    for j in range(n):
        fp += p[j]
        fq += q[j]
        if j < n - 1:
            out[0] += abs(fp - fq)
        out[1] += 0.5 * abs(p[j] - q[j])
        m = 0.5 * (p[j] + q[j])
        if p[j] > 0.0:
            out[2] += 0.5 * p[j] * math.log(p[j] / m) / ln2
        if q[j] > 0.0:
            out[2] += 0.5 * q[j] * math.log(q[j] / m) / ln2
        out[3] += (p[j] - q[j]) * y[j]
    # delta method: sum_j q_j g_j^2 - (sum_j q_j g_j)^2, g the gradient in q; the W1
    # gradient g_j = sum_{k=j}^{n-2} sign(F_q(k) - F_p(k)) accumulates from the top
    s1 = np.zeros(4)
    s2 = np.zeros(4)
    g = np.zeros(4)
    gw = 0.0
    for j in range(n - 1, -1, -1):
        if j < n - 1:  # fp, fq hold F(j) here
            if fq - fp > 0.0:
                gw += 1.0
            elif fq - fp < 0.0:
                gw -= 1.0
        fp -= p[j]
        fq -= q[j]
        g[0] = gw
        g[1] = 0.0
        if q[j] > p[j]:
            g[1] = 0.5
        elif q[j] < p[j]:
            g[1] = -0.5
        g[2] = 0.0
        if q[j] > 0.0:
            g[2] = 0.5 * math.log(q[j] / (0.5 * (p[j] + q[j]))) / ln2
        g[3] = -y[j]
        for i in range(4):
            s1[i] += q[j] * g[i]
            s2[i] += q[j] * g[i] * g[i]
    for i in range(4):
        out[4 + i] = max(s2[i] - s1[i] * s1[i], 0.0)


@guvectorize(
    ["void(float64[:], float64[:], float64, float64[:], float64[:])"],
    "(n),(n),(),(m)->(m)",
    nopython=True,
    cache=True,
)
def noise_ceiling(
    q: np.ndarray, y: np.ndarray, size: float, grid: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Expected W1, TV, JS (bits), |mean difference| of two independent samples of ``size``.

    A gufunc, ``(n),(n),(),(m)->(m)`` with ``m = 4``.

    Parameters
    ----------
    q : numpy.ndarray
        ``(..., n)``: the PMF the samples are drawn from.
    y : numpy.ndarray
        ``(..., n)``: the consecutive scale values.
    size : float or numpy.ndarray
        The sample size ``N`` (a non-integer Kish ``n_eff`` takes the normal
        approximation).
    grid : numpy.ndarray
        ``(..., 4)``; only its length is read.
    out : numpy.ndarray, optional
        ``(..., 4)``, filled in place.

    Returns
    -------
    numpy.ndarray
        ``(..., 4)``: the expected W1, TV, JS and ``|mean difference|``.

    Examples
    --------
    >>> import numpy as np
    >>> out = noise_ceiling(np.array([0.5, 0.5]), np.array([1.0, 2.0]), 1.0, np.zeros(4))
    >>> out[:2].tolist()                # two coin flips differ with probability 1/2
    [0.5, 0.5]
    """
    n = q.shape[0]
    exact = size == math.floor(size) and size >= 1.0
    fq = 0.0
    pos = 0.0
    mq = 0.0
    for i in range(out.shape[0]):
        out[i] = 0.0
    for j in range(n):
        fq += q[j]
        if j < n - 1:
            out[0] += _gini_binomial(size, fq, exact)
        out[1] += 0.5 * _gini_binomial(size, q[j], exact)
        if q[j] > 0.0:
            pos += 1.0
        mq += q[j] * y[j]
    var = 0.0
    for j in range(n):
        var += q[j] * (y[j] - mq) ** 2
    out[2] = (pos - 1.0) / (4.0 * size * math.log(2.0))
    out[3] = 2.0 * math.sqrt(var / (math.pi * size))


def alignment_metrics_numpy(
    p: np.ndarray, q: np.ndarray, y: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    """Plain-numpy twin of :func:`alignment_metrics` (same broadcasting).

    Parameters
    ----------
    p : numpy.ndarray
        ``(..., n)``: the exact (model) PMF.
    q : numpy.ndarray
        ``(..., n)``: the sampled (human) PMF.
    y : numpy.ndarray
        ``(..., n)``: the consecutive scale values.
    grid : numpy.ndarray
        ``(..., 8)``; only its length is read.

    Returns
    -------
    numpy.ndarray
        ``(..., 8)``: the four metrics and their one-respondent variances.

    Examples
    --------
    >>> out = alignment_metrics_numpy(np.array([1.0, 0, 0]), np.array([0, 0, 1.0]),
    ...                               np.arange(1.0, 4), np.zeros(8))
    >>> out[:4].tolist()
    [2.0, 1.0, 1.0, -2.0]
    """
    p, q, y = (np.asarray(a, dtype=np.float64) for a in (p, q, y))
    p, q, y = np.broadcast_arrays(p, q, y)
    fp, fq = np.cumsum(p, -1), np.cumsum(q, -1)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log2(p / m), 0.0)
        kl_q = np.where(q > 0, q * np.log2(q / m), 0.0)
        g_js = np.where(q > 0, 0.5 * np.log2(q / m), 0.0)
    # W1 gradient: g_j = sum_{k >= j, k < n-1} sign(F_q(k) - F_p(k)), a reversed cumsum
    sign = np.sign(fq - fp)[..., :-1]
    g_w1 = np.concatenate([np.cumsum(sign[..., ::-1], -1)[..., ::-1], 0 * sign[..., :1]], -1)
    grads = np.stack([g_w1, 0.5 * np.sign(q - p), g_js, -y], -2)  # (..., 4, n)
    qq = q[..., None, :]
    var = (qq * grads**2).sum(-1) - (qq * grads).sum(-1) ** 2
    values = np.stack(
        [
            np.abs(fp - fq)[..., :-1].sum(-1),
            0.5 * np.abs(p - q).sum(-1),
            0.5 * (kl_p + kl_q).sum(-1),
            ((p - q) * y).sum(-1),
        ],
        -1,
    )
    out = np.concatenate([values, np.maximum(var, 0.0)], -1)
    return np.broadcast_to(out, (*np.broadcast_shapes(out.shape[:-1], grid.shape[:-1]), 8)).copy()


def _gini_binomial_numpy(size: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``E|X - X'| / size``, ``X, X' ~ Bin(size, r)`` independent; see :func:`noise_ceiling`."""
    from scipy.stats import binom, norm

    size, r = np.broadcast_arrays(np.asarray(size, float), np.asarray(r, float))
    out = np.zeros(size.shape)
    exact = (size == np.floor(size)) & (size >= 1)
    inner = (r > 0) & (r < 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        approx = 2 * np.sqrt(r * (1 - r)) * norm.pdf(0) * np.sqrt(2 / size)
    out = np.where(inner & ~exact, approx, out)
    for idx in np.ndindex(out.shape):
        if not (inner[idx] and exact[idx]):
            continue
        cdf = binom.cdf(np.arange(int(size[idx])), int(size[idx]), r[idx])
        out[idx] = 2 * np.sum(cdf * (1 - cdf)) / size[idx]
    return out


def noise_ceiling_numpy(
    q: np.ndarray, y: np.ndarray, size: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    """Plain-numpy twin of :func:`noise_ceiling` (scipy's binomial CDF; same broadcasting).

    Parameters
    ----------
    q : numpy.ndarray
        ``(..., n)``: the PMF the samples are drawn from.
    y : numpy.ndarray
        ``(..., n)``: the consecutive scale values.
    size : float or numpy.ndarray
        The sample size ``N`` (a non-integer Kish ``n_eff`` takes the normal
        approximation).
    grid : numpy.ndarray
        ``(..., 4)``; only its length is read.

    Returns
    -------
    numpy.ndarray
        ``(..., 4)``: the expected W1, TV, JS and ``|mean difference|``.

    Examples
    --------
    >>> noise_ceiling_numpy(np.array([0.5, 0.5]), np.array([1.0, 2.0]), 1.0, np.zeros(4))[:2]
    array([0.5, 0.5])
    """
    q, y = np.broadcast_arrays(np.asarray(q, dtype=np.float64), np.asarray(y, dtype=np.float64))
    size = np.asarray(size, dtype=np.float64)[..., None]
    fq = np.cumsum(q, -1)[..., :-1]
    mean = (q * y).sum(-1, keepdims=True)
    sd = np.sqrt((q * (y - mean) ** 2).sum(-1))
    n = size[..., 0]
    out = np.stack(
        [
            _gini_binomial_numpy(size, fq).sum(-1),
            0.5 * _gini_binomial_numpy(size, q).sum(-1),
            ((q > 0).sum(-1) - 1) / (4 * n * np.log(2)),
            2 * sd / np.sqrt(np.pi * n),
        ],
        -1,
    )
    return np.broadcast_to(out, (*np.broadcast_shapes(out.shape[:-1], grid.shape[:-1]), 4)).copy()
