"""Composite scores: the exact convolution of item PMFs (:ref:`eq-item-wise-convolution`).

:func:`composite` (and :func:`subscale_composites`, one composite per subscale)
reflects reverse-keyed items and groups items into subscales first
(:mod:`xlikert.analysis.keying`), so ``score`` is always the construct's scale.
The convolution runs in the kernel ``convolve_items`` (:mod:`xlikert.kernels`).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import xarray as xr

from ...core.dims import DECODING_DIMS, SUBSCALE_DIM, factor_dims
from ...core.validate import (
    as_pmf,
    check_fully_crossed,
    check_item_dim,
    check_pmf,
    check_score_axis,
    single_chunk,
)
from ...kernels import get_kernel
from ..keying import Subscale, reflect_pending, subscale_coords, subscale_groups
from ..support import require_ordinal

__all__ = ["composite", "subscale_composites", "to_composite"]

_GRID = "_grid"


def to_composite(
    pmf: xr.DataArray | xr.Dataset,
    item_dim: Hashable,
    score_dim: Hashable,
    kernels: str | None,
    reflect: bool = True,
    subscale: Subscale = SUBSCALE_DIM,
) -> xr.DataArray:
    """Compose item-level PMFs (instrument-aware, see :func:`composite`), or validate composites."""
    pmf = as_pmf(pmf)
    check_score_axis(pmf, score_dim)
    # whole missing cells are a design problem: report them as such first
    check_fully_crossed(pmf, [d for d in pmf.dims if d not in (item_dim, score_dim)], score_dim)
    if item_dim is not None and item_dim in pmf.dims:
        return composite(
            pmf,
            item_dim=item_dim,
            score_dim=score_dim,
            reflect=reflect,
            subscale=subscale,
            kernels=kernels,
        )
    return check_pmf(pmf, score_dim)


def _convolve(
    pmf: xr.DataArray, item_dim: Hashable, score_dim: Hashable, y: np.ndarray, kernels: str | None
) -> xr.DataArray:
    """Exact convolution of all items along ``item_dim`` (the kernel call)."""
    k = pmf.sizes[item_dim]
    grid = xr.DataArray(np.zeros(k * (y.size - 1) + 1), dims=_GRID)
    data = single_chunk(pmf.astype(np.float64, copy=False), [item_dim, score_dim])
    out = xr.apply_ufunc(
        get_kernel("convolve_items", kernels),
        data,
        grid,
        input_core_dims=[[item_dim, score_dim], [_GRID]],
        output_core_dims=[[_GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=True,
    )
    result: xr.DataArray = out.rename({_GRID: score_dim}).assign_coords(
        {score_dim: np.arange(k * int(y[0]), k * int(y[-1]) + 1)}
    )
    return result


def _compose(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable,
    score_dim: Hashable,
    reflect: bool,
    subscale: Subscale,
    kernels: str | None,
    split_single: bool = False,
) -> xr.DataArray:
    """:func:`composite` and :func:`xlikert.design.subscale_composites` (``split_single``)."""
    pmf = as_pmf(pmf)
    require_ordinal(pmf, "a composite (sum of item scores)", item_dim=item_dim)
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    check_item_dim(pmf, item_dim)
    pmf = check_pmf(pmf, score_dim)
    y = check_score_axis(pmf, score_dim)
    if reflect:
        pmf = reflect_pending(pmf, item_dim=item_dim, score_dim=score_dim)
    groups = subscale_groups(pmf, subscale, item_dim=item_dim, split_single=split_single)
    ids = (
        np.asarray(pmf[item_dim].values).astype(str)
        if item_dim in pmf.coords
        else np.arange(pmf.sizes[item_dim]).astype(str)
    )
    flagged = "reflected" in pmf.coords and pmf["reflected"].dims == (item_dim,)
    reflected = ids[np.asarray(pmf["reflected"].values, dtype=bool)] if flagged else ids[:0]
    base = pmf.drop_vars([c for c in pmf.coords if c != item_dim and item_dim in pmf[c].dims])
    if groups is None:
        out = _convolve(base, item_dim, score_dim, y, kernels)
    else:
        n_items = [idx.size for _, idx in groups]
        grid = np.arange(min(n_items) * int(y[0]), max(n_items) * int(y[-1]) + 1)
        parts = [
            _convolve(base.isel({item_dim: idx}), item_dim, score_dim, y, kernels).reindex(
                {score_dim: grid}, fill_value=0.0
            )
            for _, idx in groups
        ]
        out = xr.concat(parts, dim=SUBSCALE_DIM, coords="minimal", compat="override", join="outer")
        out = out.assign_coords(
            subscale_coords([g for g, _ in groups], n_items, int(y[0]), int(y[-1]))
        ).transpose(..., SUBSCALE_DIM, score_dim)
    out.name = pmf.name if pmf.name is not None or groups is None else "pmf"
    out.attrs = dict(pmf.attrs)
    if reflected.size:
        out.attrs["reflected_items"] = json.dumps(reflected.tolist())
    if groups is not None:
        used = np.zeros(ids.size, dtype=bool)
        for _, idx in groups:
            used[idx] = True
        if not used.all():
            out.attrs["items_without_subscale"] = json.dumps(ids[~used].tolist())
    return out


def composite(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Subscale = SUBSCALE_DIM,
    kernels: str | None = None,
) -> xr.DataArray:
    """Composite-score PMF on the instrument's scale: exact convolution of the item PMFs.

    Instrument-aware by default (``score`` is always the construct's scale):
    items flagged by the item coordinate ``reverse_keyed`` are reflected first
    (``y -> y_min + y_max - y``; those whose ``reflected`` coordinate is already
    True are not reflected again), and when the items carry two or more
    subscales (item coordinate ``subscale``) the items of each subscale are
    composed separately, along a new dim ``subscale``. Instruments with one
    subscale, or no ``subscale``/``reverse_keyed`` coordinates, give the sum of
    all items. The paper's CETSCALE (17 items, none reverse-keyed, no
    subscales) is therefore unchanged: the sum of its 17 items on 17..119.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item, score)``; ``score_dim``
        holds consecutive integers ``y_min..y_max``. A results Dataset is read
        through its ``pmf`` variable. The decoding grid (``temperature``,
        ``top_p``) is carried along, so ``decoding_pmf`` works too.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect : keyword-only
        If False, compose the PMFs as given (no reflection).
    subscale : keyword-only
        The item coordinate that groups items into subscales (default
        ``"subscale"``), a per-item spec (str DataArray on ``item_dim``,
        sequence or mapping item id -> subscale), or None: one composite of
        all items. Items with subscale ``""`` are left out when there are
        subscales (listed in the attr ``items_without_subscale``).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"`` (the plain-numpy twin).

    Returns
    -------
    xr.DataArray
        ``(*factors, score_dim)`` on the integer coordinate
        ``K*y_min..K*y_max``, or with subscales ``(*factors, "subscale",
        score_dim)`` on the union of the subscale ranges, zero mass outside
        each subscale's own range (coords ``n_items``, ``score_min``,
        ``score_max`` on ``subscale``; see :mod:`xlikert.analysis.keying` for
        why one padded axis). Attrs kept, plus ``reflected_items`` (JSON list
        of the reflected item ids) when any was. Dask input stays lazy.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Negative/NaN mass, PMFs not summing to 1 (``validate.PMF_ATOL``), a
        malformed score axis, or an empty item dim.
    DesignError
        A factor with a name xlikert reserves (:mod:`xlikert.core.dims`), or a
        subscale spec that does not match the items.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2}, n_items=3, scale=(1, 5))
    >>> s = xl.composite(pmf)
    >>> s.sizes["score"], int(s.score[0]), int(s.score[-1])
    (13, 3, 15)
    >>> bool(abs(s.sum("score") - 1).max() < 1e-12)
    True
    >>> keyed = pmf.assign_coords(subscale=("item", ["E", "E", "A"]),
    ...                           reverse_keyed=("item", [False, True, False]))
    >>> c = xl.composite(keyed)
    >>> c.dims, c.n_items.values.tolist(), c.attrs["reflected_items"]
    (('model', 'subscale', 'score'), [2, 1], '["2"]')
    >>> xl.composite(keyed, reflect=False, subscale=None).identical(s)
    True
    """
    return _compose(
        pmf,
        item_dim=item_dim,
        score_dim=score_dim,
        reflect=reflect,
        subscale=subscale,
        kernels=kernels,
    )


def subscale_composites(
    pmf: xr.DataArray | xr.Dataset,
    subscale: xr.DataArray | Sequence[str] | Mapping[str, str] | None = None,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
) -> xr.DataArray:
    """One composite-score PMF per subscale, padded onto a common score axis.

    The same as :func:`xlikert.composite` (which does this by default when the
    items carry two or more subscales), except that the ``subscale`` dim is
    always there, even for a single subscale, and items without a subscale are
    an error when no item has one.

    Each subscale's composite is the exact distribution of the sum of its
    items (conditionally independent given the condition). A subscale of
    ``K_s`` items on ``y_min..y_max`` lives on ``K_s*y_min .. K_s*y_max``;
    subscales of different lengths are stacked on the union of these ranges
    with **zero mass outside each subscale's own range** (its support is in the
    ``score_min``/``score_max`` coordinates), so every row is still a PMF that
    sums to 1 and means, SDs and mixtures are unaffected by the padding. Select
    one subscale (``.sel(subscale="extraversion")``) and drop the zero tail with
    ``.sel(score=slice(score_min, score_max))`` if you need its own axis.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``.
    subscale : xr.DataArray, sequence of str or mapping of str to str, optional
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
    NominalItemError
        A nominal item (options without an order), naming it.
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
    return _compose(
        pmf,
        item_dim=item_dim,
        score_dim=score_dim,
        reflect=reflect,
        subscale=SUBSCALE_DIM if subscale is None else subscale,
        kernels=None,
        split_single=True,
    )
