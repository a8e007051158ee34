"""The sampling-cost tables: standard errors by budget, and the helpers the other tables share."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ...errors import DesignError
from ...validate import (
    as_pmf,
)
from ..keying import SUBSCALE_DIM
from .moments import design_factors, standard_error

__all__ = ["default_by", "fmt_n", "level_frame", "sampling_se_table", "with_consensus"]


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
        ``xl.consensus_bounds``); its mean per level is a ``Cns``
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
    factors = design_factors(pmf, None, item_dim, score_dim)
    se = standard_error(pmf, n, item_dim=item_dim, score_dim=score_dim)
    by = default_by(factors, by)
    rest = [d for d in factors if d != by]
    se_by = se.mean(rest) if rest else se
    df = level_frame({f"N={fmt_n(v)}": se_by.sel(n=v, drop=True) for v in se_by["n"].values}, by)
    return with_consensus(df, consensus, by)


def level_frame(columns: Mapping[str, xr.DataArray], by: Hashable | None) -> pd.DataFrame:
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


def with_consensus(
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


def fmt_n(v: int) -> str:
    v = int(v)
    exp = math.log10(v) if v > 0 else 0
    return f"10^{int(exp)}" if v >= 10_000 and exp == int(exp) else str(v)


def default_by(factors: Sequence[Hashable], by: Hashable | None) -> Hashable | None:
    if by is not None:
        if by not in factors:
            raise DesignError(f"by={by!r} is not a factor; factors are {list(factors)}")
        return by
    if "model" in factors:
        return "model"
    return factors[0] if factors else None
