"""What a sampling study would have paid: standard errors, sign flips, decoding bias.

The exact PMFs are the ground truth; this module computes, *analytically*, what
a researcher who estimated the same quantities from ``N`` sampled answers per
condition would have got (paper appendix "Cost of Monte Carlo sampling"):

- :func:`composite_moments` -- exact mean and variance of one sampled composite
  answer per condition (items are context-isolated, hence independent, so
  ``Var(S) = sum_k Var(Y_k)``);
- :func:`standard_error` -- SE of the ``N``-sample mean, ``SD(S)/sqrt(N)``;
- :func:`effect_coefficients`, :func:`effect_means` -- the exact sum-to-zero
  contrast behind every factorial parameter (main effects and interactions of
  every order);
- :func:`flip_probability`, :func:`flip_table` -- chance that the sampled
  estimate of a parameter has the wrong sign, binned by effect size;
- :func:`decoding_bias`, :func:`decoding_bias_table` -- bias of the expected
  composite under the stored temperature x top-p grid, and its correlation
  with Consensus.

No function here draws a random number: every result is a closed form of the
exact PMFs. Simulation appears only in the tests that check these formulas.

The composite is the instrument's (:func:`xlikert.composite`): reverse-keyed
items are reflected first and, for an instrument with subscales, every result
has a ``subscale`` dim (a column in the tables): standard errors, effects and
biases of each subscale's composite, never of their sum. ``reflect=False``
and ``subscale=None`` opt out.

Flip probabilities use the normal approximation to the estimator (paper eq.
``flip-prob``) with the *exact* mean and variance of the estimator. Why not the
exact law: the estimator is a weighted sum of ``N x (#conditions)`` lattice
variables with weights of different denominators, so its exact distribution
has millions of atoms at realistic budgets and would need FFT convolutions
whose round-off is as large as the small tail probabilities of interest. Each
condition's sample mean already averages ``N`` composite draws, each itself a
sum of ``K`` independent items, so the central limit approximation is very
accurate in the regime where flips matter (the tests check it against
simulation for ``N`` as small as 10).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .design.scoring import SUBSCALE_DIM, reflect_pending, subscale_coords, subscale_groups
from .dims import DECODING_DIMS, factor_dims
from .errors import DesignError, InvalidPMFError
from .validate import (
    as_pmf,
    check_item_dim,
    check_pmf,
    check_score_axis,
    squeeze_constant_factors,
)

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_EFFECT_BINS",
    "composite_moments",
    "correlation",
    "decoding_bias",
    "decoding_bias_table",
    "effect_coefficients",
    "effect_means",
    "effect_variances",
    "flip_probability",
    "flip_table",
    "sampling_se_table",
    "standard_error",
]

#: Per-condition budgets of the paper's tables.
DEFAULT_BUDGETS: tuple[int, ...] = (10, 100, 1000)
#: Bin edges of ``|E_exact|`` in the paper's flip table (composite-score units).
DEFAULT_EFFECT_BINS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, math.inf)


# --------------------------------------------------------------------------- helpers
def _composite_aux(pmf: xr.DataArray, item_dim: Hashable) -> list[Hashable]:
    """``["subscale"]`` for composite PMFs (no item dim), whose subscale dim is xlikert's own."""
    return [] if item_dim in pmf.dims else [SUBSCALE_DIM]


def _design_factors(
    pmf: xr.DataArray,
    factors: Hashable | Sequence[Hashable] | None,
    item_dim: Hashable,
    score_dim: Hashable,
) -> list[Hashable]:
    """The factors of a design PMF; every other dim must be a core dim (no batch dims)."""
    aux = _composite_aux(pmf, item_dim)
    fac = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim, auxiliary=aux)
    extra = [d for d in pmf.dims if d not in fac and d not in (item_dim, score_dim, *aux)]
    if extra:
        raise DesignError(f"dims {extra} are neither factors nor item/score")
    return fac


