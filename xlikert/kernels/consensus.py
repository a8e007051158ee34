"""Kernels of the Consensus layer: Multivariate Consensus with certified bounds.

The Multivariate Consensus of ``K`` conditionally independent items
(:ref:`eq-consensus-multivariate`) is ``1 + E[f(D)]`` with

* ``D = sum_k (Y_k - mu_k)^2`` the squared distance to the centroid and
* ``f(D) = log2(1 - sqrt(D) / c)``, ``c = d_max = sqrt(K) * (y_max - y_min)``.

The expectation runs over ``n^K`` response vectors; it is bounded instead of
enumerated. Write ``d_k = m_k + e_k`` where ``m_k`` is the smallest squared
distance item ``k`` can reach, so ``D = M0 + sum_k e_k`` with ``M0 = sum_k m_k``.
On a grid of step ``h`` each ``e_k`` splits exactly into a grid index and a
residual ``r in [0, h)``. Convolving the items on the grid while carrying, per
grid cell ``j``, the mass ``A_j``, the first moment ``B_j`` and the second
moment ``C_j`` of the summed residual ``rho`` gives, per cell,

* a **monotone bound**: every outcome of the cell has ``D`` in
  ``[x_j, b_j]`` with ``x_j = M0 + j h`` and ``b_j = min(x_j + rho_max, D_max)``,
  and ``f`` is decreasing, so its contribution lies in ``A_j [f(b_j), f(x_j)]``;
* a **Taylor bound** about the cell mean ``x_j + B_j / A_j``: the linear term
  vanishes and the remainder is ``1/2 f''(xi) Var_j`` with ``f''`` decreasing on
  ``(0, c^2)``, so ``f''(b_j) <= f''(xi) <= f''(x_j)``.

The intersection of both intervals is certified. Cells whose residuals are all
zero are exact. Shifting by ``M0`` keeps the ``sqrt`` singularity at ``D = 0``
harmless: an outcome near it is an exact atom (every ``e_k = 0``), any other
outcome is at least ``~1/4`` away. The ``log`` singularity at ``D = c^2`` is
never reached: ``D_max = sum_k max_k d_k < c^2`` and ``f(D_max)`` is computed
from the complement ``c^2 - D_max`` without cancellation. ``h`` shrinks until
the bounds are ``2 * tol`` apart (or the grid would exceed ``max_cells``;
should not even the first grid fit, a single cell gives certified, wider
bounds); bounds from every pass are intersected and rounded outward. A small
rigorous floating-point slack widens the final bounds.

The item terms and the grid pass (the hot loop) have plain-numpy twins (suffix
``_numpy``) that tests compare; the refinement driver is written once
(``_make_core``) and used by both: compiled with the numba functions, as plain
Python with the twins. The driver returns an inverted interval
(``lower > upper``, a broken certificate) as it is, for the caller to raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from . import DEFAULT_MAX_CELLS
from ._compile import guvectorize  # numba.guvectorize under a cross-process compile lock

__all__ = ["DEFAULT_MAX_CELLS", "consensus_bounds", "consensus_bounds_numpy", "consensus_core"]

# DEFAULT_MAX_CELLS (xlikert.kernels): the largest grid a refinement pass may allocate.

_LN2 = math.log(2.0)
_EPS = float(np.finfo(np.float64).eps)
_MAX_PASSES = 64
#: Taylor bounds are used only where ``c - sqrt(D) > _TAYLOR_GUARD * c``.
_TAYLOR_GUARD = 1e-6


# --------------------------------------------------------------------------- numba


@njit(cache=True)
def _f(x: float, c: float, fbot: float) -> float:
    """``log2(1 - sqrt(x) / c)``, never below ``fbot = f(D_max)``."""
    s = math.sqrt(x) / c
    if s >= 1.0:
        return fbot
    v = math.log1p(-s) / _LN2
    return v if v > fbot else fbot


@njit(cache=True)
def _sensitivity(a: float, x: float, c: float, cs_min: float, gamma: float, mu_err: float) -> float:
    """Round-off allowance for ``a f(D)``, ``D in [.., x]``, with ``D`` and ``mu`` perturbed.

    A relative error ``gamma`` of ``D`` moves ``f`` by ``|f'(x)| x gamma =
    s gamma / (2 ln2 (c - s))``; an error of the item means
    (``mu_err``: the 2-norm of the centroid error) moves ``sqrt(D) = ||y - mu||``
    by at most ``mu_err`` (triangle inequality), hence ``f``
    by ``mu_err / (ln2 (c - s))``. ``a`` is divided by ``c - s`` first: both are
    tiny together near the ``log`` singularity, and their ratio does not overflow.
    """
    s = math.sqrt(x)
    cs = c - s
    if cs < cs_min:
        cs = cs_min
    return (a / cs) * (s * gamma / (2.0 * _LN2) + mu_err / _LN2)


@njit(cache=True)
def _f2(x: float, c: float) -> float:
    """``f''(x)``, decreasing on ``(0, c^2)``; ``x > 0`` and ``sqrt(x) < c``."""
    s = math.sqrt(x)
    cs = c - s
    return (c - 2.0 * s) / (4.0 * _LN2 * s * s * s * cs * cs)


@njit(cache=True)
def _item_terms(
    p: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, float]:
    """Normalise the PMFs and return the per-item squared-distance terms.

    Returns ``e`` (K, n) excess squared distance over the item minimum (NaN off
    the support), ``emax`` (K,), ``M0``, ``D_max`` and ``G_min = c^2 - D_max``.
    """
    K, n = p.shape
    ymin = y[0]
    ymax = y[n - 1]
    rng = ymax - ymin
    e = np.full((K, n), np.nan)
    emax = np.zeros(K)
    q = np.empty((K, n))
    m0 = 0.0
    dmax = 0.0
    gmin = 0.0
    for k in range(K):
        tot = 0.0
        for i in range(n):
            tot += p[k, i]
        mu = 0.0
        u = 0.0
        v = 0.0
        for i in range(n):
            q[k, i] = p[k, i] / tot
            mu += y[i] * q[k, i]
            u += (y[i] - ymin) * q[k, i]
            v += (ymax - y[i]) * q[k, i]
        mk = np.inf
        dk = 0.0
        gk = np.inf
        for i in range(n):
            if q[k, i] > 0.0:
                diff = y[i] - mu
                dd = diff * diff
                # R - |y - mu| without cancellation, then R^2 - d = (R - |.|)(R + |.|)
                comp = (ymax - y[i]) + u if diff >= 0.0 else (y[i] - ymin) + v
                g = comp * (rng + abs(diff))
                e[k, i] = dd
                mk = min(mk, dd)
                dk = max(dk, dd)
                gk = min(gk, g)
        for i in range(n):
            if q[k, i] > 0.0:
                e[k, i] = e[k, i] - mk
                emax[k] = max(emax[k], e[k, i])
        m0 += mk
        dmax += dk
        gmin += gk
    return q, e, emax, m0, dmax, gmin


@njit(cache=True)
def _grid_pass(
    q: np.ndarray, e: np.ndarray, h: float, m0: float, dmax: float, c: float, fbot: float, cs_min: float,
    mu_err: float, max_cells: int,
) -> tuple[float, float]:  # fmt: skip
    """One grid pass: certified ``(lower, upper)`` of ``E[f(D)]``; NaN if too large."""
    K, n = q.shape
    length = 1
    rho_max = 0.0
    for k in range(K):
        top = 0
        rtop = 0.0
        for i in range(n):
            if q[k, i] > 0.0:
                idx = math.floor(e[k, i] / h)
                r = e[k, i] - idx * h
                if r < 0.0:
                    r = 0.0
                top = max(top, idx)
                rtop = max(rtop, r)
        length += top
        rho_max += rtop
        if length > max_cells:
            return np.nan, np.nan
    a = np.zeros(length)
    b = np.zeros(length)
    cc = np.zeros(length)
    a2 = np.zeros(length)
    b2 = np.zeros(length)
    c2 = np.zeros(length)
    a[0] = 1.0
    cur = 1
    for k in range(K):
        a2[:] = 0.0
        b2[:] = 0.0
        c2[:] = 0.0
        new = cur
        for i in range(n):
            w = q[k, i]
            if w > 0.0:
                idx = math.floor(e[k, i] / h)
                r = e[k, i] - idx * h
                if r < 0.0:
                    r = 0.0
                wr = w * r
                wr2 = wr * r
                for j in range(cur):
                    aj = a[j]
                    bj = b[j]
                    a2[j + idx] += aj * w
                    b2[j + idx] += bj * w + aj * wr
                    c2[j + idx] += cc[j] * w + 2.0 * bj * wr + aj * wr2
                new = max(new, cur + idx)
        cur = new
        a, a2 = a2, a
        b, b2 = b2, b
        cc, c2 = c2, cc
    gamma = (4.0 * K + 32.0) * _EPS
    lo_sum = 0.0
    hi_sum = 0.0
    abs_sum = 0.0
    slack = 0.0
    for j in range(cur):
        aj = a[j]
        if aj <= 0.0:
            continue
        x = m0 + j * h
        if x > dmax:
            x = dmax
        bnd = x + rho_max
        if bnd > dmax:
            bnd = dmax
        fx = _f(x, c, fbot)
        if cc[j] == 0.0:
            # every outcome of the cell sits exactly at D = x
            lo = aj * fx
            hi = lo
            extra = 0.0
        else:
            fb = fbot if bnd >= dmax else _f(bnd, c, fbot)
            lo = aj * fb
            hi = aj * fx
            extra = 0.0
            sb = math.sqrt(bnd)
            if x > 0.0 and c - sb > _TAYLOR_GUARD * c:
                mean = x + b[j] / aj
                if mean < x:
                    mean = x
                if mean > bnd:
                    mean = bnd
                var = cc[j] - b[j] * b[j] / aj
                dv = 4.0 * gamma * cc[j]
                v_hi = max(var, 0.0) + dv
                v_lo = max(var - dv, 0.0)
                f2x = _f2(x, c)
                f2b = _f2(bnd, c)
                fm = aj * _f(mean, c, fbot)
                t_lo = fm + 0.5 * (f2b * v_hi if f2b < 0.0 else f2b * v_lo)
                t_hi = fm + 0.5 * (f2x * v_lo if f2x < 0.0 else f2x * v_hi)
                if t_lo > lo:
                    lo = t_lo
                if t_hi < hi:
                    hi = t_hi
                # relative error of f'' (c - s is >= 1e-6 c, so well conditioned)
                rel2 = gamma + 8.0 * _EPS * c / (c - sb)
                extra = 0.5 * (abs(f2x) + abs(f2b)) * v_hi * rel2
        slack += gamma * (abs(lo) + abs(hi)) + extra
        slack += _sensitivity(aj, bnd, c, cs_min, 2.0 * gamma, mu_err)
        lo_sum += lo
        hi_sum += hi
        abs_sum += abs(lo) + abs(hi)
    slack += (cur + 8.0) * _EPS * abs_sum
    return lo_sum - slack, hi_sum + slack


def _make_core(
    item_terms: Callable[..., Any], grid_pass: Callable[..., Any]
) -> Callable[..., tuple[float, float, float]]:
    """The certified refinement driver, written once; ``grid_pass`` is the kernel or its twin.

    ``item_terms`` and ``grid_pass`` are the numba functions (then the driver is
    compiled with ``njit``) or their plain-numpy twins (then it runs as Python).
    """

    def core(
        p: np.ndarray, y: np.ndarray, tol: float, max_cells: int
    ) -> tuple[float, float, float]:
        K, n = p.shape
        for k in range(K):
            for i in range(n):
                if not (p[k, i] >= 0.0):  # NaN or negative
                    return np.nan, np.nan, np.nan
        if n < 2 or K == 0:
            return np.nan, np.nan, np.nan
        c = math.sqrt(K) * (y[n - 1] - y[0])
        q, e, emax, m0, dmax, gmin = item_terms(p, y)
        if gmin <= 0.0:
            # only when mass underflows next to a point mass at the opposite extreme
            return -np.inf, -np.inf, -np.inf
        sdmax = math.sqrt(dmax)
        cs_min = gmin / (c + sdmax)
        # f(D_max) from the complement c^2 - D_max = G_min; a few ulps low, never above 0
        fbot = math.log(gmin / (c * (c + sdmax))) / _LN2
        fbot = min(fbot - 16.0 * _EPS * (1.0 + abs(fbot)), 0.0)
        # round-off of the centroid (each mean a sum of n products), in the 2-norm
        mu_err = 4.0 * (n + 4.0) * _EPS * max(abs(y[0]), abs(y[n - 1])) * math.sqrt(K)
        espan = 0.0
        for k in range(K):
            espan = max(espan, emax[k])
        lower = -np.inf
        upper = np.inf
        # no residual anywhere: one pass is exact; else start at 8 cells per item
        h = 1.0 if espan == 0.0 else espan / 8.0
        for it in range(_MAX_PASSES):
            fits = True
            lo, hi = grid_pass(q, e, h, m0, dmax, c, fbot, cs_min, mu_err, max_cells)
            if np.isnan(lo):
                if it > 0:
                    break  # keep the tightest bounds so far; the caller warns
                # not even the first grid fits max_cells: one cell (a step above every
                # residual) always does, and its monotone/Taylor bounds are certified
                fits = False
                lo, hi = grid_pass(q, e, 2.0 * espan, m0, dmax, c, fbot, cs_min, mu_err, 1)
            # round outward: 1 + x is rounded to nearest
            lower = max(lower, (1.0 + lo) - 2.0 * _EPS * abs(1.0 + lo))
            upper = min(upper, (1.0 + hi) + 2.0 * _EPS * abs(1.0 + hi))
            width = upper - lower
            if not fits or espan == 0.0 or width <= 2.0 * tol:
                break
            factor = 0.9 * (1.4 * tol / width) ** (1.0 / 3.0)
            h *= min(max(factor, 1.0 / 64.0), 0.7)
        # lower > upper would mean a broken certificate: returned as is, the caller raises
        return 0.5 * (lower + upper), lower, upper

    core.__doc__ = """Multivariate Consensus of one condition: ``(value, lower, upper)``.

    Parameters
    ----------
    p : ndarray, shape (K, n)
        Item PMFs (normalised here; zeros allowed).
    y : ndarray, shape (n,)
        Consecutive scale values.
    tol : float
        Target half-width of the certified interval.
    max_cells : int
        Largest grid a pass may use; when reached, the tightest bounds so far
        are returned (if not even the first grid fits, the bounds of a single
        cell) and their half-width may exceed ``tol``.

    Returns
    -------
    tuple of float
        ``(value, lower, upper)``; ``lower <= exact <= upper`` and ``value`` is
        their midpoint. NaN for negative or NaN mass.
    """
    return core


#: Multivariate Consensus of one condition (compiled): ``(value, lower, upper)``.
consensus_core = njit(cache=True)(_make_core(_item_terms, _grid_pass))


@guvectorize(
    ["void(float64[:, :], float64[:], float64, int64, float64[:], float64[:], float64[:])"],
    "(k,n),(n),(),()->(),(),()",
    cache=True,
)
def consensus_bounds(
    p: np.ndarray,
    y: np.ndarray,
    tol: float,
    max_cells: int,
    value: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> None:
    """Multivariate Consensus of each condition with certified lower and upper bounds.

    A gufunc over the leading dims of :func:`consensus_core`,
    ``(k,n),(n),(),()->(),(),()``.

    Parameters
    ----------
    p : numpy.ndarray
        ``(..., k, n)``: the PMFs of ``k`` independent items on the scale ``y``.
    y : numpy.ndarray
        ``(n,)``: the consecutive scale values.
    tol : float
        The guaranteed bound on ``|value - exact|``.
    max_cells : int
        Largest grid one refinement pass may use.
    value, lower, upper : numpy.ndarray, optional
        ``(...)``, filled in place.

    Returns
    -------
    value : numpy.ndarray
        ``(...)``: the Consensus (the midpoint of the bounds).
    lower, upper : numpy.ndarray
        ``(...)``: its certified lower and upper bounds.

    Examples
    --------
    >>> p = np.full((2, 3, 5, 7), 1 / 7)  # 2 x 3 conditions of 5 uniform items
    >>> value, lower, upper = consensus_bounds(p, np.arange(1.0, 8.0), 1e-4, DEFAULT_MAX_CELLS)
    >>> value.shape, bool(((upper - lower) <= 2e-4).all())
    ((2, 3), True)
    """
    v, lo, hi = consensus_core(p, y, tol, max_cells)
    value[0] = v
    lower[0] = lo
    upper[0] = hi


# --------------------------------------------------------------------------- numpy twin


def _f_numpy(x: np.ndarray | float, c: float, fbot: float) -> np.ndarray:
    s = np.sqrt(x) / c
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.log1p(-np.minimum(s, 1.0)) / _LN2
    return np.where(s >= 1.0, fbot, np.maximum(v, fbot))


def _f2_numpy(x: np.ndarray | float, c: float) -> np.ndarray:
    s = np.sqrt(x)
    cs = c - s
    with np.errstate(divide="ignore", invalid="ignore"):
        return (c - 2.0 * s) / (4.0 * _LN2 * s**3 * cs**2)


def _item_terms_numpy(
    p: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, float]:
    ymin, ymax = y[0], y[-1]
    rng = ymax - ymin
    q = p / p.sum(axis=1, keepdims=True)
    mu = (y * q).sum(axis=1, keepdims=True)
    u = ((y - ymin) * q).sum(axis=1, keepdims=True)
    v = ((ymax - y) * q).sum(axis=1, keepdims=True)
    diff = y - mu
    dd = diff * diff
    comp = np.where(diff >= 0.0, (ymax - y) + u, (y - ymin) + v)
    g = comp * (rng + np.abs(diff))
    sup = q > 0.0
    mk = np.where(sup, dd, np.inf).min(axis=1)
    dk = np.where(sup, dd, -np.inf).max(axis=1)
    gk = np.where(sup, g, np.inf).min(axis=1)
    e = np.where(sup, dd - mk[:, None], np.nan)
    emax = np.where(sup, e, 0.0).max(axis=1)
    return q, e, emax, float(mk.sum()), float(dk.sum()), float(gk.sum())


def _grid_pass_numpy(
    q: np.ndarray, e: np.ndarray, h: float, m0: float, dmax: float, c: float, fbot: float, cs_min: float,
    mu_err: float, max_cells: int,
) -> tuple[float, float]:  # fmt: skip
    K = q.shape[0]
    sup = q > 0.0
    with np.errstate(invalid="ignore"):
        idx = np.where(sup, np.floor(np.where(sup, e, 0.0) / h), 0).astype(np.int64)
    r = np.where(sup, np.maximum(np.where(sup, e, 0.0) - idx * h, 0.0), 0.0)
    length = 1 + int(idx.max(axis=1).sum())
    if length > max_cells:
        return np.nan, np.nan
    rho_max = float(r.max(axis=1).sum())
    a = np.zeros(length)
    b = np.zeros(length)
    cc = np.zeros(length)
    a[0] = 1.0
    cur = 1
    for k in range(K):
        a2 = np.zeros(length)
        b2 = np.zeros(length)
        c2 = np.zeros(length)
        new = cur
        for i in np.flatnonzero(sup[k]):
            w, j0, rk = q[k, i], idx[k, i], r[k, i]
            wr = w * rk
            sl = slice(j0, j0 + cur)
            a2[sl] += a[:cur] * w
            b2[sl] += b[:cur] * w + a[:cur] * wr
            c2[sl] += cc[:cur] * w + 2.0 * b[:cur] * wr + a[:cur] * (wr * rk)
            new = max(new, cur + j0)
        cur = new
        a, b, cc = a2, b2, c2
    a, b, cc = a[:cur], b[:cur], cc[:cur]
    gamma = (4.0 * K + 32.0) * _EPS
    keep = a > 0.0
    a, b, cc = a[keep], b[keep], cc[keep]
    j = np.flatnonzero(keep)
    x = np.minimum(m0 + j * h, dmax)
    bnd = np.minimum(x + rho_max, dmax)
    fx = _f_numpy(x, c, fbot)
    fb = np.where(bnd >= dmax, fbot, _f_numpy(bnd, c, fbot))
    exact = cc == 0.0
    lo = np.where(exact, a * fx, a * fb)
    hi = a * fx
    sb = np.sqrt(bnd)
    taylor = ~exact & (x > 0.0) & (c - sb > _TAYLOR_GUARD * c)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.clip(x + b / a, x, bnd)
        var = cc - b * b / a
        dv = 4.0 * gamma * cc
        v_hi = np.maximum(var, 0.0) + dv
        v_lo = np.maximum(var - dv, 0.0)
        f2x = _f2_numpy(x, c)
        f2b = _f2_numpy(bnd, c)
        fm = a * _f_numpy(mean, c, fbot)
        t_lo = fm + 0.5 * np.where(f2b < 0.0, f2b * v_hi, f2b * v_lo)
        t_hi = fm + 0.5 * np.where(f2x < 0.0, f2x * v_lo, f2x * v_hi)
        rel2 = gamma + 8.0 * _EPS * c / (c - sb)
        extra = np.where(taylor, 0.5 * (np.abs(f2x) + np.abs(f2b)) * v_hi * rel2, 0.0)
    lo = np.where(taylor, np.maximum(lo, t_lo), lo)
    hi = np.where(taylor, np.minimum(hi, t_hi), hi)
    s = np.sqrt(bnd)
    sens = (a / np.maximum(c - s, cs_min)) * (s * 2.0 * gamma / (2.0 * _LN2) + mu_err / _LN2)
    slack = float(np.sum(gamma * (np.abs(lo) + np.abs(hi)) + extra + sens))
    slack += (cur + 8.0) * _EPS * float(np.sum(np.abs(lo) + np.abs(hi)))
    return float(lo.sum()) - slack, float(hi.sum()) + slack


_core_numpy = _make_core(_item_terms_numpy, _grid_pass_numpy)


def _consensus_core_numpy(
    p: np.ndarray, y: np.ndarray, tol: float, max_cells: int = DEFAULT_MAX_CELLS
) -> tuple[float, float, float]:
    """Plain-numpy twin of :func:`consensus_core` (the same driver, the numpy grid pass).

    Examples
    --------
    >>> p = np.array([[0.5, 0, 0, 0, 0, 0, 0.5], [0, 0, 0.5, 0, 0.5, 0, 0]])
    >>> v, lo, hi = _consensus_core_numpy(p, np.arange(1.0, 8.0), 1e-6)
    >>> round(v, 4)
    0.3273
    >>> bool(lo <= v <= hi and hi - lo <= 2e-6), round(1 + math.log2(1 - math.sqrt(10) / (math.sqrt(2) * 6)), 4)
    (True, 0.3273)
    """
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return _core_numpy(p, y, float(tol), int(max_cells))


def consensus_bounds_numpy(
    p: np.ndarray, y: np.ndarray, tol: float, max_cells: int = DEFAULT_MAX_CELLS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`consensus_bounds`: loops over the leading dims.

    Parameters
    ----------
    p : numpy.ndarray
        ``(..., k, n)``: the PMFs of ``k`` independent items on the scale ``y``.
    y : numpy.ndarray
        ``(n,)``: the consecutive scale values.
    tol : float
        The guaranteed bound on ``|value - exact|``.
    max_cells : int
        Largest grid one refinement pass may use.

    Returns
    -------
    value : numpy.ndarray
        Shape ``p.shape[:-2]``: the Consensus.
    lower : numpy.ndarray
        Its certified lower bound.
    upper : numpy.ndarray
        Its certified upper bound.

    Examples
    --------
    >>> p = np.full((2, 5, 7), 1 / 7)
    >>> y = np.arange(1.0, 8.0)
    >>> a = consensus_bounds_numpy(p, y, 1e-4)
    >>> b = consensus_bounds(p, y, 1e-4, DEFAULT_MAX_CELLS)
    >>> bool(np.allclose(a, b, rtol=0, atol=1e-12))
    True
    """
    p = np.asarray(p, dtype=np.float64)
    lead = p.shape[:-2]
    tol_b = np.broadcast_to(np.asarray(tol, dtype=np.float64), lead)
    out = np.empty((3, *lead))
    for ix in np.ndindex(*lead):
        out[(slice(None), *ix)] = _consensus_core_numpy(p[ix], y, float(tol_b[ix]), max_cells)
    return out[0], out[1], out[2]
