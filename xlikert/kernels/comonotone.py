"""Comonotone (shared-quantile) linear contrast of R PMFs, mixed over blocks.

The paper's comonotone-coupled linear contrast (:ref:`eq-comonotone-contrast-pmf`): for PMFs
``p_1..p_R`` on a common support ``x_1 < ... < x_n`` and coefficients
``alpha``, ``Z = sum_r alpha_r F_r^{-1}(U)`` with one shared ``U ~ Unif(0, 1)``.
``Z`` is constant between consecutive merged CDF breakpoints, so its PMF is
exact: sweep the sorted breakpoints, and give each interval
``(u_{l-1}, u_l]`` the value ``sum_r alpha_r x_{j_r}`` where ``j_r`` is the
left-continuous quantile index ``min{j : F_r(x_j) >= u}``.

Numerical conventions (identical in the kernel and its numpy twin):

* each CDF is divided by its last value (so it ends at exactly 1; inputs are
  validated to sum to 1 within ``xlikert.core.validate.PMF_ATOL`` beforehand);
* breakpoints closer than :data:`BREAKPOINT_TOL` (1e-12) to their sorted
  predecessor are merged into one cluster; the mass of the cluster's interval
  is ``hi_c - hi_{c-1}`` (``hi`` = largest breakpoint of a cluster, and the
  cluster holding 0 counts as 0), its value is the quantile at the cluster's
  smallest breakpoint. Total mass is preserved; mass below ``1e-12`` from
  floating-point noise in CDFs that agree mathematically never forms a
  spurious atom.

Output grid: ``grid`` (length ``m``) holds consecutive integer values; mass at
value ``z`` goes to index ``z - grid[0]``. Supports and ``alpha`` must be
integer-valued so every ``z`` lies on the grid, and the caller makes the grid
wide enough (``sum_{alpha<0} alpha x_n + sum_{alpha>0} alpha x_1`` up to
``sum_{alpha>0} alpha x_n + sum_{alpha<0} alpha x_1``).
"""

from __future__ import annotations

import numpy as np

from . import BREAKPOINT_TOL  # breakpoints closer than this are merged (see module doc)
from ._compile import guvectorize  # numba.guvectorize under a cross-process compile lock

__all__ = [
    "BREAKPOINT_TOL",
    "blocked_comonotone_contrast",
    "blocked_comonotone_contrast_numpy",
]

_CHUNK_ELEMENTS = 2_000_000


