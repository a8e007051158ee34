"""Construct layer: composite scores and the exact distributional ANOVA.

Everything here works on PMF DataArrays with named dims (paper appendix
"The Construct Layer"):

* :func:`composite` convolves item PMFs into composite-score PMFs
  ``S_lambda`` (eq. item-wise-convolution);
* :func:`grand_mixture` and :func:`marginal_slice` are uniform mixtures
  (``.mean(dim)``) over factors (eqs. grand-mixture, marginal-slice-U);
* :func:`comonotone_contrast` is the R-term shared-quantile contrast
  (Def. comonotone-contrast, eq. comonotone-contrast-pmf);
* :func:`decompose` builds the grand mixture and every main effect and
  interaction as a blocked comonotone Möbius contrast (eqs. main-effect-pmf,
  blocked-slice, interaction-block, interaction-global);
* :func:`contrast` and :func:`trend` are the pairwise blocked contrasts and the
  per-unit trend (appendix "Trend Effects");
* :func:`summarize` / :func:`summary_table` give E, SD, SNR, dPD.

Every function takes a PMF DataArray or a results Dataset (its ``pmf``)
first, then what it is about positionally (the factor of a contrast or trend,
the coefficients of a comonotone contrast); dimension arguments (``item_dim``,
``score_dim``, ``factors``, ...) and options are keyword-only, with the same
names and defaults across the package. Factors are read with
:func:`xlikert.dims.factor_dims`: a dim whose name xlikert reserves raises a
``DesignError`` naming it.

The hot loops live in :mod:`xlikert.kernels` (numba, with plain-numpy twins);
pass ``engine="numpy"`` to any function here to run the twins instead.
Dask-backed input stays lazy: the kernels run through
``xr.apply_ufunc(..., dask="parallelized")`` with the core dims (``item``,
``score``, blocks, terms) in one chunk and the design dims chunked freely.

Effect coordinate
-----------------
Every effect PMF lives on an integer coordinate ``effect`` (score units). For
in-memory input it is the tightest range of consecutive integers that holds
all nonzero mass of any cell of that term; for Dask input (where trimming
would force a compute) it is the full attainable range
``±(R/2)(s_max - s_min)`` with ``R = 2^|U|`` terms.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from . import kernels
from ._version import __version__
from .design.scoring import SUBSCALE_DIM, reflect_pending, subscale_coords, subscale_groups
from .dims import AUXILIARY_DIMS, CORE_DIMS, DECODING_DIMS, factor_dims
from .errors import DesignError, InputTypeError, InvalidPMFError, XlikertError
from .io import encode_attrs, read_attrs
from .validate import (
    as_pmf,
    check_fully_crossed,
    check_item_dim,
    check_levels,
    check_pmf,
    check_score_axis,
    is_lazy,
    squeeze_constant_factors,
)

__all__ = [
    "SCORING",
    "SNR_RTOL",
    "comonotone_contrast",
    "composite",
    "contrast",
    "decompose",
    "grand_mixture",
    "marginal_slice",
    "summarize",
    "summary_table",
    "trend",
]

#: An effect with ``SD <= SNR_RTOL * max|support|`` counts as deterministic (paper:
#: SNR = +inf if E != 0, 0 if E == 0); ``|E|`` below the same bound counts as 0. The
#: bound is relative, so SNR does not depend on the units of the support.
SNR_RTOL = 1e-9

#: How items are grouped into subscales: an item coordinate name, a per-item spec or None.
Subscale = Hashable | xr.DataArray | Sequence[str] | Mapping[str, str] | None

_TERM = "_term"
_BLOCK = "_block"
_GRID = "_grid"


# --------------------------------------------------------------------------- helpers
def _to_composite(
    pmf: xr.DataArray | xr.Dataset,
    item_dim: Hashable,
    score_dim: Hashable,
    engine: str | None,
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
            engine=engine,
        )
    return check_pmf(pmf, score_dim)


def _single_chunk(obj: xr.DataArray, dims: Iterable[Hashable]) -> xr.DataArray:
    if is_lazy(obj):
        return obj.chunk({d: -1 for d in dims if d in obj.dims})
    return obj


def _trim(out: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """Drop leading/trailing positions of ``dim`` that hold zero mass in every cell."""
    if is_lazy(out) or out.sizes[dim] == 0:
        return out
    other = [d for d in out.dims if d != dim]
    nonzero = np.asarray((out != 0).any(other).values) if other else np.asarray(out.values != 0)
    idx = np.flatnonzero(nonzero)
    if idx.size == 0:
        return out
    return out.isel({dim: slice(int(idx[0]), int(idx[-1]) + 1)})


def _blocked_contrast(
    stacked: xr.DataArray,
    alpha: Sequence[float],
    block_dims: Sequence[Hashable],
    score_dim: Hashable,
    effect_dim: Hashable,
    engine: str | None,
    trim: bool = True,
) -> xr.DataArray:
    """Comonotone contrast along ``_term``, mixed uniformly over ``block_dims``.

    ``stacked`` holds the R term PMFs along ``_term`` on the integer score axis
    ``score_dim``; ``alpha`` are integer-valued coefficients.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    y = check_score_axis(stacked, score_dim).astype(np.float64)
    pos, neg = alpha[alpha > 0].sum(), alpha[alpha < 0].sum()
    zlo = pos * y[0] + neg * y[-1]
    zhi = pos * y[-1] + neg * y[0]
    values = np.arange(round(float(zlo)), round(float(zhi)) + 1)
    grid = xr.DataArray(values.astype(np.float64), dims=_GRID)
    # Block dims split over several Dask chunks stay outside the kernel, so chunks
    # are never merged: the kernel mixes the blocks inside each chunk and ``.mean``
    # mixes the rest (every outer index holds the same number of inner blocks).
    outer = [d for d in block_dims if is_lazy(stacked) and len(stacked.chunksizes[d]) > 1]
    inner = [d for d in block_dims if d not in outer]
    x = stacked.stack({_BLOCK: inner}, create_index=False) if inner else stacked.expand_dims(_BLOCK)
    x = _single_chunk(x, [_BLOCK, _TERM, score_dim])
    support = xr.DataArray(y, dims=score_dim)
    coef = xr.DataArray(alpha, dims=_TERM)
    kernel = kernels.get_kernel("blocked_comonotone_contrast", engine)
    out = xr.apply_ufunc(
        kernel,
        x,
        support,
        coef,
        grid,
        input_core_dims=[[_BLOCK, _TERM, score_dim], [score_dim], [_TERM], [_GRID]],
        output_core_dims=[[_GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=False,
    )
    out = out.rename({_GRID: effect_dim}).assign_coords({effect_dim: values})
    if outer:
        out = out.mean(outer)
    # drop leftovers of stacked / vectorised-indexed coords along removed dims
    out = out.drop_vars([c for c in out.coords if c not in out.dims and _BLOCK in stacked[c].dims])
    return _trim(out, effect_dim) if trim else out


# --------------------------------------------------------------------------- composite
def _convolve(
    pmf: xr.DataArray, item_dim: Hashable, score_dim: Hashable, y: np.ndarray, engine: str | None
) -> xr.DataArray:
    """Exact convolution of all items along ``item_dim`` (the kernel call)."""
    k = pmf.sizes[item_dim]
    grid = xr.DataArray(np.zeros(k * (y.size - 1) + 1), dims=_GRID)
    data = _single_chunk(pmf.astype(np.float64, copy=False), [item_dim, score_dim])
    out = xr.apply_ufunc(
        kernels.get_kernel("convolve_items", engine),
        data,
        grid,
        input_core_dims=[[item_dim, score_dim], [_GRID]],
        output_core_dims=[[_GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=True,
    )
    return out.rename({_GRID: score_dim}).assign_coords(
        {score_dim: np.arange(k * int(y[0]), k * int(y[-1]) + 1)}
    )


def _compose(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable,
    score_dim: Hashable,
    reflect: bool,
    subscale: Subscale,
    engine: str | None,
    split_single: bool = False,
) -> xr.DataArray:
    """:func:`composite` and :func:`xlikert.design.subscale_composites` (``split_single``)."""
    pmf = as_pmf(pmf)
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
        out = _convolve(base, item_dim, score_dim, y, engine)
    else:
        n_items = [idx.size for _, idx in groups]
        grid = np.arange(min(n_items) * int(y[0]), max(n_items) * int(y[-1]) + 1)
        parts = [
            _convolve(base.isel({item_dim: idx}), item_dim, score_dim, y, engine).reindex(
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
    engine: str | None = None,
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
    pmf
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
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"`` (the plain-numpy twin).

    Returns
    -------
    xr.DataArray
        ``(*factors, score_dim)`` on the integer coordinate
        ``K*y_min..K*y_max``, or with subscales ``(*factors, "subscale",
        score_dim)`` on the union of the subscale ranges, zero mass outside
        each subscale's own range (coords ``n_items``, ``score_min``,
        ``score_max`` on ``subscale``; see :mod:`xlikert.design.scoring` for
        why one padded axis). Attrs kept, plus ``reflected_items`` (JSON list
        of the reflected item ids) when any was. Dask input stays lazy.

    Raises
    ------
    InvalidPMFError
        Negative/NaN mass, PMFs not summing to 1 (``validate.PMF_ATOL``), a
        malformed score axis, or an empty item dim.
    DesignError
        A factor with a name xlikert reserves (:mod:`xlikert.dims`), or a
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
        engine=engine,
    )


# --------------------------------------------------------------------------- mixtures
def grand_mixture(
    pmf: xr.DataArray | xr.Dataset,
    *,
    factors: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Grand mixture ``P_{S_0}``: uniform mixture over the factor dims (eq. grand-mixture).

    Works on composite PMFs ``(*factors, score)`` and on item PMFs (then per item).

    Parameters
    ----------
    pmf
        PMFs with factor dims, or a results Dataset (its ``pmf``).
    factors : keyword-only
        Dims to mix over; default every dim except ``item_dim`` and ``score_dim``.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Raises
    ------
    DesignError
        A factor that is not a dim, or a dim with a name xlikert reserves
        (:mod:`xlikert.dims`).

    Examples
    --------
    >>> import xlikert as xl
    >>> s = xl.composite(xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=2))
    >>> xl.grand_mixture(s).dims
    ('score',)
    """
    pmf = as_pmf(pmf)
    dims = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim)
    return pmf.mean(dims, keep_attrs=True)


def marginal_slice(
    pmf: xr.DataArray | xr.Dataset,
    dims: Hashable | Sequence[Hashable],
    *,
    factors: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Marginal slice ``P_{M_U(lambda_U)}``: uniform mixture over all other factors.

    Paper eq. marginal-slice-U (``dims`` = U).

    Parameters
    ----------
    pmf
        PMFs with factor dims, or a results Dataset (its ``pmf``).
    dims
        The factor(s) U to keep.
    factors : keyword-only
        The design's factors; default every dim except ``item_dim`` and ``score_dim``.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Examples
    --------
    >>> import xlikert as xl
    >>> s = xl.composite(xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=2))
    >>> xl.marginal_slice(s, "target").dims
    ('target', 'score')
    """
    pmf = as_pmf(pmf)
    keep = factor_dims(pmf, dims, item_dim=item_dim, score_dim=score_dim)
    allf = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim)
    for d in keep:
        if d not in allf:
            raise DesignError(f"{d!r} is not one of the factors {allf}")
    return pmf.mean([d for d in allf if d not in keep], keep_attrs=True)


# --------------------------------------------------------------------------- contrasts
def comonotone_contrast(
    pmf: xr.DataArray | xr.Dataset,
    alpha: Sequence[float],
    *,
    term_dim: Hashable = "term",
    score_dim: Hashable = "score",
    block_dims: Sequence[Hashable] = (),
    effect_dim: Hashable = "effect",
    engine: str | None = None,
) -> xr.DataArray:
    """PMF of the comonotone contrast ``sum_r alpha_r F_r^{-1}(U)``.

    Paper Def. comonotone-contrast, eq. comonotone-contrast-pmf: the ``R``
    PMFs along ``term_dim`` share one quantile ``U``; the result is exact.
    With ``block_dims`` the contrast is formed within every block (cell of
    ``block_dims``) and the block PMFs are mixed uniformly (eq. interaction-global).

    Parameters
    ----------
    pmf
        PMFs with a ``term_dim`` of length R, on an integer ``score_dim`` (or
        a Dataset: its ``pmf``). Other dims are carried along.
    alpha
        R integer-valued coefficients, so that the result lives on integers.
    term_dim, score_dim, block_dims, effect_dim : keyword-only
        Dimension names; the output replaces ``term_dim``, ``score_dim`` and
        ``block_dims`` by ``effect_dim`` (tightest integer range with mass).
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Raises
    ------
    XlikertError
        No ``term_dim``, or ``alpha`` not R integers.
    DesignError
        A block dim that is not a dim, ``effect_dim`` already a dim of ``pmf``,
        or another dim with a name xlikert reserves (:mod:`xlikert.dims`).

    Examples
    --------
    >>> import numpy as np, xarray as xr, xlikert as xl
    >>> p = xr.DataArray([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]], dims=("term", "score"),
    ...                  coords={"score": [1, 2, 3]})
    >>> xl.comonotone_contrast(p, [1, -1]).to_series().to_dict()   # paired difference
    {-1: 1.0}
    """
    pmf = as_pmf(pmf)
    if term_dim not in pmf.dims:
        raise XlikertError(f"PMF has no term dimension {term_dim!r}; dims are {tuple(pmf.dims)}")
    if effect_dim in pmf.dims and effect_dim not in (term_dim, score_dim):
        raise DesignError(
            f"effect_dim {effect_dim!r} is already a dimension of the PMF {tuple(pmf.dims)}; "
            "pass another effect_dim=..."
        )
    factor_dims(pmf, item_dim=term_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    alpha = np.asarray(alpha, dtype=np.float64).ravel()
    if alpha.size != pmf.sizes[term_dim]:
        raise XlikertError(
            f"alpha has {alpha.size} coefficients but {term_dim!r} has {pmf.sizes[term_dim]} terms"
        )
    if not np.all(np.isfinite(alpha)) or not np.all(alpha == np.round(alpha)):
        raise XlikertError(f"alpha must hold integers (the output grid is integer), got {alpha}")
    pmf = check_pmf(pmf, score_dim)
    for d in block_dims:
        if d not in pmf.dims:
            raise DesignError(f"block dim {d!r} is not a dimension; dims are {tuple(pmf.dims)}")
    x = pmf.rename({term_dim: _TERM})
    return _blocked_contrast(x, alpha, list(block_dims), score_dim, effect_dim, engine)


def _mobius_terms(
    s: xr.DataArray, subset: Sequence[Hashable], cache: dict[frozenset, xr.DataArray]
) -> tuple[xr.DataArray, list[int]]:
    """Stack the blocked slices ``M_{V|lambda_-U}`` for all ``V ⊆ U`` along ``_term``."""
    terms, alpha = [], []
    u = len(subset)
    for k in range(u + 1):
        for v in combinations(subset, k):
            avg = frozenset(d for d in subset if d not in v)
            if avg not in cache:
                cache[avg] = s.mean([d for d in s.dims if d in avg]) if avg else s
            terms.append(cache[avg])
            alpha.append((-1) ** (u - k))
    # broadcast at the Variable level (no alignment: all terms share s's coords)
    sizes = dict(s.sizes)
    variables = [t.variable.set_dims(sizes).transpose(*s.dims) for t in terms]
    stacked = xr.DataArray(xr.Variable.concat(variables, dim=_TERM), coords=s.coords)
    return stacked, alpha


def decompose(
    pmf: xr.DataArray | xr.Dataset,
    *,
    factors: Hashable | Sequence[Hashable] | None = None,
    max_order: int | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Subscale = SUBSCALE_DIM,
    engine: str | None = None,
    progress: bool | None = None,
) -> xr.DataTree:
    """Exact distributional ANOVA: grand mixture, main effects and interactions.

    For every non-empty factor subset ``U`` (``|U| <= max_order``) and level
    vector ``lambda_U``, the effect PMF is the uniform mixture over blocks
    ``lambda_-U`` of the comonotone Möbius contrast
    ``sum_{V ⊆ U} (-1)^{|U|-|V|} M_{V|lambda_-U}(lambda_V)`` (paper eqs.
    blocked-slice, interaction-block, interaction-global; ``|U| = 1`` is the
    main effect of eq. main-effect-pmf). Its mean is the classical
    ANOVA/Hoeffding component ``mu_U(lambda_U)`` of the mean surface.

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)`` (composed first by
        :func:`composite`: reverse-keyed items reflected, one composite per
        subscale) or composite PMFs ``(*factors, [subscale], score)``, or a
        results Dataset (its ``pmf``).
    factors : keyword-only
        Factor dims; default every dim except ``item_dim``, ``score_dim`` and
        ``subscale``. Other dims (``subscale`` among them) are carried along as
        batch dims: every effect is computed per subscale, never across them.
    max_order : keyword-only
        Highest interaction order; default all (``len(factors)``).
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect, subscale : keyword-only
        How item PMFs are composed (:func:`composite`): ``reflect=False`` keeps
        reverse-keyed items as answered, ``subscale=None`` sums all items.
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.
    progress : keyword-only
        Show a tqdm bar over the subsets; default: only for large designs.

    Returns
    -------
    xr.DataTree
        Child ``grand`` with ``pmf`` (``score``), ``E``, ``SD``; one child per
        subset named ``"a:b"`` (factor names in dim order) with ``pmf``
        (``*U, effect``), ``E``, ``SD``, ``SNR``, ``dPD`` (``*U``); with
        subscales every node has the batch dim ``subscale`` (and its
        ``n_items`` coordinate). Root attrs keep the composite's attrs plus
        provenance (``xlikert_version``, ``decompose_factors``,
        ``decompose_constant_factors``, ``decompose_max_order``,
        ``decompose_n_items``), as netCDF holds them (structure as JSON text:
        :func:`xlikert.io.read_attrs` decodes it), so ``dec.to_netcdf`` works as
        it stands. E and SD are in composite-score units (sums of items);
        ``summary_table(dec, scoring="mean")`` gives them per item.

    Raises
    ------
    DesignError
        Missing cells, a factor with no level, bad ``max_order``,
        a dim with a name xlikert reserves (:mod:`xlikert.dims`; e.g. a
        decoding grid: select one setting first).
    InvalidPMFError
        Invalid PMFs.

    Notes
    -----
    A factor with one level is held constant: it has no effect to estimate, so
    it is squeezed to a scalar coordinate and named with its level in
    ``decompose_constant_factors``. With no factor that varies the tree holds
    the grand mixture alone.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 3, "target": 2}, n_items=4)
    >>> dec = xl.decompose(pmf)
    >>> sorted(dec.children)
    ['grand', 'model', 'model:target', 'target']
    >>> dec["model:target"].E.dims
    ('model', 'target')
    >>> float(abs(dec["model"].E.sum("model")))  < 1e-9
    True
    """
    pmf = as_pmf(pmf)
    s = _to_composite(pmf, item_dim, score_dim, engine, reflect, subscale)
    fac = factor_dims(s, factors, item_dim=item_dim, score_dim=score_dim, auxiliary=[SUBSCALE_DIM])
    order = len(fac) if max_order is None else int(max_order)
    if fac and not 1 <= order <= len(fac):
        raise DesignError(f"max_order must be between 1 and {len(fac)}, got {max_order!r}")
    check_fully_crossed(s, fac, score_dim)
    s, fac, constant = squeeze_constant_factors(s, fac)
    order = min(order, len(fac))
    batch = [d for d in s.dims if d not in fac and d != score_dim]
    s = s.transpose(*fac, *batch, score_dim)

    subsets = [u for k in range(1, order + 1) for u in combinations(fac, k)]
    n_cells = math.prod(s.sizes[d] for d in fac)
    if progress is None:
        progress = n_cells * s.sizes[score_dim] * len(subsets) > 5e6
    from tqdm.auto import tqdm

    grand = s.mean(fac)
    g = summarize(grand, dim=score_dim)
    nodes: dict[str, xr.Dataset] = {
        "grand": xr.Dataset(
            {"pmf": grand.variable, "E": g["E"], "SD": g["SD"]}, coords=grand.coords
        )
    }
    cache: dict[frozenset, xr.DataArray] = {}
    for u in tqdm(subsets, desc="decompose", disable=not progress):
        stacked, alpha = _mobius_terms(s, u, cache)
        block = [d for d in fac if d not in u]
        eff = _blocked_contrast(stacked, alpha, block, score_dim, "effect", engine)
        eff = eff.transpose(*u, *batch, "effect")
        ds = summarize(eff, dim="effect")
        ds["pmf"] = eff
        nodes[":".join(map(str, u))] = ds[["pmf", "E", "SD", "SNR", "dPD"]]
    attrs = dict(s.attrs)
    attrs.update(
        xlikert_version=__version__,
        decompose_factors=[str(f) for f in fac],
        decompose_constant_factors=constant,
        decompose_max_order=order,
        decompose_score_dim=str(score_dim),
    )
    if item_dim in pmf.dims:
        attrs["decompose_n_items"] = int(pmf.sizes[item_dim])
    tree = xr.DataTree.from_dict(nodes, name=None)
    tree.attrs = encode_attrs(attrs)  # netCDF-ready: tree.to_netcdf works as it stands
    return tree


def contrast(
    pmf: xr.DataArray | xr.Dataset,
    dim: Hashable,
    a: Any = None,
    b: Any = None,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Subscale = SUBSCALE_DIM,
    engine: str | None = None,
) -> xr.DataArray:
    """Blocked paired contrast ``S(a, lambda_-c) ⊖ S(b, lambda_-c)``, mixed over blocks.

    The paper's pairwise country-contrast table (appendix tab:country-contrasts):
    within every block ``lambda_-c`` of the other dims, the comonotone paired
    difference of level ``a`` and level ``b`` of ``dim``; the block PMFs are
    mixed uniformly. Its mean is the difference of the two marginal means.

    Parameters
    ----------
    pmf
        Item PMFs (composed first) or composite PMFs, or a results Dataset
        (its ``pmf``).
    dim
        The factor to contrast.
    a, b
        Two levels of ``dim``. Both omitted: every pair ``i < j`` (in level
        order) along a new dim ``pair`` labelled like ``"USA − China"``.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect, subscale : keyword-only
        How item PMFs are composed (:func:`composite`); a ``subscale`` dim is
        carried along (one contrast per subscale), never mixed over.
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        PMF over the integer coordinate ``effect`` (plus ``pair``); use
        :func:`summarize` for E, SD, SNR, dPD.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": ["USA", "China", "France"]},
    ...                                 n_items=3)
    >>> c = xl.contrast(pmf, "target")
    >>> c.pair.values.tolist()
    ['USA − China', 'USA − France', 'China − France']
    >>> xl.summarize(c).E.dims
    ('pair',)
    """
    s = _to_composite(pmf, item_dim, score_dim, engine, reflect, subscale)
    factor_dims(s, dim, item_dim=item_dim, score_dim=score_dim, auxiliary=[SUBSCALE_DIM])
    check_levels(s, [dim], min_levels=2)
    others = [d for d in s.dims if d not in (dim, score_dim, SUBSCALE_DIM)]
    check_fully_crossed(s, [d for d in s.dims if d != score_dim], score_dim)
    labels = s[dim].values.tolist() if dim in s.coords else list(range(s.sizes[dim]))
    if (a is None) != (b is None):
        raise XlikertError("give both levels a and b, or neither (for all pairs)")
    if a is not None:
        for lev in (a, b):
            if lev not in labels:
                raise DesignError(f"level {lev!r} is not in {dim!r}; levels are {labels}")
        if a == b:
            raise DesignError(f"contrast of level {a!r} with itself")
        ia, ib = labels.index(a), labels.index(b)
        terms = s.isel({dim: [ia, ib]}).rename({dim: _TERM}).drop_vars(_TERM, errors="ignore")
        out = _blocked_contrast(terms, [1, -1], others, score_dim, "effect", engine)
        out.attrs = {"contrast": f"{a} − {b}", "dim": str(dim)}
        out.name = "pmf"
        return out
    pairs = list(combinations(range(len(labels)), 2))
    ia = xr.DataArray([p[0] for p in pairs], dims="pair")
    ib = xr.DataArray([p[1] for p in pairs], dims="pair")
    terms = xr.concat(
        [s.isel({dim: ia}).drop_vars(dim), s.isel({dim: ib}).drop_vars(dim)],
        dim=_TERM,
    ).transpose("pair", *others, ..., _TERM, score_dim)
    out = _blocked_contrast(terms, [1, -1], others, score_dim, "effect", engine)
    out = out.assign_coords(pair=[f"{labels[i]} − {labels[j]}" for i, j in pairs])
    out.attrs = {"dim": str(dim)}
    out.name = "pmf"
    return out


def _trend_values(s: xr.DataArray, dim: Hashable, values: Any) -> np.ndarray:
    if values is None:
        if dim in s.coords and np.issubdtype(s[dim].dtype, np.number):
            v = s[dim].values
        else:
            cands = [
                c
                for c in s.coords
                if c != dim and s[c].dims == (dim,) and np.issubdtype(s[c].dtype, np.number)
            ]
            if len(cands) != 1:
                raise DesignError(
                    f"factor {dim!r} has no numeric coordinate to order it by "
                    f"(numeric coords along it: {cands}); pass values=<coord name or numbers>"
                )
            v = s[cands[0]].values
    elif isinstance(values, str):
        if values not in s.coords or s[values].dims != (dim,):
            raise DesignError(f"values={values!r} is not a 1-D coordinate along {dim!r}")
        v = s[values].values
    else:
        v = np.asarray(values)
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (s.sizes[dim],):
        raise DesignError(f"need one value per level of {dim!r} ({s.sizes[dim]}), got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise DesignError(f"trend values of {dim!r} must be finite, got {v.tolist()}")
    if np.unique(v).size != v.size:
        raise DesignError(f"trend values of {dim!r} must be distinct, got {v.tolist()}")
    return v


def _scatter_trend(d: np.ndarray, inv: np.ndarray, weights: np.ndarray, n_out: int) -> np.ndarray:
    """Mix local-difference PMFs ``d`` (..., step, effect) onto the slope grid."""
    batch = d.shape[:-2]
    flat = (d * weights[:, None]).reshape(-1, inv.size)
    out = np.zeros((flat.shape[0], n_out))
    for row in range(flat.shape[0]):
        out[row] = np.bincount(inv, weights=flat[row], minlength=n_out)
    return out.reshape(*batch, n_out)


def trend(
    pmf: xr.DataArray | xr.Dataset,
    dim: Hashable,
    values: Any = None,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Subscale = SUBSCALE_DIM,
    engine: str | None = None,
) -> xr.DataArray:
    """Per-unit trend ``gamma_c`` over an ordered numeric factor (appendix "Trend Effects").

    Levels are sorted by their numeric values ``v_1 < ... < v_L`` (uneven spacing
    allowed). For each adjacent pair the paired local difference
    ``S(v_{l+1}, lambda_-c) ⊖ S(v_l, lambda_-c)`` is mixed over blocks
    (eqs. local-diff-block, local-diff), rescaled by ``1/delta_l``
    (eq. scaled-local-contrast) and the local slopes are mixed with weights
    ``delta_l / (v_L - v_1)`` (eq. trend-mixture). ``E[gamma_c]`` is the secant
    slope of the marginal means (Prop. trend-expectation).

    Parameters
    ----------
    pmf
        Item PMFs (composed first) or composite PMFs, or a results Dataset
        (its ``pmf``).
    dim
        The ordered factor.
    values
        Numbers per level, or the name of a numeric coordinate along ``dim``.
        Default: ``dim``'s own coordinate if numeric, else the only numeric
        non-index coordinate along it (e.g. ``model_size``).
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect, subscale : keyword-only
        How item PMFs are composed (:func:`composite`); a ``subscale`` dim is
        carried along (one trend per subscale), never mixed over.
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        PMF on the float coordinate ``slope`` (support points ``z / delta_l``;
        equal floating-point values are merged exactly).

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 3, "target": 2}, n_items=3)
    >>> pmf = pmf.assign_coords(model_size=("model", [1.0, 4.0, 12.0]))
    >>> g = xl.trend(pmf, "model")
    >>> g.dims, bool(abs(g.sum() - 1) < 1e-12)
    (('slope',), True)
    """
    s = _to_composite(pmf, item_dim, score_dim, engine, reflect, subscale)
    factor_dims(s, dim, item_dim=item_dim, score_dim=score_dim, auxiliary=[SUBSCALE_DIM])
    check_levels(s, [dim], min_levels=2)
    v = _trend_values(s, dim, values)
    order = np.argsort(v, kind="stable")
    v = v[order]
    delta = np.diff(v)
    weights = delta / (v[-1] - v[0])
    others = [d for d in s.dims if d not in (dim, score_dim, SUBSCALE_DIM)]
    check_fully_crossed(s, [d for d in s.dims if d != score_dim], score_dim)
    s = s.drop_vars([c for c in s.coords if dim in s[c].dims])
    hi = xr.DataArray(order[1:], dims="_step")
    lo = xr.DataArray(order[:-1], dims="_step")
    terms = xr.concat([s.isel({dim: hi}), s.isel({dim: lo})], dim=_TERM).transpose(
        "_step", *others, ..., _TERM, score_dim
    )
    d = _blocked_contrast(terms, [1, -1], others, score_dim, "effect", engine, trim=False)
    d = _single_chunk(d, ["_step", "effect"])  # the scatter mixes every step
    z = d["effect"].values.astype(np.float64)
    slopes = z[None, :] / delta[:, None]
    support, inv = np.unique(slopes.ravel(), return_inverse=True)
    out = xr.apply_ufunc(
        _scatter_trend,
        d.drop_vars("effect"),
        kwargs={"inv": inv.ravel(), "weights": weights, "n_out": support.size},
        input_core_dims=[["_step", "effect"]],
        output_core_dims=[["slope"]],
        dask="parallelized",
        output_dtypes=[np.float64],
        dask_gufunc_kwargs={"output_sizes": {"slope": support.size}},
    )
    out = _trim(out.assign_coords(slope=support), "slope")
    out.attrs = {"dim": str(dim), "values": v.tolist()}
    out.name = "pmf"
    return out


# --------------------------------------------------------------------------- summaries
def _summary_numpy(
    p: np.ndarray, z: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """E, SD, SNR, dPD of PMFs ``p`` (..., n) on support ``z`` (n)."""
    p = np.asarray(p, dtype=np.float64)
    mean = p @ z
    var = np.einsum("...n,...n->...", p, (z - mean[..., None]) ** 2)
    sd = np.sqrt(np.clip(var, 0.0, None))
    det = sd <= tol
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = np.where(det, np.where(np.abs(mean) > tol, np.inf, 0.0), np.abs(mean) / sd)
    dpd = np.maximum(p[..., z > 0].sum(-1), p[..., z < 0].sum(-1))
    return mean, sd, snr, dpd


def summarize(x: xr.DataArray | xr.Dataset, *, dim: Hashable = "effect") -> xr.Dataset:
    """E, SD, SNR and dPD of PMFs along ``dim`` (paper eqs. effect-size, sd-effect, snr, dpd).

    ``SNR = |E| / SD``; where ``SD <= SNR_RTOL * max|z|`` the effect is
    deterministic and SNR is ``+inf`` if ``|E|`` exceeds the same bound, else 0.
    ``dPD = max(P(Z > 0), P(Z < 0))``.

    Parameters
    ----------
    x
        PMFs along ``dim`` with a numeric coordinate (``effect``, ``score``,
        ``slope``, ...), or a Dataset with such a ``pmf`` (a decomposition node).
        Other dims are carried along.
    dim : keyword-only
        The support dim.

    Raises
    ------
    InvalidPMFError
        ``dim`` missing or without a numeric coordinate.
    DesignError
        Another dim named like one of xlikert's variables (``E``, ``SD``, ...;
        :mod:`xlikert.dims`), which the output would overwrite.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.99, 0.01], dims="effect", coords={"effect": [1, 100]})
    >>> s = xl.summarize(p)
    >>> round(float(s.E), 2), round(float(s.SD), 2), round(float(s.SNR), 2), float(s.dPD)
    (1.99, 9.85, 0.2, 1.0)
    """
    p = as_pmf(x)
    if dim not in p.dims:
        raise InvalidPMFError(f"PMF has no dimension {dim!r}; its dims are {tuple(p.dims)}")
    factor_dims(p, item_dim=None, score_dim=dim, auxiliary=[*CORE_DIMS, *AUXILIARY_DIMS])
    if dim not in p.coords or not np.issubdtype(p[dim].dtype, np.number):
        raise InvalidPMFError(f"dimension {dim!r} needs a numeric coordinate (the support values)")
    z = np.asarray(p[dim].values, dtype=np.float64)
    tol = SNR_RTOL * float(np.max(np.abs(z))) if z.size else 0.0
    outs = xr.apply_ufunc(
        _summary_numpy,
        p,
        kwargs={"z": z, "tol": tol},
        input_core_dims=[[dim]],
        output_core_dims=[[], [], [], []],
        dask="parallelized",
        output_dtypes=[np.float64] * 4,
        keep_attrs=False,
    )
    ds = xr.Dataset(dict(zip(["E", "SD", "SNR", "dPD"], outs, strict=True)))
    ds["E"].attrs = {"long_name": "expected effect", "formula": "sum_z z P(z)"}
    ds["SD"].attrs = {"long_name": "predictive standard deviation"}
    ds["SNR"].attrs = {
        "long_name": "signal-to-noise ratio |E|/SD",
        "convention": f"SD <= {SNR_RTOL:g}*max|z|: +inf if E != 0 else 0",
    }
    ds["dPD"].attrs = {"long_name": "discrete probability of direction max(P(>0), P(<0))"}
    return ds


#: Conventions of :func:`summary_table`'s ``scoring`` (also its ``attrs["scoring"]``).
SCORING = {
    "sum": "E and SD in composite-score units: the sum of the items (of each subscale), "
    "reverse-keyed items reflected",
    "mean": "E and SD in mean-item units: the composite (sum of the items of each subscale, "
    "reverse-keyed items reflected) divided by its number of items",
}
SCORING["both"] = SCORING["sum"] + "; E_item and SD_item: the same divided by the number of items"


def _item_count(ds: xr.Dataset, dec: xr.DataTree) -> xr.DataArray | int:
    """Items behind each composite of a decomposition node: ``n_items`` per subscale, else all."""
    if "n_items" in ds.coords:
        return ds["n_items"]
    k = dec.attrs.get("decompose_n_items")
    if k is None:
        raise DesignError(
            "the decomposition was made from composite PMFs without an 'n_items' coordinate, "
            "so its item count is unknown: decompose the item PMFs for scoring='mean'"
        )
    return int(k)


def summary_table(dec: xr.DataTree, *, scoring: str = "sum") -> pd.DataFrame:
    """Tidy table of a :func:`decompose` tree: columns term, level, E, SD, SNR, dPD.

    The grand mean row comes first (``term="grand"``, ``level="grand mean"``),
    then every effect in tree order; multi-factor levels are joined with
    ``" × "`` (e.g. ``"Aya-32B × China"``). Batch dims, if any, become extra
    columns (``subscale`` for an instrument with subscales: every row is the
    effect on one subscale). ``attrs["constant_factors"]`` names the factors
    :func:`decompose` held constant (one level) with their level.

    Parameters
    ----------
    dec
        The tree of :func:`decompose`.
    scoring : keyword-only
        ``"sum"`` (default): E and SD in composite-score units (sums of items,
        the units of the effect PMFs); ``"mean"``: in mean-item units (divided
        by the number of items of the composite, per subscale: the convention
        of instruments scored by item means, e.g. the Big Five); ``"both"``:
        the sums plus columns ``E_item`` and ``SD_item``. SNR and dPD do not
        depend on the units. The convention is in ``attrs["scoring"]``.

    Examples
    --------
    >>> import xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=2))
    >>> xl.summary_table(dec).columns.tolist()
    ['term', 'level', 'E', 'SD', 'SNR', 'dPD']
    >>> xl.summary_table(dec).term.unique().tolist()
    ['grand', 'model', 'target', 'model:target']
    >>> t = xl.summary_table(dec, scoring="both")
    >>> bool((t.E_item == t.E / 2).all()), t.attrs["scoring"].startswith("E and SD in composite")
    (True, True)
    """
    if scoring not in SCORING:
        raise XlikertError(f"scoring must be one of {sorted(SCORING)}, got {scoring!r}")
    table = _summary_rows(dec)
    if scoring != "sum":
        per_item = _summary_rows(dec, per_item=True)
        if scoring == "mean":
            table[["E", "SD"]] = per_item[["E", "SD"]]
        else:
            table.insert(table.columns.get_loc("dPD") + 1, "E_item", per_item["E"])
            table.insert(table.columns.get_loc("E_item") + 1, "SD_item", per_item["SD"])
    table.attrs["scoring"] = SCORING[scoring]
    return table


def _summary_rows(dec: xr.DataTree, per_item: bool = False) -> pd.DataFrame:
    """The rows of :func:`summary_table`; with ``per_item`` E and SD divided by the item count."""
    if not isinstance(dec, xr.DataTree):
        raise InputTypeError(f"expected the DataTree of xl.decompose, got {type(dec).__name__}")
    cols = ["E", "SD", "SNR", "dPD"]

    def node(name: str) -> xr.Dataset:
        ds = dec[name].to_dataset()
        if per_item:
            k = _item_count(ds, dec)
            ds = ds.assign(E=ds["E"] / k, SD=ds["SD"] / k)
        return ds.reset_coords(drop=True)

    g = node("grand")
    if g["E"].ndim:
        gdf = g[["E", "SD"]].to_dataframe().reset_index()
    else:
        gdf = pd.DataFrame({"E": [float(g["E"])], "SD": [float(g["SD"])]})
    gdf.insert(0, "level", "grand mean")
    gdf.insert(0, "term", "grand")
    gdf["SNR"] = np.nan
    gdf["dPD"] = np.nan
    frames = [gdf]
    for name in dec.children:
        if name == "grand":
            continue
        ds = node(str(name))
        factors = str(name).split(":")
        batch = [d for d in ds["E"].dims if d not in factors]
        e = ds["E"].transpose(*factors, *batch)
        shape = e.shape
        labels = [np.asarray(ds[f].values).astype(str) for f in factors]
        grids = np.meshgrid(*labels, *[np.arange(ds.sizes[b]) for b in batch], indexing="ij")
        level = grids[0].ravel()
        for lab in grids[1 : len(factors)]:
            level = np.char.add(np.char.add(level, " × "), lab.ravel())
        data = {"term": np.full(level.size, str(name), dtype=object), "level": level.astype(object)}
        for c in cols:
            data[c] = ds[c].transpose(*factors, *batch).values.reshape(-1)
        for b, grid in zip(batch, grids[len(factors) :], strict=True):
            data[b] = np.asarray(ds[b].values)[grid.ravel()] if b in ds.coords else grid.ravel()
        frames.append(pd.DataFrame(data, index=pd.RangeIndex(int(np.prod(shape)))))
    out = pd.concat(frames, ignore_index=True)
    extra = [c for c in out.columns if c not in ["term", "level", *cols]]
    out = out[["term", "level", *cols, *extra]]
    out.attrs["constant_factors"] = read_attrs(dec).get("decompose_constant_factors") or {}
    return out
