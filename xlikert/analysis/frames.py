"""Tidy frames of reduced arrays, shared by the stages' tables.

One row per level of the factor a table groups ``by`` (and per subscale), one column
per reduced array (:func:`level_frame`); the mean Consensus per level as a column that
orders the rows (:func:`with_consensus`). The failure-rate table
(:func:`xlikert.analysis.constraint.failure_summary`) and the sampling-cost tables
(:mod:`xlikert.analysis.sampling.tables`) are built with them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ..core.dims import SUBSCALE_DIM
from ..core.validate import as_pmf

__all__ = ["level_frame", "with_consensus"]


def level_frame(columns: Mapping[str, xr.DataArray], by: Hashable | None) -> pd.DataFrame:
    """One row per level of ``by`` (and per subscale), one column per reduced array.

    Without ``by`` and subscales: one row ``all`` (index name ``condition``).

    Examples
    --------
    >>> x = xr.DataArray([1.0, 3.0], dims="model", coords={"model": ["a", "b"]})
    >>> level_frame({"M": x, "2M": 2 * x}, "model").to_dict("index")
    {'a': {'M': 1.0, '2M': 2.0}, 'b': {'M': 3.0, '2M': 6.0}}
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