def _budgets(n: int | Sequence[int]) -> xr.DataArray:
    values = np.atleast_1d(np.asarray(n))
    if values.ndim != 1 or values.size == 0:
        raise InvalidPMFError(
            f"budget n must be a positive integer or a 1-D list of them, got {n!r}"
        )
    if (
        not np.issubdtype(values.dtype, np.number)
        or np.any(values != np.round(values))
        or np.any(values < 1)
    ):
        raise InvalidPMFError(f"budget n must hold positive integers, got {values.tolist()}")
    values = values.astype(np.int64)
    return xr.DataArray(values, dims="n", coords={"n": values}, name="n")


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF, ``Phi(x) = erfc(-x / sqrt 2) / 2`` (no SciPy needed)."""
    x = np.asarray(x, dtype=float)
    return 0.5 * np.vectorize(math.erfc, otypes=[float])(-x / math.sqrt(2.0))


def _term_name(dims: Sequence[Hashable]) -> str:
    return ":".join(str(d) for d in dims)


# --------------------------------------------------------------------------- SE
def composite_moments(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Hashable | None = SUBSCALE_DIM,
) -> xr.Dataset:
    """Exact mean and variance of one sampled composite answer per condition.

    Items are context-isolated and therefore independent given the condition,
    so the composite ``S = sum_k Y_k`` has ``E[S] = sum_k E[Y_k]`` and
    ``Var(S) = sum_k Var(Y_k)``. The composite is :func:`xlikert.composite`'s:
    reverse-keyed items reflected, one composite per subscale.

    Parameters
    ----------
    pmf
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``); a composite PMF (no ``item_dim``) is accepted
        too. The decoding grid (``temperature``, ``top_p``) is carried along.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.
    reflect, subscale : keyword-only
        As in :func:`xlikert.composite`: ``reflect=False`` keeps the answers
        as given, ``subscale=None`` sums all items.

    Returns
    -------
    xr.Dataset
        ``mean`` and ``var`` with dims ``(*factors)``, plus ``subscale``
        (with its ``n_items`` coordinate) for an instrument with subscales.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> m = composite_moments(synthetic_pmf({"model": 2}, n_items=3))
    >>> sorted(m.data_vars), dict(m.sizes)
    (['mean', 'var'], {'model': 2})
    """
    pmf = as_pmf(pmf)
    aux = [*DECODING_DIMS, *_composite_aux(pmf, item_dim)]
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=aux)
    pmf = check_pmf(pmf, score_dim)
    groups = None
    if item_dim in pmf.dims:
        check_item_dim(pmf, item_dim)
        if reflect:
            pmf = reflect_pending(pmf, item_dim=item_dim, score_dim=score_dim)
        groups = subscale_groups(pmf, subscale, item_dim=item_dim)
        pmf = pmf.drop_vars([c for c in pmf.coords if c != item_dim and item_dim in pmf[c].dims])
    y = pmf[score_dim].astype(float)
    mean_k = (pmf * y).sum(score_dim)
    var_k = (pmf * y**2).sum(score_dim) - mean_k**2
    moments = xr.Dataset({"mean": mean_k, "var": var_k.clip(min=0.0)})
    if item_dim not in pmf.dims:
        return moments
    if groups is None:
        return moments.sum(item_dim)
    # one row of 0/1 weights per subscale: each subscale's composite is the sum of its items
    weights = np.zeros((len(groups), pmf.sizes[item_dim]))
    for row, (_, idx) in enumerate(groups):
        weights[row, idx] = 1.0
    y_range = check_score_axis(pmf, score_dim)
    names, sizes = [g for g, _ in groups], [idx.size for _, idx in groups]
    w = xr.DataArray(weights, dims=(SUBSCALE_DIM, item_dim)).assign_coords(
        subscale_coords(names, sizes, int(y_range[0]), int(y_range[-1]))
    )
    moments = moments.drop_vars(item_dim, errors="ignore")
    return moments.map(lambda m: xr.dot(m, w, dim=item_dim).transpose(..., SUBSCALE_DIM))


def standard_error(
    pmf: xr.DataArray | xr.Dataset,
    n: int | Sequence[int] = DEFAULT_BUDGETS,
    *,
    dim: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Standard error of the ``N``-sample estimator of the composite score.

    Per condition the estimator is the mean of ``N`` sampled composite answers,
    ``SE = SD(S) / sqrt(N)``. With ``dim``, the estimator is the mean over the
    conditions along ``dim`` (e.g. a model-level score averaged over targets),
    each sampled ``N`` times independently:
    ``SE = sqrt(mean_c Var(S_c) / |dim|) / sqrt(N)``.

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)`` (or composite PMFs), or a
        results Dataset (its ``pmf``).
    n
        Per-condition budget(s); the result has a dim ``n``.
    dim : keyword-only
        Factor(s) the estimator averages over, or None (per condition).
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Raises
    ------
    DesignError
        ``dim`` not a factor, or a factor with a name xlikert reserves
        (:mod:`xlikert.dims`; e.g. ``n``, which the result adds).

    Returns
    -------
    xr.DataArray
        ``se`` with dims ``(*remaining factors, [subscale], n)``.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=4)
    >>> se = standard_error(pmf, n=[10, 1000])
    >>> dict(se.sizes)
    {'model': 2, 'target': 3, 'n': 2}
    >>> bool(np.allclose(se.sel(n=10) / se.sel(n=1000), 10.0))
    True
    """
    pmf = as_pmf(pmf)
    factor_dims(
        pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=_composite_aux(pmf, item_dim)
    )
    var = composite_moments(pmf, item_dim=item_dim, score_dim=score_dim)["var"]
    if dim is not None:
        dims = factor_dims(var, dim, item_dim=None, score_dim=None, auxiliary=[SUBSCALE_DIM])
        size = int(np.prod([var.sizes[d] for d in dims]))
        var = var.mean(dims) / size
    out = np.sqrt(var) / np.sqrt(_budgets(n))
    out.name = "se"
    out.attrs = {
        "long_name": "standard error of the N-sample composite estimator",
        "units": "composite-score points",
    }
    return out


