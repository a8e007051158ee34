"""Exact convolution of item PMFs (:ref:`eq-item-wise-convolution`).

The composite score of ``k`` independent items, each on the same ``n``
consecutive integer scores, lives on ``m = k (n - 1) + 1`` consecutive
integers. Both functions take the item PMFs in the last two axes
``(..., k, n)`` and a dummy grid ``(..., m)`` that fixes the output length (a
gufunc cannot create a dimension); they return ``(..., m)``.
"""

from __future__ import annotations

import numpy as np

from ._compile import guvectorize  # numba.guvectorize under a cross-process compile lock

__all__ = ["convolve_items", "convolve_items_numpy"]


@guvectorize(
    ["void(float64[:, :], float64[:], float64[:])"],
    "(k,n),(m)->(m)",
    nopython=True,
    cache=True,
)
def convolve_items(
    pmf: np.ndarray, grid: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Sequential direct convolution of the ``k`` rows of ``pmf`` into ``out``.

    A gufunc, ``(k,n),(m)->(m)``: leading dims broadcast.

    Parameters
    ----------
    pmf : numpy.ndarray
        ``(..., k, n)``: the PMFs of ``k`` items on the same ``n`` consecutive scores.
    grid : numpy.ndarray
        ``(..., m)`` with ``m = k (n - 1) + 1``; only its length is read.
    out : numpy.ndarray, optional
        ``(..., m)``, filled in place.

    Returns
    -------
    numpy.ndarray
        ``(..., m)``: the PMF of the sum, on the ``m`` consecutive integers from
        ``k`` times the lowest score.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([[0.5, 0.5], [0.25, 0.75]])
    >>> convolve_items(p, np.zeros(3))
    array([0.125, 0.5  , 0.375])
    """
    k, n = pmf.shape
    m = out.shape[0]
    for i in range(m):
        out[i] = 0.0
    if k == 0:
        return
    tmp = np.zeros(m)
    for j in range(n):
        out[j] = pmf[0, j]
    length = n
    for item in range(1, k):
        for i in range(length + n - 1):
            tmp[i] = 0.0
        for i in range(length):
            a = out[i]
            if a == 0.0:
                continue
            for j in range(n):
                tmp[i + j] += a * pmf[item, j]
        length += n - 1
        for i in range(length):
            out[i] = tmp[i]


def convolve_items_numpy(pmf: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`convolve_items` (same broadcasting).

    Parameters
    ----------
    pmf : numpy.ndarray
        ``(..., k, n)``: the PMFs of ``k`` items on the same ``n`` consecutive scores.
    grid : numpy.ndarray
        ``(..., m)`` with ``m = k (n - 1) + 1``; only its length is read.

    Returns
    -------
    numpy.ndarray
        ``(..., m)``: the PMF of the sum.

    Examples
    --------
    >>> p = np.array([[0.5, 0.5], [0.25, 0.75]])
    >>> convolve_items_numpy(p, np.zeros(3))
    array([0.125, 0.5  , 0.375])
    """
    pmf = np.asarray(pmf, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    batch = np.broadcast_shapes(pmf.shape[:-2], grid.shape[:-1])
    pmf = np.broadcast_to(pmf, (*batch, *pmf.shape[-2:]))
    k, n = pmf.shape[-2:]
    m = grid.shape[-1]
    out = np.zeros((*batch, m))
    if k == 0:
        return out
    out[..., :n] = pmf[..., 0, :]
    length = n
    for item in range(1, k):
        new = np.zeros((*batch, length + n - 1))
        for j in range(n):
            new[..., j : j + length] += out[..., :length] * pmf[..., item, j : j + 1]
        length += n - 1
        out[..., :length] = new
    return out