@guvectorize(
    ["void(float64[:, :, :], float64[:], float64[:], float64[:], float64[:])"],
    "(b,r,n),(n),(r),(m)->(m)",
    nopython=True,
    cache=True,
)
def blocked_comonotone_contrast(
    pmf: np.ndarray, support: np.ndarray, alpha: np.ndarray, grid: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover
    """Mean over ``b`` blocks of the comonotone contrast of ``r`` PMFs.

    A gufunc, ``(b,r,n),(n),(r),(m)->(m)``: leading dims broadcast.

    Parameters
    ----------
    pmf : numpy.ndarray
        ``(..., b, r, n)``: in each of ``b`` blocks, ``r`` PMFs on ``support``.
    support : numpy.ndarray
        ``(n,)``: the common integer-valued support, increasing.
    alpha : numpy.ndarray
        ``(r,)``: integer-valued coefficients.
    grid : numpy.ndarray
        ``(..., m)``: consecutive integers covering every value of the contrast.
    out : numpy.ndarray, optional
        ``(..., m)``, filled in place.

    Returns
    -------
    numpy.ndarray
        ``(..., m)``: the PMF of the contrast on ``grid``, mixed uniformly over
        the blocks.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([[[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]])   # 1 block, 2 PMFs
    >>> blocked_comonotone_contrast(p, np.arange(3.0), np.array([1.0, -1.0]),
    ...                             np.arange(-2.0, 3.0))
    array([0., 1., 0., 0., 0.])
    """
    nb, nr, n = pmf.shape
    m = out.shape[0]
    g0 = grid[0]
    for i in range(m):
        out[i] = 0.0
    cdf = np.empty((nr, n))
    bp = np.empty(nr * n + 1)
    acc = np.zeros(m)
    ptr = np.empty(nr, dtype=np.int64)
    tol = 1e-12
    for blk in range(nb):
        for r in range(nr):
            s = 0.0
            for j in range(n):
                s += pmf[blk, r, j]
                cdf[r, j] = s
            for j in range(n):
                cdf[r, j] /= s
            cdf[r, n - 1] = 1.0
        bp[0] = 0.0
        for r in range(nr):
            for j in range(n):
                bp[1 + r * n + j] = cdf[r, j]
        bp.sort()
        for i in range(m):
            acc[i] = 0.0
        z = 0.0
        for r in range(nr):
            ptr[r] = 0
            z += alpha[r] * support[0]
        total = nr * n + 1
        # cluster 0 holds the breakpoint 0; its ``hi`` counts as 0
        i = 1
        while i < total and bp[i] - bp[i - 1] <= tol:
            i += 1
        prev_hi = 0.0
        while i < total:
            lo = bp[i]
            while i + 1 < total and bp[i + 1] - bp[i] <= tol:
                i += 1
            hi = bp[i]
            for r in range(nr):
                j = ptr[r]
                while j < n - 1 and cdf[r, j] < lo:
                    j += 1
                if j != ptr[r]:
                    z += alpha[r] * (support[j] - support[ptr[r]])
                    ptr[r] = j
            idx = int(np.floor(z - g0 + 0.5))
            acc[idx] += hi - prev_hi
            prev_hi = hi
            i += 1
        for k in range(m):
            out[k] += acc[k]
    for k in range(m):
        out[k] /= nb


def blocked_comonotone_contrast_numpy(
    pmf: np.ndarray, support: np.ndarray, alpha: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    """Plain-numpy twin of :func:`blocked_comonotone_contrast` (vectorised).

    Parameters
    ----------
    pmf : numpy.ndarray
        ``(..., b, r, n)``: in each of ``b`` blocks, ``r`` PMFs on ``support``.
    support : numpy.ndarray
        ``(n,)``: the common integer-valued support, increasing.
    alpha : numpy.ndarray
        ``(r,)``: integer-valued coefficients.
    grid : numpy.ndarray
        ``(..., m)``: consecutive integers covering every value of the contrast.

    Returns
    -------
    numpy.ndarray
        ``(..., m)``: the PMF of the contrast on ``grid``, mixed over the blocks.

    Examples
    --------
    >>> p = np.array([[[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]])
    >>> blocked_comonotone_contrast_numpy(p, np.arange(3.0), np.array([1.0, -1.0]),
    ...                                   np.arange(-2.0, 3.0))
    array([0., 1., 0., 0., 0.])
    """
    pmf = np.asarray(pmf, dtype=np.float64)
    support = np.asarray(support, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    batch = np.broadcast_shapes(
        pmf.shape[:-3], support.shape[:-1], alpha.shape[:-1], grid.shape[:-1]
    )
    nb, nr, n = pmf.shape[-3:]
    m = grid.shape[-1]
    pmf = np.broadcast_to(pmf, (*batch, nb, nr, n)).reshape(-1, nr, n)
    support = np.broadcast_to(support, (*batch, n)).reshape(-1, n)
    alpha = np.broadcast_to(alpha, (*batch, nr)).reshape(-1, nr)
    g0 = np.broadcast_to(grid[..., 0], batch).reshape(-1)
    nbatch = int(np.prod(batch, dtype=np.int64))
    out = np.empty((nbatch, m))
    # bound the working memory: about _CHUNK_ELEMENTS searchsorted queries per chunk
    per_entry = max(1, nb * nr * (nr * n + 1))
    step = max(1, _CHUNK_ELEMENTS // per_entry)
    for first in range(0, nbatch, step):
        last = min(nbatch, first + step)
        rows = slice(first * nb, last * nb)
        out[first:last] = (
            _contrast_rows(
                pmf[rows],
                np.repeat(support[first:last], nb, axis=0),
                np.repeat(alpha[first:last], nb, axis=0),
                np.repeat(g0[first:last], nb),
                m,
            )
            .reshape(last - first, nb, m)
            .sum(axis=1)
            / nb
        )
    return out.reshape(*batch, m)


def _contrast_rows(
    pmf: np.ndarray, sup: np.ndarray, alp: np.ndarray, g0: np.ndarray, m: int
) -> np.ndarray:
    """Comonotone contrast of each row ``(r, n)`` of ``pmf`` (q, r, n) -> (q, m)."""
    q, nr, n = pmf.shape

    cdf = np.cumsum(pmf, axis=-1)
    cdf /= cdf[..., -1:]
    cdf[..., -1] = 1.0
    bp = np.sort(np.concatenate([np.zeros((q, 1)), cdf.reshape(q, nr * n)], axis=1), axis=1)
    total = bp.shape[1]
    gap = np.diff(bp, axis=1) > BREAKPOINT_TOL
    is_start = np.concatenate([np.ones((q, 1), bool), gap], axis=1)
    is_end = np.concatenate([gap, np.ones((q, 1), bool)], axis=1)
    cluster = np.cumsum(is_start, axis=1) - 1
    # quantile index at every breakpoint: #{j : cdf_r[j] < u}, clamped to n - 1.
    # Exact batched count: stable-sort breakpoints (first) together with cdf_r,
    # so ties put the breakpoint before equal CDF values.
    keys = np.concatenate([np.broadcast_to(bp[:, None, :], (q, nr, total)), cdf], axis=-1)
    order = np.argsort(keys, axis=-1, kind="stable")
    is_cdf = order >= total
    counts = np.cumsum(is_cdf, axis=-1)
    j = np.empty_like(counts)
    np.put_along_axis(j, order, counts, axis=-1)
    j = np.minimum(j[..., :total], n - 1)
    values = np.take_along_axis(sup, j.reshape(q, -1), axis=-1).reshape(q, nr, total)
    z = np.einsum("qr,qrt->qt", alp, values)
    prev_hi = np.concatenate([np.zeros((q, 1)), bp[:, :-1]], axis=1)
    prev_hi = np.where(cluster == 1, 0.0, prev_hi)
    starts = is_start & (cluster >= 1)
    ends = is_end & (cluster >= 1)
    mass = bp[ends] - prev_hi[starts]
    g0 = np.broadcast_to(g0[:, None], z.shape)
    idx = np.floor(z[starts] - g0[starts] + 0.5).astype(np.int64)
    rows = np.broadcast_to(np.arange(q)[:, None], z.shape)[starts]
    return np.bincount(rows * m + idx, weights=mass, minlength=q * m).reshape(q, m)
