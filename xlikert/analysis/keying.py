"""Keying and subscales: how the instrument's reverse keys and subscales enter the analysis.

* :func:`reflect_reverse_keyed` reflects the PMF of every reverse-keyed item,
  ``y -> y_min + y_max - y``, so that a high score means more of the construct
  on every item.
* :func:`subscale_groups` says which items form each subscale, and
  :func:`reflect_pending` reflects the items not yet reflected; the construct
  stage (:func:`xlikert.composite`, :func:`xlikert.subscale_composites`) calls them.

The analysis applies the same rule by default: every function that turns item
PMFs into a composite (:func:`xlikert.composite`, :func:`xlikert.decompose`,
:func:`xlikert.contrast`, :func:`xlikert.trend`, :mod:`xlikert.analysis.sampling`, the
report) reflects the reverse-keyed items once (:func:`reflect_pending`) and
composes the items of each subscale separately (:func:`subscale_groups`), so
``score`` is always the construct's scale. ``reflect=False`` and
``subscale=None`` opt out.

Representation of per-subscale composites
-----------------------------------------
Subscales of different lengths have different supports (``K_s*y_min ..
K_s*y_max``). They are stacked along a ``subscale`` dim on **one common integer
score axis**, the union of the supports, with zero mass outside each subscale's
own range; the support is recorded in the coordinates ``n_items``,
``score_min`` and ``score_max`` on ``subscale``. Every row is still a PMF on
consecutive integers, so the kernels (convolution, comonotone contrasts),
mixtures (``.mean(dim)``) and summaries run unchanged and broadcast over
``subscale`` like any batch dim, and zero mass changes no mean, SD or
effect. A ragged container (one array per subscale) would break that
broadcasting; a per-subscale relative axis would lose the score values.

Both read the item coordinates written by
:meth:`xlikert.design.Experiment.build_prompts` and kept by the collection
layer: ``reverse_keyed`` (bool) and ``subscale`` (str, "" if none). A reflected
PMF carries the item coordinate ``reflected`` (bool), so reflecting twice is
caught instead of silently undoing the first reflection.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..core.dims import DECODING_DIMS, SUBSCALE_DIM, factor_dims
from ..core.errors import DesignError
from ..core.validate import as_pmf, check_item_dim, check_score_axis
from .support import check_support, require_ordinal, support_bounds

__all__ = [
    "Subscale",
    "reflect_pending",
    "reflect_reverse_keyed",
    "subscale_coords",
    "subscale_groups",
]

#: How items are grouped into subscales: an item coordinate name, a per-item spec or None.
Subscale = Hashable | xr.DataArray | Sequence[str] | Mapping[str, str] | None


def _item_values(
    pmf: xr.DataArray, spec: Any, item_dim: Hashable, coord: str, kind: str
) -> np.ndarray:
    """Resolve a per-item spec (coord name default, DataArray, mapping or sequence) to an array."""
    items = [str(x) for x in np.asarray(pmf[item_dim].values)] if item_dim in pmf.coords else None
    n = pmf.sizes[item_dim]
    if spec is None:
        if coord not in pmf.coords or pmf[coord].dims != (item_dim,):
            raise DesignError(
                f"PMF has no {coord!r} coordinate on dimension {item_dim!r}; pass {coord}=... "
                f"(results built from an xlikert experiment carry it)"
            )
        return np.asarray(pmf[coord].values)
    if isinstance(spec, xr.DataArray):
        if spec.dims != (item_dim,):
            raise DesignError(
                f"{coord} must have the single dimension {item_dim!r}, got {spec.dims}"
            )
        if items is not None and item_dim in spec.coords:
            have = [str(x) for x in spec[item_dim].values]
            missing = [i for i in items if i not in have]
            if missing:
                raise DesignError(f"{coord} has no value for items {missing}")
            pos = [have.index(i) for i in items]
            return np.asarray(spec.values)[pos]
        spec = list(np.asarray(spec.values))
    if isinstance(spec, Mapping):
        if items is None:
            raise DesignError(f"a mapping {coord} needs an {item_dim!r} coordinate of item ids")
        keys = {str(k): v for k, v in spec.items()}
        unknown = sorted(set(keys) - set(items))
        if unknown:
            raise DesignError(f"{coord} names unknown items {unknown}; items are {items}")
        if kind == "bool":
            return np.array([bool(keys.get(i, False)) for i in items])
        missing = [i for i in items if i not in keys]
        if missing:
            raise DesignError(f"{coord} has no value for items {missing}")
        return np.array([str(keys[i]) for i in items])
    values = list(spec) if not isinstance(spec, str) else [spec]
    if kind == "bool" and not all(isinstance(v, bool | np.bool_) for v in values):
        # a collection of item ids
        if items is None:
            raise DesignError(f"item ids in {coord} need an {item_dim!r} coordinate")
        ids = [str(v) for v in values]
        unknown = [i for i in ids if i not in items]
        if unknown:
            raise DesignError(f"{coord} names unknown items {unknown}; items are {items}")
        return np.isin(np.array(items), ids)
    if len(values) != n:
        raise DesignError(f"{coord} has {len(values)} values for {n} items along {item_dim!r}")
    return np.array(values, dtype=bool if kind == "bool" else str)


def reflect_reverse_keyed(
    pmf: xr.DataArray | xr.Dataset,
    reverse_keyed: xr.DataArray | Sequence[bool] | Sequence[str] | Mapping[str, bool] | None = None,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Reflect the PMF of every reverse-keyed item: ``P'(y) = P(y_min + y_max - y)``.

    ``y_min`` and ``y_max`` are the ends of the item's own scale (its
    ``score_min..score_max`` where the items have their own options,
    :mod:`xlikert.analysis.support`), else of the ``score`` coordinate.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(..., item_dim, ..., score_dim)``; the score
        coordinate holds consecutive integers ``y_min..y_max``.
    reverse_keyed : xr.DataArray, sequence of bool or str, or mapping, optional
        Which items to reflect: ``None`` reads the item coordinate
        ``reverse_keyed``; otherwise a boolean DataArray on ``item_dim``, a
        sequence of booleans (one per item), a collection of item ids, or a
        mapping item id -> bool.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Returns
    -------
    xr.DataArray
        Same dims, coords and attrs, with the reflected items' PMFs reversed
        along ``score_dim`` and a bool item coordinate ``reflected`` marking them.

    Raises
    ------
    DesignError
        If there is no keying information, an item id is unknown, or an item
        would be reflected a second time.
    NominalItemError
        A reverse-keyed item is nominal (its options have no order to reverse).

    Examples
    --------
    >>> pmf = xr.DataArray([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]], dims=("item", "score"),
    ...                    coords={"item": ["a", "b"], "score": [1, 2, 3],
    ...                            "reverse_keyed": ("item", [False, True])})
    >>> reflect_reverse_keyed(pmf).sel(item="b").values
    array([0.1, 0.2, 0.7])
    """
    pmf = as_pmf(pmf)
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    check_item_dim(pmf, item_dim)
    check_score_axis(pmf, score_dim)
    mask = _item_values(pmf, reverse_keyed, item_dim, "reverse_keyed", "bool").astype(bool)
    done = (
        np.asarray(pmf["reflected"].values, dtype=bool)
        if "reflected" in pmf.coords and pmf["reflected"].dims == (item_dim,)
        else np.zeros(pmf.sizes[item_dim], dtype=bool)
    )
    twice = mask & done
    if twice.any():
        ids = (
            np.asarray(pmf[item_dim].values)[twice].tolist()
            if item_dim in pmf.coords
            else np.flatnonzero(twice).tolist()
        )
        raise DesignError(
            f"items {ids} were already reflected (item coordinate 'reflected' is True); "
            "reflecting again would undo it"
        )
    require_ordinal(pmf.isel({item_dim: np.flatnonzero(mask)}), "reflect_reverse_keyed")
    out = _reflected(pmf, mask, item_dim, score_dim)
    out.name = pmf.name
    out.attrs = dict(pmf.attrs)
    return out.assign_coords(reflected=(item_dim, mask | done))


