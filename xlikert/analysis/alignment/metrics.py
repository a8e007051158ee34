"""The five alignment metrics of a model PMF with a human PMF, one function each."""

from __future__ import annotations

from collections.abc import Hashable

import xarray as xr

from ...core.validate import as_pmf
from ..support import item_points
from .pairs import one_metric

__all__ = [
    "jensen_shannon",
    "mean_difference",
    "representativeness",
    "total_variation",
    "wasserstein",
]


def wasserstein(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.DataArray:
    """Wasserstein-1 distance of model and human PMFs on the ordinal scale (score units).

    ``W1 = sum_k |F_p(k) - F_q(k)|`` over the scale points ``k``, with ``F_p`` and
    ``F_q`` the two CDFs: the earth mover's distance on the integer scale.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``wasserstein`` (score units), broadcast over every other dim of both inputs.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.5, 0.5, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.wasserstein(p, p.roll(score=1)))
    1.0
    """
    return one_metric(model, human, "wasserstein", score_dim, item_dim, kernels)


def representativeness(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.DataArray:
    """OpinionQA representativeness ``1 - W1 / (K - 1)``, ``K`` the number of scale points.

    1 for identical PMFs, 0 for all mass at opposite ends of the scale
    (Santurkar et al. 2023).

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``representativeness`` in [0, 1], broadcast over every other dim of both inputs.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([1.0, 0.0, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.representativeness(p, p.roll(score=2)))    # opposite ends
    0.0
    """
    w1 = wasserstein(model, human, score_dim=score_dim, item_dim=item_dim, kernels=kernels)
    out = 1.0 - w1 / (item_points(as_pmf(model), item_dim=item_dim, score_dim=score_dim) - 1)
    out.name = "representativeness"
    return out


def total_variation(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.DataArray:
    """Total variation distance of model and human PMFs, in [0, 1].

    ``TV = 1/2 sum_k |p_k - q_k|``.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``total_variation``, broadcast over every other dim of both inputs.

    Raises
    ------
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.5, 0.5, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.total_variation(p, p.roll(score=1)))
    0.5
    """
    return one_metric(model, human, "total_variation", score_dim, item_dim, kernels)


def jensen_shannon(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.DataArray:
    """Jensen-Shannon divergence of model and human PMFs, in bits.

    With log base 2 it lies in [0, 1]; it is the divergence, not its square root
    (the JS distance).

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``jensen_shannon`` (bits), broadcast over every other dim of both inputs.

    Raises
    ------
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([1.0, 0.0], dims="score", coords={"score": [1, 2]})
    >>> float(xl.jensen_shannon(p, p.roll(score=1)))         # disjoint supports
    1.0
    """
    return one_metric(model, human, "jensen_shannon", score_dim, item_dim, kernels)


def mean_difference(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    kernels: str | None = None,
) -> xr.DataArray:
    """Difference of the means of model and human PMFs, model minus humans (score units).

    ``E_p[y] - E_q[y]``.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``mean_difference`` (score units), broadcast over every other dim of both inputs.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.5, 0.5, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.mean_difference(p.roll(score=1), p))
    1.0
    """
    return one_metric(model, human, "mean_difference", score_dim, item_dim, kernels)
