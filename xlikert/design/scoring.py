"""Scoring helpers that carry the instrument's keying into the analysis.

* :func:`reflect_reverse_keyed` reflects the PMF of every reverse-keyed item,
  ``y -> y_min + y_max - y``, so that a high score means more of the construct
  on every item.
* :func:`subscale_composites` forms one composite-score PMF per subscale (the
  exact convolution of its items, :func:`xlikert.composite`), reflecting
  reverse-keyed items first.

Both read the item coordinates written by
:meth:`xlikert.design.Experiment.build_prompts` and kept by the collection
layer: ``reverse_keyed`` (bool) and ``subscale`` (str, "" if none). A reflected
PMF carries the item coordinate ``reflected`` (bool), so reflecting twice is
caught instead of silently undoing the first reflection.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..dims import DECODING_DIMS, factor_dims
from ..errors import DesignError
from ..validate import as_pmf, check_item_dim, check_score_axis

__all__ = ["reflect_reverse_keyed", "subscale_composites"]


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

    Parameters
    ----------
    pmf
        Item PMFs with dims ``(..., item_dim, ..., score_dim)``; the score
        coordinate holds consecutive integers ``y_min..y_max``.
    reverse_keyed
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
    mask_da = xr.DataArray(mask, dims=(item_dim,))
    reversed_ = pmf.isel({score_dim: slice(None, None, -1)})
    reversed_ = reversed_.assign_coords({score_dim: pmf[score_dim].values})
    out = xr.where(mask_da, reversed_, pmf, keep_attrs=True).transpose(*pmf.dims)
    out.name = pmf.name
    out.attrs = dict(pmf.attrs)
    return out.assign_coords(reflected=(item_dim, mask | done))


def subscale_composites(
    pmf: xr.DataArray | xr.Dataset,
    subscale: xr.DataArray | Sequence[str] | Mapping[str, str] | None = None,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
) -> xr.DataArray:
    """One composite-score PMF per subscale, padded onto a common score axis.

    Each subscale's composite is the exact distribution of the sum of its
    items (conditionally independent given the condition), computed by
    :func:`xlikert.composite`. A subscale of ``K_s`` items on ``y_min..y_max``
    lives on ``K_s*y_min .. K_s*y_max``; subscales of different lengths are
    stacked on the union of these ranges with **zero mass outside each
    subscale's own range** (its support is in the ``score_min``/``score_max``
    coordinates), so every row is still a PMF that sums to 1 and means, SDs and
    mixtures are unaffected by the padding. Select one subscale
    (``.sel(subscale="extraversion")``) and drop the zero tail with
    ``.sel(score=slice(score_min, score_max))`` if you need its own axis.

    Parameters
    ----------
    pmf
        Item PMFs with dims ``(*factors, item_dim, score_dim)``.
    subscale
        Subscale of each item: ``None`` reads the item coordinate ``subscale``;
        otherwise a str DataArray on ``item_dim``, a sequence (one per item) or
        a mapping item id -> subscale. Items with subscale ``""`` belong to no
        subscale and are left out (listed in the ``items_without_subscale`` attr).
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.
    reflect : keyword-only
        If True (default), reflect reverse-keyed items first (read from the
        item coordinate ``reverse_keyed``; items whose ``reflected`` coordinate
        is already True are not reflected again). If False, compose as given.

    Returns
    -------
    xr.DataArray
        ``pmf`` with dims ``(*factors, "subscale", score_dim)``; coordinates on
        ``subscale``: ``n_items``, ``score_min``, ``score_max``.

    Raises
    ------
    DesignError
        If no item has a subscale, or the subscale spec does not match the items.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> pmf = synthetic_pmf({"model": 2}, n_items=4, scale=(1, 5))
    >>> pmf = pmf.assign_coords(subscale=("item", ["E", "E", "A", "A"]),
    ...                         reverse_keyed=("item", [False, True, False, False]))
    >>> comp = subscale_composites(pmf)
    >>> dict(comp.sizes)
    {'model': 2, 'subscale': 2, 'score': 9}
    """
    from .. import composite

    pmf = as_pmf(pmf)
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    check_item_dim(pmf, item_dim)
    lo_hi = check_score_axis(pmf, score_dim)
    y_min, y_max = int(lo_hi[0]), int(lo_hi[-1])
    names = _item_values(pmf, subscale, item_dim, "subscale", "str")
    if reflect and "reverse_keyed" in pmf.coords and pmf["reverse_keyed"].dims == (item_dim,):
        todo = np.asarray(pmf["reverse_keyed"].values, dtype=bool)
        if "reflected" in pmf.coords and pmf["reflected"].dims == (item_dim,):
            todo = todo & ~np.asarray(pmf["reflected"].values, dtype=bool)
        if todo.any():
            pmf = reflect_reverse_keyed(pmf, list(todo), item_dim=item_dim, score_dim=score_dim)
    order = list(dict.fromkeys(str(s) for s in names if str(s)))
    if not order:
        raise DesignError(
            f"no item along {item_dim!r} belongs to a subscale (all subscales are empty); "
            "use xlikert.composite for the whole instrument"
        )
    item_coords = [c for c in pmf.coords if c != item_dim and item_dim in pmf[c].dims]
    base = pmf.drop_vars(item_coords)
    parts, n_items = [], []
    for name in order:
        idx = np.flatnonzero(names == name)
        comp = composite(base.isel({item_dim: idx}), item_dim=item_dim, score_dim=score_dim)
        parts.append(comp)
        n_items.append(len(idx))
    lo = min(k * y_min for k in n_items)
    hi = max(k * y_max for k in n_items)
    grid = np.arange(lo, hi + 1)
    padded = [p.reindex({score_dim: grid}, fill_value=0.0) for p in parts]
    out = xr.concat(padded, dim="subscale", coords="minimal", compat="override", join="outer")
    out = out.assign_coords(
        subscale=np.array(order, dtype=str),
        n_items=("subscale", np.array(n_items, dtype=np.int64)),
        score_min=("subscale", np.array([k * y_min for k in n_items], dtype=np.int64)),
        score_max=("subscale", np.array([k * y_max for k in n_items], dtype=np.int64)),
    )
    dims = [d for d in out.dims if d not in ("subscale", score_dim)] + ["subscale", score_dim]
    out = out.transpose(*dims)
    out.name = pmf.name if pmf.name is not None else "pmf"
    out.attrs = dict(pmf.attrs)
    left_out = (
        np.asarray(pmf[item_dim].values)[names == ""].tolist() if item_dim in pmf.coords else []
    )
    if left_out:
        out.attrs["items_without_subscale"] = json.dumps([str(x) for x in left_out])
    return out
