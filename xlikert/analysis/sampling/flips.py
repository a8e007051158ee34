"""Sign flips: the chance that a sampled estimate of a factorial parameter has the wrong sign.

The exact sum-to-zero contrast behind every factorial parameter
(:func:`effect_coefficients`, :func:`effect_means`, :func:`effect_variances`), the
normal approximation with the exact mean and variance of the estimator
(:func:`flip_probability`, :ref:`eq-flip-prob`); its table by effect size is
:func:`xlikert.analysis.sampling.tables.flip_table`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import cast

import numpy as np
import pandas as pd
import xarray as xr

from ...core.dims import factor_dims
from ...core.errors import DesignError
from ...core.validate import (
    as_pmf,
    squeeze_constant_factors,
)
from .moments import DEFAULT_BUDGETS, budget_axis, composite_aux, composite_moments

__all__ = [
    "DEFAULT_EFFECT_BINS",
    "effect_coefficients",
    "effect_means",
    "effect_variances",
    "flip_probability",
]


#: Bin edges of ``|E_exact|`` in the paper's flip table (composite-score units).
DEFAULT_EFFECT_BINS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, math.inf)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF, ``Phi(x) = erfc(-x / sqrt 2) / 2`` (no SciPy needed)."""
    x = np.asarray(x, dtype=float)
    result: np.ndarray = 0.5 * np.vectorize(math.erfc, otypes=[float])(-x / math.sqrt(2.0))
    return result


def _term_name(dims: Sequence[Hashable]) -> str:
    return ":".join(str(d) for d in dims)


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
    sizes : mapping of hashable to int
        Factor name -> number of levels, in cell-array order.
    term : sequence of hashable
        The factors of the parameter (empty for the grand mean).
    levels : mapping of hashable to int
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

    Parameters
    ----------
    cell : xr.DataArray
        The mean of every condition (cell) of the design.
    term : sequence of hashable
        The factors ``U`` of the parameter (empty: the grand mean).
    factors : keyword-only
        The design's factors; default every dim of ``cell``.

    Returns
    -------
    xr.DataArray
        ``E_U`` with dims ``(*term, *batch dims)``.

    Examples
    --------
    >>> mu = xr.DataArray([[1.0, 3.0], [5.0, 7.0]], dims=("a", "b"))
    >>> effect_means(mu, ["a"]).values.tolist()
    [-2.0, 2.0]
    """
    term = list(term)
    factors = list(cell.dims) if factors is None else list(factors)
    out: xr.DataArray | None = None
    for r in range(len(term) + 1):
        for sub in itertools.combinations(term, r):
            rest = [d for d in factors if d not in sub]
            part = cell.mean(rest) if rest else cell
            part = part * (-1.0) ** (len(term) - r)
            out = part if out is None else out + part
    assert out is not None  # r = 0 always adds a part
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

    Parameters
    ----------
    var : xr.DataArray
        The variance of every condition (cell) of the design.
    term : sequence of hashable
        The factors ``U`` of the parameter.
    factors : keyword-only
        The design's factors; default every dim of ``var``.

    Returns
    -------
    xr.DataArray
        ``sum_c alpha_c^2 var_c`` with dims ``(*term, *batch dims)``.

    Examples
    --------
    >>> v = xr.DataArray([1.0, 3.0], dims="a")
    >>> effect_variances(v, ["a"]).values.tolist()  # (1/2)^2 * (1 + 3)
    [1.0, 1.0]
    """
    out = var
    for f in list(var.dims) if factors is None else list(factors):
        size = var.sizes[f]
        total = out.sum([f]) / size**2
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
    ``Phi(-|E| / SD(E_hat))`` (:ref:`eq-flip-prob`), the normal
    approximation to ``P(sign E_hat != sign E)``; see the module docstring for
    why not the exact law. A parameter with ``E == 0`` gets 0.5.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs ``(*factors, item, score)`` (or composite PMFs), or a
        results Dataset (its ``pmf``).
    n : int or sequence of int
        Per-condition budgets.
    factors : keyword-only
        Factors of the design (default: every dim but item/score). Every other
        dim is a batch dim, carried along: one parameter per batch cell, a
        column in the table.
    max_order : keyword-only
        Highest interaction order (default: all).
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Returns
    -------
    pandas.DataFrame
        Long format, one row per (parameter, budget): ``term``, ``level``,
        ``order``, ``E`` (exact effect), ``n``, ``se`` (SD of the estimator)
        and ``p_flip``; for an instrument with subscales one row per
        (subscale, parameter, budget) and a column ``subscale``, and likewise
        a column per batch dim. A factor with
        one level is held constant: it has no parameter, and
        ``attrs["constant_factors"]`` names it with its level (no factor with
        two levels: no rows).

    Raises
    ------
    DesignError
        No factor, a given factor that is not a dim, or a factor or batch dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).

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
    aux = composite_aux(pmf, item_dim)
    factors = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim, auxiliary=aux)
    if not factors:
        raise DesignError("flip probabilities need at least one factor; the PMF has none")
    # a factor with one level has no parameter to flip
    pmf, factors, constant = squeeze_constant_factors(pmf, factors)
    # one mean and variance per condition: small, and the table below is eager anyway
    mom = composite_moments(pmf, item_dim=item_dim, score_dim=score_dim).compute()
    budgets = budget_axis(n)
    batch = [d for d in mom.dims if d not in factors]  # subscale, the grid, other dims
    frames = []
    for term in _terms(factors, max_order):
        e = effect_means(mom["mean"], term, factors=factors)
        v = effect_variances(mom["var"], term, factors=factors)
        sd = cast(xr.DataArray, np.sqrt(v / budgets))  # (*term, [subscale], n)
        absE = abs(e)
        z = xr.where(  # type: ignore[no-untyped-call]
            sd > 0,
            -absE / sd.where(sd > 0),
            xr.where(absE > 0, -np.inf, 0.0),  # type: ignore[no-untyped-call]
        )
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