def _reflected(
    pmf: xr.DataArray, mask: np.ndarray, item_dim: Hashable, score_dim: Hashable
) -> xr.DataArray:
    """``pmf`` with the ``mask`` items reflected on their own support: ``y -> min + max - y``."""
    check_support(pmf, item_dim=item_dim, score_dim=score_dim)
    y = pmf[score_dim].values.astype(np.int64)
    lo, hi = (
        np.broadcast_to(b.values, mask.shape)
        for b in support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    )
    src = np.tile(np.arange(y.size), (mask.size, 1))  # the score index each point reads
    for i in np.flatnonzero(mask):
        on = (y >= lo[i]) & (y <= hi[i])
        src[i, on] = (lo[i] + hi[i] - y[on]) - y[0]
    perm = xr.DataArray(src, dims=(item_dim, score_dim))
    out = xr.apply_ufunc(
        lambda p, s: np.take_along_axis(p, np.broadcast_to(s, p.shape), axis=-1),
        pmf,
        perm,
        input_core_dims=[[item_dim, score_dim], [item_dim, score_dim]],
        output_core_dims=[[item_dim, score_dim]],
        dask="parallelized",
        output_dtypes=[pmf.dtype],
        dask_gufunc_kwargs={"allow_rechunk": True},
        keep_attrs=True,
    )
    result: xr.DataArray = out.transpose(*pmf.dims)
    return result


