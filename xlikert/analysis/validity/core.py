"""The numpy cores of :func:`xlikert.validity`: distances with their gradients in the human
PMF, the delta method for one cell and for a pair of levels, and paired means over people.

Every function here takes and returns plain numpy arrays (the xarray wrappers are in
:mod:`.distances` and :mod:`.people`); the score axis is the last one.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy.stats import norm

__all__ = [
    "DISTANCES",
    "TIE_TOL",
    "closest_level",
    "delta_variance",
    "distance_gradients",
    "lead_probability",
    "level_pairs",
    "paired_mean",
    "paired_skill",
]

#: Two levels whose scores differ by at most this much are tied, ``closest_z`` 0: the model
#: PMFs are float32 computations, and two readings of the same distribution (a greedy
#: reply's answer read at its first token, and the first token) agree to about 1e-6.
TIE_TOL = 1e-5

#: The distances of a model PMF to the human PMF, in the order of :func:`distance_gradients`.
DISTANCES: tuple[str, ...] = ("wasserstein", "total_variation", "jensen_shannon")


def distance_gradients(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W1, TV and JS (bits) of ``p`` to ``q`` and their gradients in ``q``.

    Parameters
    ----------
    p : numpy.ndarray
        ``(..., n)``: the model PMF (exact).
    q : numpy.ndarray
        ``(..., n)``: the human PMF (a sample's shares); both on ``n`` consecutive
        integer scores.

    Returns
    -------
    values : numpy.ndarray
        ``(..., 3)``: ``W1 = sum_{k < n} |F_p(k) - F_q(k)|``, ``TV = 1/2 sum |p - q|`` and
        ``JS = 1/2 KL(p || m) + 1/2 KL(q || m)``, ``m = (p + q)/2``, in bits.
    gradients : numpy.ndarray
        ``(..., 3, n)``: ``d value / d q_j``: for W1
        ``sum_{j <= k < n - 1} sign(F_q(k) - F_p(k))``, for TV ``sign(q_j - p_j)/2``, for JS
        ``log2(q_j / m_j)/2`` (0 where ``q_j = 0``); a sign at a tie is 0, the one-sided
        derivative (as :func:`xlikert.kernels.alignment.alignment_metrics`).

    Examples
    --------
    >>> v, g = distance_gradients(np.array([1.0, 0, 0]), np.array([0, 0, 1.0]))
    >>> v.tolist(), g[0].tolist(), g[1].tolist()
    ([2.0, 1.0, 1.0], [-2.0, -1.0, 0.0], [-0.5, 0.0, 0.5])
    """
    p, q = np.broadcast_arrays(np.asarray(p, np.float64), np.asarray(q, np.float64))
    fp, fq = np.cumsum(p, -1)[..., :-1], np.cumsum(q, -1)[..., :-1]
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log2(p / m), 0.0)
        kl_q = np.where(q > 0, q * np.log2(q / m), 0.0)
        g_js = np.where(q > 0, 0.5 * np.log2(q / m), 0.0)
    sign = np.sign(fq - fp)
    g_w1 = np.concatenate(
        [np.cumsum(sign[..., ::-1], -1)[..., ::-1], np.zeros_like(sign[..., :1])], -1
    )
    values = np.stack(
        [np.abs(fp - fq).sum(-1), 0.5 * np.abs(p - q).sum(-1), 0.5 * (kl_p + kl_q).sum(-1)], -1
    )
    return values, np.stack([g_w1, 0.5 * np.sign(q - p), g_js], -2)


