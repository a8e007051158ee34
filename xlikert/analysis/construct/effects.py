"""The distributional ANOVA: comonotone contrasts, the Möbius decomposition, contrasts.

* :func:`comonotone_contrast` is the R-term shared-quantile contrast
  (:ref:`eq-comonotone-contrast-pmf`);
* :func:`decompose` builds the grand mixture and every main effect and
  interaction as a blocked comonotone Möbius contrast (:ref:`eq-main-effect-pmf`,
  :ref:`eq-interaction-global`);
* :func:`contrast` is the pairwise blocked contrast of two levels.

Effect coordinate
-----------------
Every effect PMF lives on an integer coordinate ``effect`` (score units). For
in-memory input it is the tightest range of consecutive integers that holds
all nonzero mass of any cell of that term; for Dask input (where trimming
would force a compute) it is the full attainable range
``±(R/2)(s_max - s_min)`` with ``R = 2^|U|`` terms.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import xarray as xr

from ..._version import __version__
from ...core.dims import DECODING_DIMS, SUBSCALE_DIM, factor_dims
from ...core.errors import DesignError, XlikertError
from ...core.io import encode_attrs
from ...core.validate import (
    as_pmf,
    check_fully_crossed,
    check_levels,
    check_pmf,
    check_score_axis,
    is_lazy,
    single_chunk,
    squeeze_constant_factors,
)
from ...kernels import get_kernel
from ..keying import Subscale
from ..support import require_ordinal
from .composite import to_composite
from .summary import summarize

__all__ = ["blocked_contrast", "comonotone_contrast", "contrast", "decompose", "trim_support"]

_TERM = "_term"
_BLOCK = "_block"
_GRID = "_grid"


def trim_support(out: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """Drop leading/trailing positions of ``dim`` that hold zero mass in every cell."""
    if is_lazy(out) or out.sizes[dim] == 0:
        return out
    other = [d for d in out.dims if d != dim]
    nonzero = np.asarray((out != 0).any(other).values) if other else np.asarray(out.values != 0)
    idx = np.flatnonzero(nonzero)
    if idx.size == 0:
        return out
    return out.isel({dim: slice(int(idx[0]), int(idx[-1]) + 1)})


def blocked_contrast(
    stacked: xr.DataArray,
    alpha: np.ndarray | Sequence[float],
    block_dims: Sequence[Hashable],
    score_dim: Hashable,
    effect_dim: Hashable,
    kernels: str | None,
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
    x = single_chunk(x, [_BLOCK, _TERM, score_dim])
    support = xr.DataArray(y, dims=[score_dim])
    coef = xr.DataArray(alpha, dims=_TERM)
    kernel = get_kernel("blocked_comonotone_contrast", kernels)
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
    return trim_support(out, effect_dim) if trim else out


def comonotone_contrast(
    pmf: xr.DataArray | xr.Dataset,
    alpha: np.ndarray | Sequence[float],
    *,
    dim: Hashable | Sequence[Hashable] = (),
    term_dim: Hashable = "term",
    score_dim: Hashable = "score",
    effect_dim: Hashable = "effect",
    kernels: str | None = None,
) -> xr.DataArray:
    """PMF of the comonotone contrast ``sum_r alpha_r F_r^{-1}(U)``.

    The paper's comonotone-coupled linear contrast (:ref:`eq-comonotone-contrast-pmf`):
    the ``R`` PMFs along ``term_dim`` share one quantile ``U``; the result is exact.
    With ``dim`` the contrast is formed within every block (cell of the dims
    ``dim``) and the block PMFs are mixed uniformly over them
    (:ref:`eq-interaction-global`).

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        PMFs with a ``term_dim`` of length R, on an integer ``score_dim`` (or
        a Dataset: its ``pmf``). Other dims are carried along.
    alpha : sequence of float
        R integer-valued coefficients, so that the result lives on integers.
    dim : keyword-only
        The block dims, mixed over;
        default none. Other dims are carried along.
    term_dim, score_dim, effect_dim : keyword-only
        Core dims; the output replaces ``term_dim``, ``score_dim`` and the
        dims of ``dim`` by ``effect_dim`` (tightest integer range with mass).
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        The contrast's PMF on the integer coordinate ``effect_dim``, with the
        other dims of ``pmf`` carried along; attrs kept.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    XlikertError
        No ``term_dim``, or ``alpha`` not R integers.
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a score axis that is not
        consecutive integers.
    DesignError
        A block dim that is not a dim, ``effect_dim`` already a dim of ``pmf``,
        or another dim with a name xlikert reserves (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import numpy as np, xarray as xr, xlikert as xl
    >>> p = xr.DataArray([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]], dims=("term", "score"),
    ...                  coords={"score": [1, 2, 3]})
    >>> xl.comonotone_contrast(p, [1, -1]).to_series().to_dict()   # paired difference
    {-1: 1.0}
    """
    pmf = as_pmf(pmf)
    require_ordinal(pmf, "comonotone_contrast")
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
    blocks = list(dim) if isinstance(dim, Sequence) and not isinstance(dim, str) else [dim]
    for d in blocks:
        if d not in pmf.dims:
            raise DesignError(f"block dim {d!r} is not a dimension; dims are {tuple(pmf.dims)}")
    x = pmf.rename({term_dim: _TERM})
    return blocked_contrast(x, alpha, blocks, score_dim, effect_dim, kernels)


def _mobius_terms(
    s: xr.DataArray, subset: Sequence[Hashable], cache: dict[frozenset[Hashable], xr.DataArray]
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
    variables = [
        t.variable.set_dims(sizes).transpose(*s.dims)  # type: ignore[no-untyped-call]
        for t in terms
    ]
    stacked = xr.DataArray(
        xr.Variable.concat(variables, dim=_TERM),  # type: ignore[no-untyped-call]
        coords=s.coords,
    )
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
    kernels: str | None = None,
    progress: bool | None = None,
) -> xr.DataTree:
    """Exact distributional ANOVA: grand mixture, main effects and interactions.

    For every non-empty factor subset ``U`` (``|U| <= max_order``) and level
    vector ``lambda_U``, the effect PMF is the uniform mixture over blocks
    ``lambda_-U`` of the comonotone Möbius contrast
    ``sum_{V ⊆ U} (-1)^{|U|-|V|} M_{V|lambda_-U}(lambda_V)``
    (:ref:`eq-interaction-global`; ``|U| = 1`` is the main effect,
    :ref:`eq-main-effect-pmf`). Its mean is the classical
    ANOVA/Hoeffding component ``mu_U(lambda_U)`` of the mean surface.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
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
    kernels : keyword-only
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
        :func:`xlikert.core.io.read_attrs` decodes it), so ``dec.to_netcdf`` works as
        it stands. E and SD are in composite-score units (sums of items);
        ``summary_table(dec, scoring="mean")`` gives them per item.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    DesignError
        Missing cells, a factor with no level, bad ``max_order``,
        a dim with a name xlikert reserves (:mod:`xlikert.core.dims`; e.g. a
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
    require_ordinal(pmf, "decompose", item_dim=item_dim)
    s = to_composite(pmf, item_dim, score_dim, kernels, reflect, subscale)
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
    cache: dict[frozenset[Hashable], xr.DataArray] = {}
    for u in tqdm(subsets, desc="decompose", disable=not progress):
        stacked, alpha = _mobius_terms(s, u, cache)
        block = [d for d in fac if d not in u]
        eff = blocked_contrast(stacked, alpha, block, score_dim, "effect", kernels)
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
    kernels: str | None = None,
) -> xr.DataArray:
    """Blocked paired contrast ``S(a, lambda_-c) ⊖ S(b, lambda_-c)``, mixed over blocks.

    The paper's table of pairwise contrasts of the target countries (appendix
    "Additional tables/figures"): within every block ``lambda_-c`` of the other dims, the comonotone paired
    difference of level ``a`` and level ``b`` of ``dim``; the block PMFs are
    mixed uniformly. Its mean is the difference of the two marginal means.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs (composed first) or composite PMFs, or a results Dataset
        (its ``pmf``).
    dim : hashable
        The factor to contrast.
    a, b : hashable, optional
        Two levels of ``dim``. Both omitted: every pair ``i < j`` (in level
        order) along a new dim ``pair`` labelled like ``"USA − China"``.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect, subscale : keyword-only
        How item PMFs are composed (:func:`composite`); a ``subscale`` dim is
        carried along (one contrast per subscale), never mixed over.
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        PMF over the integer coordinate ``effect`` (plus ``pair``); use
        :func:`summarize` for E, SD, SNR, dPD.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    XlikertError
        Only one of ``a`` and ``b`` given.
    DesignError
        ``dim`` not a factor or with fewer than two levels, a level not in
        ``dim`` or contrasted with itself, a design that is not fully crossed,
        or a dim with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InvalidPMFError
        An invalid PMF (negative or NaN mass, not summing to 1).

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
    require_ordinal(as_pmf(pmf), "contrast", item_dim=item_dim)
    s = to_composite(pmf, item_dim, score_dim, kernels, reflect, subscale)
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
        out = blocked_contrast(terms, [1, -1], others, score_dim, "effect", kernels)
        out.attrs = {"contrast": f"{a} − {b}", "dim": str(dim)}
        out.name = "pmf"
        return out
    pairs = list(combinations(range(len(labels)), 2))
    ia = xr.DataArray([p[0] for p in pairs], dims="pair")
    ib = xr.DataArray([p[1] for p in pairs], dims="pair")
    terms = xr.concat(
        [s.isel({dim: ia}).drop_vars([dim]), s.isel({dim: ib}).drop_vars([dim])],
        dim=_TERM,
    ).transpose("pair", *others, ..., _TERM, score_dim)
    out = blocked_contrast(terms, [1, -1], others, score_dim, "effect", kernels)
    out = out.assign_coords(pair=[f"{labels[i]} − {labels[j]}" for i, j in pairs])
    out.attrs = {"dim": str(dim)}
    out.name = "pmf"
    return out
