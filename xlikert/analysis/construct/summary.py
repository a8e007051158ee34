"""Summaries of effect PMFs: E, SD, SNR and dPD (:func:`summarize`), and the tidy
table of a decomposition (:func:`summary_table`).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from ...dims import AUXILIARY_DIMS, CORE_DIMS, factor_dims
from ...errors import DesignError, InputTypeError, InvalidPMFError, XlikertError
from ...io import read_attrs
from ...validate import (
    as_pmf,
)

__all__ = ["SCORING", "SNR_RTOL", "summarize", "summary_table"]

#: An effect with ``SD <= SNR_RTOL * max|support|`` counts as deterministic (paper:
#: SNR = +inf if E != 0, 0 if E == 0); ``|E|`` below the same bound counts as 0. The
#: bound is relative, so SNR does not depend on the units of the support.
SNR_RTOL = 1e-9


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