def delta_variance(q: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """The delta-method variance of a function of ``q`` for one respondent.

    ``N q`` is multinomial with covariance ``N (diag q - q q')``, so a function with
    gradient ``g`` in ``q`` has variance ``(sum_j q_j g_j^2 - (sum_j q_j g_j)^2) / N``; this
    returns the part before ``/ N``. For a paired difference of two levels read against
    the same humans pass ``g_a - g_b``.

    Parameters
    ----------
    q : numpy.ndarray
        ``(..., n)``: the human PMF.
    gradient : numpy.ndarray
        ``(..., n)``: the gradient in ``q`` (broadcast against ``q``).

    Returns
    -------
    numpy.ndarray
        ``(...)``: the variance for one respondent (never below 0).

    Examples
    --------
    >>> float(delta_variance(np.array([0.5, 0.5]), np.array([0.0, 1.0])))  # Bernoulli(1/2)
    0.25
    """
    q = np.asarray(q, np.float64)
    g = np.asarray(gradient, np.float64)
    out: np.ndarray = np.maximum((q * g**2).sum(-1) - (q * g).sum(-1) ** 2, 0.0)
    return out


def level_pairs(levels: list[str]) -> tuple[list[int], list[int], list[str]]:
    """Every pair of levels ``a`` before ``b``: the indices of ``a``, of ``b``, and the labels
    ``"a − b"`` (as :func:`xlikert.contrast` names its pairs).

    Examples
    --------
    >>> level_pairs(["first_token", "greedy", "stated"])
    ([0, 0, 1], [1, 2, 2], ['first_token − greedy', 'first_token − stated', 'greedy − stated'])
    """
    pairs = list(combinations(range(len(levels)), 2))
    labels = [f"{levels[a]} − {levels[b]}" for a, b in pairs]
    return [a for a, _ in pairs], [b for _, b in pairs], labels


def closest_level(
    mean: np.ndarray, se_pair: np.ndarray, ia: list[int], ib: list[int], lower_is_better: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best level along the last axis, its runner-up and the z of their difference.

    Parameters
    ----------
    mean : numpy.ndarray
        ``(..., L)``: each level's score (NaN: not compared).
    se_pair : numpy.ndarray
        ``(..., P)``: the SE of each pair's difference, pairs as :func:`level_pairs`.
    ia, ib : list of int
        The levels of each pair.
    lower_is_better : bool
        A distance or a loss (True), or a score where higher is better (False).

    Returns
    -------
    best, runner_up : numpy.ndarray of int
        ``(...)``: the index of the best level and of the second best (-1 where fewer
        than two levels are compared).
    z : numpy.ndarray
        ``(...)``: ``|score(runner-up) - score(best)| / SE`` of their paired difference
        (NaN where not defined; 0 where the scores differ by at most :data:`TIE_TOL`, a
        tie; ``inf`` where the SE is 0 and they differ by more).

    Examples
    --------
    >>> best, second, z = closest_level(np.array([0.3, 0.1, 0.2]), np.array([0.1, 0.1, 0.05]),
    ...                                 [0, 0, 1], [1, 2, 2], True)
    >>> int(best), int(second), float(z)          # 0.2 - 0.1 over the SE of pair (1, 2)
    (1, 2, 2.0)
    >>> float(closest_level(np.array([0.3, 0.3 + 1e-7]), np.array([0.0]), [0], [1], True)[2])
    0.0
    """
    key = np.where(np.isnan(mean), np.inf, mean if lower_is_better else -mean)
    order = np.argsort(key, axis=-1, kind="stable")
    best, second = order[..., 0], order[..., 1]
    n_ok = (~np.isnan(mean)).sum(-1)
    lookup = np.full((mean.shape[-1], mean.shape[-1]), -1)
    lookup[ia, ib] = lookup[ib, ia] = np.arange(len(ia))
    pair = lookup[best, second]
    gap = np.abs(np.take_along_axis(mean, second[..., None], -1)[..., 0]
                 - np.take_along_axis(mean, best[..., None], -1)[..., 0])  # fmt: skip
    se = np.take_along_axis(se_pair, pair[..., None], -1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        # a gap within float noise (a greedy reply read at its first token: the first-token
        # PMF again, from another pass) is a tie, not a lead of infinite certainty
        z = np.where(gap <= TIE_TOL, 0.0, gap / se)
    two = n_ok >= 2
    return np.where(two, best, -1), np.where(two, second, -1), np.where(two, z, np.nan)


def lead_probability(z: np.ndarray) -> np.ndarray:
    """``Phi(z)``: the normal probability that the closest level's lead is not a sampling
    artefact of the humans (one-sided; NaN stays NaN).

    Examples
    --------
    >>> round(float(lead_probability(np.array(1.6448536269514722))), 3)
    0.95
    """
    return np.asarray(norm.cdf(z), dtype=np.float64)


def paired_mean(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mean of ``a - b`` over the people (last axis) who have both, its SE and count.

    Parameters
    ----------
    a, b : numpy.ndarray
        ``(..., n)``: one value per person (NaN: none).

    Returns
    -------
    mean, se, n : numpy.ndarray
        ``(...)``: the paired mean difference, ``sd / sqrt(n)`` (sd with ddof 1; NaN for
        fewer than two people) and the number of people with both values.

    Examples
    --------
    >>> m, se, n = paired_mean(np.array([1.0, 2.0, 4.0]), np.array([0.0, 1.0, np.nan]))
    >>> float(m), float(se), int(n)
    (1.0, 0.0, 2)
    """
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    ok = ~np.isnan(d)
    n = ok.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok, d, 0.0).sum(-1) / n
        dev = np.where(ok, d - mean[..., None], 0.0)
        se = np.sqrt((dev**2).sum(-1) / (n - 1) / n)
    return mean, se, n


def paired_skill(
    a: np.ndarray, b: np.ndarray, base: np.ndarray, perfect: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Skill of ``a``, and of ``a`` over ``b``, against a baseline, by the delta method.

    The skill of a score ``S`` over the baseline ``B`` is ``(S - B) / (P - B)``, ``P`` the
    perfect score (1 - L/L_b for a loss with ``P = 0``). The difference of two levels'
    skills over the same people is ``(A - C) / (P - B)`` with ``A``, ``C``, ``B`` the means
    of ``a``, ``b`` and ``base`` over the people who have all three; its influence per
    person is ``(a - b)/(P - B) + base (A - C)/(P - B)^2``, and its SE the SE of that mean.

    Parameters
    ----------
    a, b, base : numpy.ndarray
        ``(..., n)``: each person's score under two levels and the baseline (NaN: none).
    perfect : float
        The score of a perfect prediction.

    Returns
    -------
    difference, se, n : numpy.ndarray
        ``(...)``: the skill difference, its SE and the people compared.

    Examples
    --------
    >>> d, se, n = paired_skill(np.array([0.1, 0.2, 0.3]), np.array([0.2, 0.4, 0.3]),
    ...                         np.array([0.5, 0.5, 0.5]), 0.0)
    >>> round(float(d), 4), int(n)                  # (0.2 - 0.3) / (0 - 0.5)
    (0.2, 3)
    """
    a, b, base = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, base)))
    ok = ~(np.isnan(a) | np.isnan(b) | np.isnan(base))
    n = ok.sum(-1)
    a, b, base = (np.where(ok, x, np.nan) for x in (a, b, base))
    with np.errstate(invalid="ignore", divide="ignore"):
        big_a, big_b, big_base = (np.where(ok, x, 0.0).sum(-1) / n for x in (a, b, base))
        gap = perfect - big_base
        influence = (a - b) / gap[..., None] + base * ((big_a - big_b) / gap**2)[..., None]
        _, se, _ = paired_mean(influence, np.zeros_like(influence))
    return (big_a - big_b) / gap, se, n