def reflect_pending(
    pmf: xr.DataArray, *, item_dim: Hashable = "item", score_dim: Hashable = "score"
) -> xr.DataArray:
    """Reflect the reverse-keyed items not yet reflected (item coords ``reverse_keyed``, ``reflected``).

    PMFs without a ``reverse_keyed`` item coordinate, or whose reverse-keyed
    items all carry ``reflected=True``, are returned unchanged, so calling this
    twice reflects nothing twice.

    Examples
    --------
    >>> pmf = xr.DataArray([[0.7, 0.3], [0.7, 0.3]], dims=("item", "score"),
    ...                    coords={"score": [1, 2], "reverse_keyed": ("item", [False, True])})
    >>> once = reflect_pending(pmf)
    >>> once.values.tolist(), once.reflected.values.tolist()
    ([[0.7, 0.3], [0.3, 0.7]], [False, True])
    >>> reflect_pending(once).identical(once)
    True
    """
    if "reverse_keyed" not in pmf.coords or pmf["reverse_keyed"].dims != (item_dim,):
        return pmf
    todo = np.asarray(pmf["reverse_keyed"].values, dtype=bool)
    if "reflected" in pmf.coords and pmf["reflected"].dims == (item_dim,):
        todo = todo & ~np.asarray(pmf["reflected"].values, dtype=bool)
    if not todo.any():
        return pmf
    return reflect_reverse_keyed(pmf, list(todo), item_dim=item_dim, score_dim=score_dim)


def subscale_groups(
    pmf: xr.DataArray,
    subscale: Hashable | xr.DataArray | Sequence[str] | Mapping[str, str] | None = SUBSCALE_DIM,
    *,
    item_dim: Hashable = "item",
    split_single: bool = False,
) -> list[tuple[str, np.ndarray]] | None:
    """The positions along ``item_dim`` of each subscale's items, in order of first appearance.

    Parameters
    ----------
    pmf
        Item PMFs.
    subscale
        The name of an item coordinate holding each item's subscale (default
        ``"subscale"``; a missing coordinate means no subscales), a per-item
        spec (str DataArray on ``item_dim``, sequence or mapping item id ->
        subscale), or None (no subscales). Items with subscale ``""`` belong to
        none.
    item_dim : keyword-only
        Name of the item dim.
    split_single : keyword-only
        If False (the analysis' default), fewer than two subscales mean "compose
        all items together" (returns None), so instruments with one subscale
        behave as without. If True, even one subscale is a group, and no
        subscale at all is an error (:func:`subscale_composites`).

    Returns
    -------
    list of (name, positions) or None
        None: compose every item into one composite.

    Examples
    --------
    >>> pmf = xr.DataArray(np.full((3, 2), 0.5), dims=("item", "score"),
    ...                    coords={"subscale": ("item", ["E", "A", "E"])})
    >>> [(name, idx.tolist()) for name, idx in subscale_groups(pmf)]
    [('E', [0, 2]), ('A', [1])]
    >>> subscale_groups(pmf, None) is None
    True
    """
    if subscale is None:
        return None
    if isinstance(subscale, str):
        if subscale not in pmf.coords and not split_single:
            return None
        names = _item_values(pmf, None, item_dim, subscale, "str")
    else:
        names = _item_values(pmf, subscale, item_dim, SUBSCALE_DIM, "str")
    names = np.array([str(x) for x in names], dtype=str)
    order = list(dict.fromkeys(str(s) for s in names if s))
    if not order and split_single:
        raise DesignError(
            f"no item along {item_dim!r} belongs to a subscale (all subscales are empty); "
            "use xlikert.composite for the whole instrument"
        )
    if len(order) < (1 if split_single else 2):
        return None
    return [(name, np.flatnonzero(names == name)) for name in order]


def subscale_coords(
    names: Sequence[str], n_items: Sequence[int], y_min: int, y_max: int
) -> dict[str, Any]:
    """Coordinates of a ``subscale`` dim: its labels, ``n_items``, ``score_min``, ``score_max``.

    Examples
    --------
    >>> c = subscale_coords(["E", "A"], [2, 3], 1, 5)
    >>> c["score_max"][1].tolist()
    [10, 15]
    """
    k = np.asarray(n_items, dtype=np.int64)
    return {
        SUBSCALE_DIM: np.array(list(names), dtype=str),
        "n_items": (SUBSCALE_DIM, k),
        "score_min": (SUBSCALE_DIM, k * int(y_min)),
        "score_max": (SUBSCALE_DIM, k * int(y_max)),
    }
