"""Each item's own response options, as a results file records them.

A results file has one ``score`` axis, the union of its items' points. When the items
have their own options, item coordinates say what each item offers:

* ``score_min``, ``score_max`` (``item``) -- the item's support is
  ``score_min..score_max``; its PMF is 0 off it;
* ``nominal`` (``item``) -- True where the item's options have no order (vote choice,
  religion): everything that needs an order refuses it (:func:`require_ordinal`).

Without these coordinates every item is ordinal on the whole ``score`` axis (files
written before items had their own options analyse exactly as before). The functions
here read them for every analysis stage: the support mask and its bounds (Tastle's
``d_max``, representativeness's ``K - 1``, the reflection ``y -> min + max - y``) and
the nominal items.

Examples
--------
>>> import xarray as xr, xlikert as xl
>>> pmf = xr.DataArray(
...     [[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]], dims=("item", "score"),
...     coords={"item": ["a", "b"], "score": [1, 2, 3, 4],
...             "score_min": ("item", [1, 1]), "score_max": ("item", [2, 4]),
...             "nominal": ("item", [False, True])})
>>> xl.item_points(pmf).values.tolist(), xl.nominal_items(pmf)
([2, 4], ['b'])
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ..core.errors import InputTypeError, InvalidPMFError, NominalItemError
from ..core.validate import check_score_axis, is_lazy

__all__ = [
    "item_points",
    "item_support",
    "nominal_items",
    "require_ordinal",
    "support_bounds",
]

#: The item coordinates that record an item's own support, and its nominal flag.
SUPPORT_COORDS: tuple[str, str] = ("score_min", "score_max")
NOMINAL_COORD = "nominal"
#: Mass off an item's support accepted as storage round-off.
OFF_SUPPORT_ATOL = 1e-6


def _item_ids(obj: xr.DataArray | xr.Dataset, mask: np.ndarray, item_dim: Hashable) -> list[Any]:
    if item_dim in obj.coords:
        ids = np.atleast_1d(np.asarray(obj[item_dim].values))
        return [str(v) for v in np.broadcast_to(ids, mask.shape)[mask]]
    return np.flatnonzero(mask).tolist()


def support_bounds(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> tuple[xr.DataArray, xr.DataArray]:
    """Each item's lowest and highest point: ``score_min`` and ``score_max``.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs (or a results Dataset) with a ``score_dim`` coordinate.
    item_dim, score_dim : hashable, keyword-only
        Names of the item and score dims.

    Returns
    -------
    tuple of xr.DataArray
        ``(score_min, score_max)``: the item coordinates (dims ``(item_dim,)``, or 0-d
        for a single item), or both ends of the score axis (0-d) when the file records
        no per-item support.

    Raises
    ------
    InvalidPMFError
        Only one of the two coordinates, a support outside the score axis or of fewer
        than two points; the message names the items.

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[0.5, 0.5, 0.0]], dims=("item", "score"),
    ...                    coords={"item": ["a"], "score": [0, 1, 2],
    ...                            "score_min": ("item", [0]), "score_max": ("item", [1])})
    >>> [b.values.tolist() for b in support_bounds(pmf)]
    [[0], [1]]
    """
    y = check_score_axis(pmf, score_dim)
    have = [c in pmf.coords for c in SUPPORT_COORDS]
    if not any(have):
        return (xr.DataArray(int(y[0])), xr.DataArray(int(y[-1])))
    if not all(have):
        missing = SUPPORT_COORDS[have.index(False)]
        raise InvalidPMFError(
            f"the PMF has only one of the item coordinates {list(SUPPORT_COORDS)} (no "
            f"{missing!r}); an item's support needs both"
        )
    lo, hi = (pmf.coords[c].reset_coords(drop=True) for c in SUPPORT_COORDS)
    lo_v, hi_v = np.asarray(lo.values), np.asarray(hi.values)
    bad = (lo_v < y[0]) | (hi_v > y[-1]) | (hi_v <= lo_v)
    if bad.any():
        raise InvalidPMFError(
            f"items {_item_ids(pmf, np.atleast_1d(bad), item_dim)} have a support "
            f"score_min..score_max outside the score axis {int(y[0])}..{int(y[-1])} or of "
            "fewer than two points"
        )
    return lo.astype(np.int64), hi.astype(np.int64)


def item_support(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Where each item has its points: a boolean mask ``(item, score)``.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs (or a results Dataset) with a ``score_dim`` coordinate.
    item_dim, score_dim : hashable, keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.DataArray
        ``support``: True on ``score_min..score_max`` of each item (every point of the
        score axis when the file records no per-item support).

    Raises
    ------
    InvalidPMFError
        A malformed score axis or per-item support (:func:`support_bounds`).

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[0.5, 0.5, 0.0]], dims=("item", "score"),
    ...                    coords={"item": ["a"], "score": [0, 1, 2],
    ...                            "score_min": ("item", [0]), "score_max": ("item", [1])})
    >>> item_support(pmf).values.tolist()
    [[True, True, False]]
    """
    lo, hi = support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    y = pmf[score_dim].reset_coords(drop=True)
    return ((y >= lo) & (y <= hi)).transpose(..., score_dim).rename("support")


