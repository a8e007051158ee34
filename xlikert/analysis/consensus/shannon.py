"""Shannon entropy in bits of item PMFs and of the items' joint; its table beside Consensus."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from .inputs import layer_attrs, prepare_consensus

__all__ = ["consensus_entropy", "entropy"]


def _entropy_numpy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy in bits over the last axis (``0 log 0 = 0``), after normalising."""
    p = np.asarray(p, dtype=np.float64)
    p = p / p.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(p > 0.0, -p * np.log2(p), 0.0)
    result: np.ndarray = term.sum(axis=-1)
    return result


def entropy(
    pmf: xr.DataArray | xr.Dataset,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Shannon entropy in bits: of the K-item joint, or of each item.

    Under conditional independence the joint entropy is the sum of the item
    entropies; ``0 log 0 = 0``. The paper contrasts it with Consensus (its
    table of Consensus and entropy per condition): entropy ignores the ordinal
    distance between answers.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs with dims ``(*factors, item_dim, score_dim)``, or a results
        Dataset (its ``pmf``).
    item_dim : hashable or None, keyword-only
        Items of one condition; ``None`` gives the entropy of each item.
    score_dim : hashable, keyword-only
        Score dimension.

    Returns
    -------
    xr.DataArray
        ``entropy`` (bits) with dims ``(*factors)``, or ``(*factors, item_dim)``.

    Raises
    ------
    InvalidPMFError
        NaN or negative mass, PMFs not summing to 1, a malformed score axis.
    DesignError
        A dim with a name xlikert reserves (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xarray as xr
    >>> pmf = xr.DataArray(
    ...     [[1, 0, 0, 0, 0, 0, 0], [1 / 7] * 7, [0, 0, 0.5, 0, 0.5, 0, 0], [0.5, 0, 0, 0, 0, 0, 0.5]],
    ...     dims=("item", "score"), coords={"score": range(1, 8)})
    >>> entropy(pmf, item_dim=None).round(2).values
    array([0.  , 2.81, 1.  , 1.  ])
    >>> round(float(entropy(pmf)), 2)
    4.81
    """
    pmf, _ = prepare_consensus(pmf, item_dim, score_dim)
    core = [score_dim] if item_dim is None else [item_dim, score_dim]

    def _joint(p: np.ndarray) -> np.ndarray:
        h = _entropy_numpy(p)
        return h if item_dim is None else h.sum(axis=-1)

    out = xr.apply_ufunc(
        _joint,
        pmf,
        input_core_dims=[core],
        dask="parallelized",
        output_dtypes=[np.float64],
    )
    long_name = "Shannon entropy" + (" per item" if item_dim is None else " of the item joint")
    out.attrs = layer_attrs(pmf, long_name=long_name, units="bit")
    result: xr.DataArray = out.rename("entropy")
    return result


def consensus_entropy(cns: xr.DataArray, ent: xr.DataArray | None = None) -> pd.DataFrame:
    """Consensus (and joint entropy, bits) per condition, one row per condition
    (the paper's Consensus-vs-entropy table): columns the factors, ``Cns`` and
    ``Entropy (bits)``.

    Examples
    --------
    >>> c = xr.DataArray([0.9, 0.7], dims="model", coords={"model": ["a", "b"]}, name="Cns")
    >>> consensus_entropy(c).columns.tolist()
    ['model', 'Cns']
    """
    data = {"Cns": cns}
    if ent is not None:
        data["Entropy (bits)"] = ent
    ds = xr.Dataset(
        {k: v.drop_vars([c for c in v.coords if c not in v.dims]) for k, v in data.items()}
    )
    df = (
        ds.to_dataframe().reset_index()
        if ds["Cns"].ndim
        else pd.DataFrame({k: [float(v)] for k, v in ds.items()})
    )
    return df
