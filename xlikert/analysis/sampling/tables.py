"""The sampling-cost tables: standard errors by budget (:func:`sampling_se_table`), sign
flips by effect size (:func:`flip_table`), decoding bias by level (:func:`decoding_bias_table`).

Each table groups its rows ``by`` one factor (default :data:`xlikert.core.dims.MODEL_DIM` if
present, else the first factor) and, for an instrument with subscales, by subscale.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence

import pandas as pd
import xarray as xr

from ...core.dims import DECODING_DIMS, SUBSCALE_DIM, factor_dims, preferred_factor
from ...core.errors import DesignError
from ...core.validate import as_pmf
from .. import frames
from .decoding import correlation
from .flips import DEFAULT_EFFECT_BINS
from .moments import design_factors, standard_error

__all__ = ["decoding_bias_table", "flip_table", "sampling_se_table"]


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
    pmf : xr.DataArray or xr.Dataset
        Item PMFs ``(*factors, item, score)``, or a results Dataset (its ``pmf``).
    n : int or sequence of int
        Budgets (columns ``N=...``).
    by : keyword-only
        The factor to report per level (default ``model`` if present, else the
        first factor). With a single-cell design, one row ``all``.
    consensus : keyword-only
        Optional Consensus per condition (or the Dataset of
        ``xl.consensus_bounds``); its mean per level is a ``Cns``
        column and rows are sorted by it, descending.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Returns
    -------
    pandas.DataFrame
        Index: the levels of ``by`` (and ``subscale``, for an instrument with
        subscales); columns ``Cns`` (optional) and ``N=...``.

    Raises
    ------
    DesignError
        ``by`` not a factor, or a factor with a name xlikert reserves
        (:mod:`xlikert.core.dims`; e.g. ``n``, the dim of the budgets).

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> sampling_se_table(synthetic_pmf({"model": 2, "target": 2}, n_items=3), n=[10]).shape
    (2, 1)
    """
    pmf = as_pmf(pmf)
    factors = design_factors(pmf, None, item_dim, score_dim)
    se = standard_error(pmf, n, item_dim=item_dim, score_dim=score_dim)
    by = preferred_factor(factors, by)
    rest = [d for d in factors if d != by]
    se_by = se.mean(rest) if rest else se
    df = frames.level_frame(
        {f"N={_budget_label(v)}": se_by.sel(n=v, drop=True) for v in se_by["n"].values}, by
    )
    return frames.with_consensus(df, consensus, by)


def _budget_label(v: int) -> str:
    """A budget N as the tables' columns name it: ``10^k`` from 10,000 on, else the number."""
    v = int(v)
    exp = math.log10(v) if v > 0 else 0
    return f"10^{int(exp)}" if v >= 10_000 and exp == int(exp) else str(v)


def flip_table(flips: pd.DataFrame, bins: Sequence[float] = DEFAULT_EFFECT_BINS) -> pd.DataFrame:
    """Mean flip probability by exact effect-size bin and budget (the paper's flip table).

    Parameters
    ----------
    flips : pandas.DataFrame
        Output of :func:`flip_probability`.
    bins : sequence of float
        Edges of ``|E|`` bins, left-closed (``[0, 1)``, ..., ``>= 10``).

    Returns
    -------
    pandas.DataFrame
        Index: bin labels; columns ``Params (%)`` and ``N=...`` (mean ``p_flip``;
        NaN where a bin is empty).

    Examples
    --------
    >>> from xlikert.analysis.sampling import flip_probability
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
        out[f"N={_budget_label(nv)}"] = (
            grp.groupby(c, observed=False)["p_flip"].mean().reindex(labels).values
        )
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

    Parameters
    ----------
    bias : xr.DataArray
        The bias of :func:`decoding_bias`: ``(*factors, temperature, top_p)``.
    by : keyword-only
        The factor to report per level (default ``model`` if present, else the
        first factor).
    consensus : keyword-only
        Optional Consensus per condition (or the Dataset of
        ``xl.consensus_bounds``): a ``Cns`` column and the correlation.

    Returns
    -------
    (pandas.DataFrame, dict)
        The table (one row per level of ``by``, and per subscale for an
        instrument with subscales; columns ``Cns`` optional, ``M|Bias|``,
        ``SD_Bias``, ``max|Bias|``) and ``{"r": ..., "p": ..., "n": ...}`` (empty without
        ``consensus``).

    Examples
    --------
    >>> import numpy as np
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
    by = preferred_factor(factors, by)
    rest = [d for d in bias.dims if d not in (by, SUBSCALE_DIM)]
    absb = abs(bias)
    df = frames.level_frame(
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
        df = frames.with_consensus(df, cns, by)
        stats = correlation(cns, per_cond)
    return df, stats