def item_points(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """The number of points ``K`` of each item's own scale.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs (or a results Dataset) with a ``score_dim`` coordinate.
    item_dim, score_dim : hashable, keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.DataArray
        ``n_points``: ``score_max - score_min + 1`` per item (0-d, the length of the
        score axis, when the file records no per-item support).

    Raises
    ------
    InvalidPMFError
        A malformed score axis or per-item support (:func:`support_bounds`).

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[0.5, 0.5, 0.0]], dims=("item", "score"),
    ...                    coords={"item": ["a"], "score": [0, 1, 2]})
    >>> int(item_points(pmf))
    3
    """
    lo, hi = support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    return (hi - lo + 1).rename("n_points")


def nominal_items(pmf: xr.DataArray | xr.Dataset, *, item_dim: Hashable = "item") -> list[str]:
    """The items whose options have no order (item coordinate ``nominal``).

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs or a results Dataset.
    item_dim : hashable, keyword-only
        Name of the item dim.

    Returns
    -------
    list of str
        The ids of the nominal items (empty when there is no ``nominal`` coordinate).

    Raises
    ------
    InputTypeError
        ``pmf`` neither a DataArray nor a Dataset.

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[1.0, 0.0], [0.0, 1.0]], dims=("item", "score"),
    ...                    coords={"item": ["vote", "lr"], "score": [1, 2],
    ...                            "nominal": ("item", [True, False])})
    >>> nominal_items(pmf)
    ['vote']
    """
    if not isinstance(pmf, xr.DataArray | xr.Dataset):
        raise InputTypeError(f"expected a PMF DataArray or Dataset, got {type(pmf).__name__}")
    if NOMINAL_COORD not in pmf.coords:
        return []
    mask = np.atleast_1d(np.asarray(pmf.coords[NOMINAL_COORD].values, dtype=bool))
    return _item_ids(pmf, mask, item_dim)


def require_ordinal(
    pmf: xr.DataArray | xr.Dataset, what: str, *, item_dim: Hashable = "item"
) -> None:
    """Raise :class:`~xlikert.core.errors.NominalItemError` if some item has no order.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs or a results Dataset.
    what : str
        What needs the order (the function's name), for the message.
    item_dim : hashable, keyword-only
        Name of the item dim.

    Raises
    ------
    NominalItemError
        Some item is nominal; the message names the items and how to leave them out.

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray([[1.0, 0.0]], dims=("item", "score"),
    ...                    coords={"item": ["vote"], "score": [1, 2], "nominal": ("item", [True])})
    >>> require_ordinal(pmf, "xl.composite")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.NominalItemError: xl.composite needs ordered options, but items ['vote'] are nominal (their options have no order); leave them out, e.g. pmf.sel(item=~pmf.nominal)
    """
    bad = nominal_items(pmf, item_dim=item_dim)
    if bad:
        raise NominalItemError(
            f"{what} needs ordered options, but items {bad} are nominal (their options have "
            f"no order); leave them out, e.g. pmf.sel({item_dim}=~pmf.nominal)"
        )


def check_support(
    pmf: xr.DataArray, *, item_dim: Hashable = "item", score_dim: Hashable = "score"
) -> None:
    """Raise if an item's PMF has mass off its own support (skipped for lazy input)."""
    if not any(c in pmf.coords for c in SUPPORT_COORDS) or is_lazy(pmf):
        return
    off = pmf.where(~item_support(pmf, item_dim=item_dim, score_dim=score_dim), 0.0)
    mass = off.sum([score_dim])
    bad = mass > OFF_SUPPORT_ATOL
    if item_dim in bad.dims:
        bad = bad.any([d for d in bad.dims if d != item_dim])
    elif bad.ndim:
        bad = bad.any()
    mask = np.atleast_1d(np.asarray(bad.values))
    if mask.any():
        raise InvalidPMFError(
            f"items {_item_ids(pmf, mask, item_dim)} have mass off their own support "
            f"score_min..score_max (largest {float(mass.max()):.3g}); an item's PMF is 0 "
            "off the points it offers"
        )