def sampling_se_table(
    pmf: xr.DataArray | xr.Dataset,
    n: int | Sequence[int] = (10, 100, 1000, 1_000_000),
    *,
    by: Hashable | None = None,
    consensus: xr.DataArray | xr.Dataset | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> pd.DataFrame:
    """The paper's SE table: per-condition SE averaged over the conditions of each level of ``by``.

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)``, or a results Dataset (its ``pmf``).
    n
        Budgets (columns ``N=...``).
    by : keyword-only
        The factor to report per level (default ``model`` if present, else the
        first factor). With a single-cell design, one row ``all``.
    consensus : keyword-only
        Optional Consensus per condition (or the Dataset of
        ``xl.consensus(..., bounds=True)``); its mean per level is a ``Cns``
        column and rows are sorted by it, descending.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Raises
    ------
    DesignError
        ``by`` not a factor, or a factor with a name xlikert reserves
        (:mod:`xlikert.dims`; e.g. ``n``, the dim of the budgets).

    Returns
    -------
    pandas.DataFrame
        Index: the levels of ``by`` (and ``subscale``, for an instrument with
        subscales); columns ``Cns`` (optional) and ``N=...``.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> sampling_se_table(synthetic_pmf({"model": 2, "target": 2}, n_items=3), n=[10]).shape
    (2, 1)
    """
    pmf = as_pmf(pmf)
    factors = _design_factors(pmf, None, item_dim, score_dim)
    se = standard_error(pmf, n, item_dim=item_dim, score_dim=score_dim)
    by = _default_by(factors, by)
    rest = [d for d in factors if d != by]
    se_by = se.mean(rest) if rest else se
    df = _level_frame({f"N={_fmt_n(v)}": se_by.sel(n=v, drop=True) for v in se_by["n"].values}, by)
    return _with_consensus(df, consensus, by)


def _level_frame(columns: Mapping[str, xr.DataArray], by: Hashable | None) -> pd.DataFrame:
    """One row per level of ``by`` (and per subscale), one column per reduced array.

    Without ``by`` and subscales: one row ``all`` (index name ``condition``).
    """
    first = next(iter(columns.values()))
    keys = [d for d in (by, SUBSCALE_DIM) if d is not None and d in first.dims]
    if not keys:
        data = {name: [float(da)] for name, da in columns.items()}
        return pd.DataFrame(data, index=pd.Index(["all"], name="condition"))
    return pd.DataFrame(
        {
            name: da.reset_coords(drop=True).transpose(*keys).to_series()
            for name, da in columns.items()
        }
    )


def _with_consensus(
    df: pd.DataFrame, consensus: xr.DataArray | xr.Dataset | None, by: Hashable | None
) -> pd.DataFrame:
    """Insert the mean Consensus per level of ``by`` as column ``Cns``; sort by it, descending."""
    if consensus is None:
        return df
    consensus = as_pmf(consensus, "consensus")
    if by is None:
        df.insert(0, "Cns", float(consensus.mean()))
        return df
    cns = consensus.mean([d for d in consensus.dims if d != by]).to_pandas()
    level = df.index.get_level_values(by) if df.index.nlevels > 1 else df.index
    df.insert(0, "Cns", np.asarray(level.map(cns), dtype=float))
    return df.sort_values("Cns", ascending=False, kind="stable")


def _fmt_n(v: int) -> str:
    v = int(v)
    exp = math.log10(v) if v > 0 else 0
    return f"10^{int(exp)}" if v >= 10_000 and exp == int(exp) else str(v)


def _default_by(factors: Sequence[Hashable], by: Hashable | None) -> Hashable | None:
    if by is not None:
        if by not in factors:
            raise DesignError(f"by={by!r} is not a factor; factors are {list(factors)}")
        return by
    if "model" in factors:
        return "model"
    return factors[0] if factors else None


# --------------------------------------------------------------------------- effects
def effect_coefficients(
    sizes: Mapping[Hashable, int], term: Sequence[Hashable], levels: Mapping[Hashable, int]
) -> np.ndarray:
    """Exact contrast coefficients ``alpha_c`` of one factorial parameter.

    The effect of ``term`` U at levels ``a_U`` is the linear functional
    ``E_U(a_U) = sum_c alpha_c mu_c`` of the cell means with
    ``alpha = prod_{f in U} (delta_{a_f} - 1/L_f) prod_{f not in U} 1/L_f``,
    the Möbius/Hoeffding contrast: its coefficients sum to zero over every
    factor in U, and the effects of all terms plus the grand mean add up to
    ``mu_c``.

    Parameters
    ----------
    sizes
        Factor name -> number of levels, in cell-array order.
    term
        The factors of the parameter (empty for the grand mean).
    levels
        Factor name -> level index, for every factor in ``term``.

    Returns
    -------
    numpy.ndarray
        Coefficients with shape ``tuple(sizes.values())``.

    Examples
    --------
    >>> effect_coefficients({"a": 2, "b": 2}, ["a"], {"a": 0})
    array([[ 0.25,  0.25],
           [-0.25, -0.25]])
    """
    vecs = []
    for f, size in sizes.items():
        if f in term:
            v = -np.full(size, 1.0 / size)
            v[levels[f]] += 1.0
        else:
            v = np.full(size, 1.0 / size)
        vecs.append(v)
    out = np.ones(())
    for v in vecs:
        out = np.multiply.outer(out, v)
    return out


def _terms(factors: Sequence[Hashable], max_order: int | None) -> list[tuple[Hashable, ...]]:
    top = len(factors) if max_order is None else min(max_order, len(factors))
    return [c for r in range(1, top + 1) for c in itertools.combinations(factors, r)]


def effect_means(
    cell: xr.DataArray, term: Sequence[Hashable], *, factors: Sequence[Hashable] | None = None
) -> xr.DataArray:
    """Exact effect ``E_U`` of every level combination of ``term``, from cell means.

    Möbius inversion of the marginal means: ``E_U = sum_{V subset U}
    (-1)^{|U|-|V|} mu_V`` with ``mu_V`` the mean of ``cell`` over the factors
    not in ``V`` (equals the expectation of the paper's effect PMFs).
    ``factors`` are the design's factors (default: every dim of ``cell``); other
    dims (e.g. replications) are carried along.

    Examples
    --------
    >>> mu = xr.DataArray([[1.0, 3.0], [5.0, 7.0]], dims=("a", "b"))
    >>> effect_means(mu, ["a"]).values.tolist()
    [-2.0, 2.0]
    """
    term = list(term)
    factors = list(cell.dims) if factors is None else list(factors)
    out = None
    for r in range(len(term) + 1):
        for sub in itertools.combinations(term, r):
            rest = [d for d in factors if d not in sub]
            part = cell.mean(rest) if rest else cell
            part = part * (-1.0) ** (len(term) - r)
            out = part if out is None else out + part
    return out.transpose(*term, ...)


def effect_variances(
    var: xr.DataArray, term: Sequence[Hashable], *, factors: Sequence[Hashable] | None = None
) -> xr.DataArray:
    """``sum_c alpha_c^2 var_c`` for every level combination of ``term`` (closed form).

    ``alpha`` factorises over factors (:func:`effect_coefficients`), so the sum
    factorises too: a factor outside U contributes ``sum_b var_b / L^2``; a
    factor in U at level a contributes ``(1 - 2/L) var_a + sum_b var_b / L^2``.
    ``factors`` are the design's factors (default: every dim of ``var``); other
    dims (e.g. ``subscale``) are carried along.

    Examples
    --------
    >>> v = xr.DataArray([1.0, 3.0], dims="a")
    >>> effect_variances(v, ["a"]).values.tolist()  # (1/2)^2 * (1 + 3)
    [1.0, 1.0]
    """
    out = var
    for f in list(var.dims) if factors is None else list(factors):
        size = var.sizes[f]
        total = out.sum(f) / size**2
        out = out * (1.0 - 2.0 / size) + total if f in term else total
    return out.transpose(*term, ...)


def flip_probability(
    pmf: xr.DataArray | xr.Dataset,
    n: int | Sequence[int] = DEFAULT_BUDGETS,
    *,
    factors: Sequence[Hashable] | None = None,
    max_order: int | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> pd.DataFrame:
    """Sign-flip probability of every factorial parameter for budgets ``n``.

    For each parameter (every level of every main effect and interaction) the
    exact effect is ``E = sum_c alpha_c mu_c`` (:func:`effect_coefficients`).
    A researcher who samples ``N`` composite answers per condition estimates it
    by ``E_hat = sum_c alpha_c mean_c``, with mean ``E`` and variance
    ``sum_c alpha_c^2 Var(S_c) / N`` (exact). The flip probability is
    ``Phi(-|E| / SD(E_hat))`` (paper eq. ``flip-prob``), the normal
    approximation to ``P(sign E_hat != sign E)``; see the module docstring for
    why not the exact law. A parameter with ``E == 0`` gets 0.5.

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)`` (or composite PMFs), or a
        results Dataset (its ``pmf``).
    n
        Per-condition budgets.
    factors : keyword-only
        Factors of the design (default: every dim but item/score).
    max_order : keyword-only
        Highest interaction order (default: all).
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Raises
    ------
    DesignError
        No factor, a dim that is neither a factor nor item/score, or a factor
        with a name xlikert reserves (:mod:`xlikert.dims`).

    Returns
    -------
    pandas.DataFrame
        Long format, one row per (parameter, budget): ``term``, ``level``,
        ``order``, ``E`` (exact effect), ``n``, ``se`` (SD of the estimator)
        and ``p_flip``; for an instrument with subscales one row per
        (subscale, parameter, budget) and a column ``subscale``. A factor with
        one level is held constant: it has no parameter, and
        ``attrs["constant_factors"]`` names it with its level (no factor with
        two levels: no rows).

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=4)
    >>> df = flip_probability(pmf, n=[10, 100])
    >>> sorted(df.term.unique())
    ['model', 'model:target', 'target']
    >>> len(df) == 2 * (2 + 3 + 2 * 3)
    True
    """
    pmf = as_pmf(pmf)
    factors = _design_factors(pmf, factors, item_dim, score_dim)
    if not factors:
        raise DesignError("flip probabilities need at least one factor; the PMF has none")
    # a factor with one level has no parameter to flip
    pmf, factors, constant = squeeze_constant_factors(pmf, factors)
    # one mean and variance per condition: small, and the table below is eager anyway
    mom = composite_moments(pmf, item_dim=item_dim, score_dim=score_dim).compute()
    budgets = _budgets(n)
    batch = [SUBSCALE_DIM] if SUBSCALE_DIM in mom.dims else []
    frames = []
    for term in _terms(factors, max_order):
        e = effect_means(mom["mean"], term, factors=factors)
        v = effect_variances(mom["var"], term, factors=factors)
        sd = np.sqrt(v / budgets)  # (*term, [subscale], n)
        absE = abs(e)
        z = xr.where(sd > 0, -absE / sd.where(sd > 0), xr.where(absE > 0, -np.inf, 0.0))
        p = xr.apply_ufunc(_normal_cdf, z)
        ds = xr.Dataset({"E": e, "se": sd, "p_flip": p}).reset_coords(drop=True)
        df = ds.to_dataframe(dim_order=[*batch, *term, "n"]).reset_index()
        df.insert(0, "term", _term_name(term))
        level = df[term[0]].astype(str)
        for f in term[1:]:
            level = level + " × " + df[f].astype(str)
        df.insert(1, "level", level)
        df.insert(2, "order", len(term))
        frames.append(df[["term", "level", "order", "E", "n", "se", "p_flip", *batch]])
    if frames:
        table = pd.concat(frames, ignore_index=True)
    else:  # no factor varies: no parameter
        kinds = {"term": str, "level": str, "order": np.int64, "E": float, "n": np.int64,
                 "se": float, "p_flip": float, **dict.fromkeys(batch, str)}  # fmt: skip
        table = pd.DataFrame({c: pd.Series(dtype=k) for c, k in kinds.items()})
    table.attrs["constant_factors"] = constant
    return table


def flip_table(flips: pd.DataFrame, bins: Sequence[float] = DEFAULT_EFFECT_BINS) -> pd.DataFrame:
    """Mean flip probability by exact effect-size bin and budget (the paper's flip table).

    Parameters
    ----------
    flips
        Output of :func:`flip_probability`.
    bins
        Edges of ``|E|`` bins, left-closed (``[0, 1)``, ..., ``>= 10``).

    Returns
    -------
    pandas.DataFrame
        Index: bin labels; columns ``Params (%)`` and ``N=...`` (mean ``p_flip``;
        NaN where a bin is empty).

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> t = flip_table(flip_probability(synthetic_pmf({"m": 3}, n_items=3), n=[10]))
    >>> list(t.columns)
    ['Params (%)', 'N=10']
    """
    if flips.empty:
        held = flips.attrs.get("constant_factors") or {}
        raise DesignError(
            "no factorial parameter to tabulate: every factor has one level"
            + (f" (held constant: {held})" if held else "")
        )
    edges = list(bins)
    labels = []
    for lo, hi in itertools.pairwise(edges):
        labels.append(f"≥ {lo:g}" if math.isinf(hi) else f"[{lo:g}, {hi:g})")
    one = flips[flips["n"] == flips["n"].iloc[0]]
    cat = pd.cut(one["E"].abs(), edges, right=False, labels=labels)
    share = cat.value_counts(sort=False) / len(one) * 100.0
    out = pd.DataFrame(
        {"Params (%)": share.reindex(labels).values}, index=pd.Index(labels, name="|E|")
    )
    for nv, grp in flips.groupby("n", sort=True):
        c = pd.cut(grp["E"].abs(), edges, right=False, labels=labels)
        out[f"N={_fmt_n(nv)}"] = (
            grp.groupby(c, observed=False)["p_flip"].mean().reindex(labels).values
        )
    return out


# --------------------------------------------------------------------------- decoding
def decoding_bias(
    ds: xr.Dataset | xr.DataArray,
    *,
    native: Mapping[str, float] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Bias of the expected composite under each stored decoding setting.

    ``bias(T, p) = E_{T,p}[S] - E_native[S]`` per condition, in composite-score
    units, where the expectation uses ``decoding_pmf`` (the item PMF a sampler
    would see under temperature ``T`` and top-p ``p``). Native is ``T = 1``,
    ``top-p = 1`` on the grid if stored, else the results' ``pmf``. Where the
    nucleus of some item keeps no valid token (its ``decoding_pmf`` is all NaN),
    a sampler never produces a valid composite: the bias there is NaN and
    ``attrs["n_undefined"]`` counts such cells.

    Parameters
    ----------
    ds
        Results Dataset with ``decoding_pmf`` ``(*factors, item, temperature,
        top_p, score)`` (and ``pmf``), or the ``decoding_pmf`` DataArray itself
        (then the native setting must be on its grid).
    native : keyword-only
        The reference setting, default ``{"temperature": 1.0, "top_p": 1.0}``.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Returns
    -------
    xr.DataArray
        ``bias`` with dims ``(*factors, temperature, top_p)``.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> pmf = synthetic_pmf({"model": 2}, n_items=3)
    >>> grid = pmf.expand_dims(temperature=[0.5, 1.0], top_p=[0.9, 1.0]).copy()
    >>> ds = xr.Dataset({"pmf": pmf, "decoding_pmf": grid})
    >>> float(abs(decoding_bias(ds)).max())
    0.0
    """
    if isinstance(ds, xr.DataArray):
        ds = ds.to_dataset(name="decoding_pmf")
    if "decoding_pmf" not in ds:
        raise InvalidPMFError(
            "results hold no 'decoding_pmf' (temperature x top-p grid); collect with a "
            "decoding grid to measure decoding bias"
        )
    grid = as_pmf(ds, "decoding_pmf")
    for d in DECODING_DIMS:
        if d not in grid.dims:
            raise InvalidPMFError(f"decoding_pmf has no {d!r} dimension; dims are {grid.dims}")
    factor_dims(grid, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    # A setting whose nucleus keeps no valid token for some item (the collector
    # stores decoding_valid_mass = 0 and an all-NaN PMF) never yields a valid
    # composite: its bias is undefined, reported as NaN and counted in the attrs.
    # Partly-NaN PMFs are malformed and still fail check_pmf.
    undefined = grid.isnull().all(score_dim).any(item_dim)
    filled = check_pmf(grid.where(~undefined, 1.0 / grid.sizes[score_dim]), score_dim)
    native = dict(native or {"temperature": 1.0, "top_p": 1.0})
    expected = composite_moments(filled, item_dim=item_dim, score_dim=score_dim)["mean"]
    expected = expected.where(~undefined)
    t_ok = np.isclose(grid["temperature"].values, native["temperature"])
    p_ok = np.isclose(grid["top_p"].values, native["top_p"])
    if t_ok.any() and p_ok.any():
        ref = expected.isel(temperature=int(np.argmax(t_ok)), top_p=int(np.argmax(p_ok)), drop=True)
    elif "pmf" in ds:
        ref = composite_moments(ds["pmf"], item_dim=item_dim, score_dim=score_dim)["mean"]
    else:
        raise InvalidPMFError(
            f"native setting {native} is not on the decoding grid and the results hold no 'pmf'"
        )
    out = expected - ref
    out.name = "bias"
    # A server in top-k mode measures only part of the grid: its decoding_valid_mass is
    # NaN (not measured), where 0 means "measured, no valid token in the nucleus".
    unmeasured = undefined & False
    if "decoding_valid_mass" in ds:
        unmeasured = ds["decoding_valid_mass"].isnull().any(item_dim) & undefined
    out.attrs = {
        "long_name": "decoding bias of the expected composite",
        "units": "composite-score points",
        "n_undefined": int((undefined & ~unmeasured).sum()),
        "n_unmeasured": int(unmeasured.sum()),
        "undefined": "NaN where some item keeps no valid token in the nucleus "
        "(n_undefined) or the setting was not measured (n_unmeasured)",
    }
    return out


def decoding_bias_table(
    bias: xr.DataArray,
    *,
    by: Hashable | None = None,
    consensus: xr.DataArray | xr.Dataset | None = None,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Mean absolute bias and SD of the bias per level of ``by``; correlation with Consensus.

    ``M|Bias|`` is the mean of ``|bias|`` over the grid and the other
    conditions; ``SD_Bias`` the standard deviation (ddof 0) of the bias over
    the same cells. With ``consensus``, the Pearson correlation across
    conditions between Consensus and the per-condition mean ``|bias|`` is
    returned with its two-sided p-value (SciPy if installed, else NaN).

    Returns
    -------
    (pandas.DataFrame, dict)
        The table (one row per level of ``by``, and per subscale for an
        instrument with subscales; columns ``Cns`` optional, ``M|Bias|``,
        ``SD_Bias``, ``max|Bias|``) and ``{"r": ..., "p": ..., "n": ...}`` (empty without
        ``consensus``).

    Examples
    --------
    >>> b = xr.DataArray(np.arange(8.0).reshape(2, 2, 2), dims=("model", "temperature", "top_p"),
    ...                  coords={"model": ["a", "b"]})
    >>> decoding_bias_table(b)[0]["M|Bias|"].tolist()
    [1.5, 5.5]
    """
    factors = factor_dims(
        bias,
        item_dim=None,
        score_dim=None,
        auxiliary=[*DECODING_DIMS, SUBSCALE_DIM],
        what="the bias",
    )
    by = _default_by(factors, by)
    rest = [d for d in bias.dims if d not in (by, SUBSCALE_DIM)]
    absb = abs(bias)
    df = _level_frame(
        {
            "M|Bias|": absb.mean(rest),
            "SD_Bias": bias.std(rest),
            "max|Bias|": absb.max(rest),
        },
        by,
    )
    stats: dict[str, float] = {}
    if consensus is not None:
        consensus = as_pmf(consensus, "consensus")
        # Consensus is per condition: correlate it with |bias| mixed over subscales too
        per_cond = absb.mean([*DECODING_DIMS, *[d for d in absb.dims if d == SUBSCALE_DIM]])
        cns, per_cond = xr.align(consensus, per_cond, join="exact")
        df = _with_consensus(df, cns, by)
        stats = correlation(cns, per_cond)
    return df, stats


def correlation(x: xr.DataArray, y: xr.DataArray) -> dict[str, float]:
    """Pearson ``r`` across all cells of two aligned arrays, with its p-value.

    Examples
    --------
    >>> c = correlation(xr.DataArray([1.0, 2.0, 3.0]), xr.DataArray([2.0, 4.0, 7.0]))
    >>> round(c["r"], 3), c["n"]
    (0.993, 3)
    """
    a = np.asarray(x.values, dtype=float).ravel()
    b = np.asarray(y.transpose(*x.dims).values, dtype=float).ravel()
    n = a.size
    if n < 3 or np.std(a) == 0 or np.std(b) == 0:
        return {"r": math.nan, "p": math.nan, "n": n}
    r = float(np.corrcoef(a, b)[0, 1])
    try:
        from scipy import stats as _st

        p = float(_st.pearsonr(a, b).pvalue)
    except ImportError:  # pragma: no cover
        p = math.nan
    return {"r": r, "p": p, "n": n}
