"""The construct stage's tables: the effects of a decomposition and what the paper shows.

* :func:`summary_table` -- the tidy table of a :func:`~xlikert.decompose` tree: term,
  level, E, SD, SNR, dPD (``xl.summary_table``; the report lays it out as the paper's
  effect table, :func:`xlikert.report.layout.paper_layout`); :func:`variance_shares` --
  each term's share of the variance of the mean composite;
* :func:`aggregate_vs_factorial` -- a main effect beside the two-factor interaction
  (:func:`interaction_node` finds that node);
* :func:`contrast_table` -- every pairwise contrast of a factor's levels;
* :func:`trend_table` -- the per-unit trend over every factor with a numeric coordinate.

Every function returns a plain :class:`pandas.DataFrame`; :mod:`xlikert.report.tables`
renders it (CSV, LaTeX, Markdown, HTML).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.dims import SUBSCALE_DIM
from ...core.errors import DesignError, InputTypeError, XlikertError
from ...core.io import read_attrs
from .effects import contrast
from .summary import summarize
from .trend import trend

__all__ = [
    "SCORING",
    "aggregate_vs_factorial",
    "contrast_table",
    "interaction_node",
    "summary_table",
    "trend_table",
    "variance_shares",
]

#: The columns of an effect summary (:func:`xlikert.summarize`).
SUMMARY_COLUMNS = ("E", "SD", "SNR", "dPD")


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
    """Tidy table of a :func:`~xlikert.decompose` tree: columns term, level, E, SD, SNR, dPD.

    The grand mean row comes first (``term="grand"``, ``level="grand mean"``),
    then every effect in tree order; multi-factor levels are joined with
    ``" × "`` (e.g. ``"Aya-32B × China"``). Batch dims, if any, become extra
    columns (``subscale`` for an instrument with subscales: every row is the
    effect on one subscale). ``attrs["constant_factors"]`` names the factors
    :func:`decompose` held constant (one level) with their level.

    Parameters
    ----------
    dec : xr.DataTree
        The tree of :func:`decompose`.
    scoring : keyword-only
        ``"sum"`` (default): E and SD in composite-score units (sums of items,
        the units of the effect PMFs); ``"mean"``: in mean-item units (divided
        by the number of items of the composite, per subscale: the convention
        of instruments scored by item means, e.g. the Big Five); ``"both"``:
        the sums plus columns ``E_item`` and ``SD_item``. SNR and dPD do not
        depend on the units. The convention is in ``attrs["scoring"]``.

    Returns
    -------
    pandas.DataFrame
        One row per term and level: ``term``, ``level``, ``E``, ``SD``, ``SNR``,
        ``dPD`` (and ``E_item``, ``SD_item`` with ``scoring="both"``), a column per
        batch dim; ``attrs["scoring"]`` and ``attrs["constant_factors"]``.

    Raises
    ------
    InputTypeError
        ``dec`` is not a DataTree.
    XlikertError
        ``scoring`` not one of ``"sum"``, ``"mean"``, ``"both"``.
    DesignError
        ``scoring="mean"`` on a decomposition of composite PMFs whose item count
        is unknown.

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
            data[str(b)] = (
                np.asarray(ds[b].values)[grid.ravel()] if b in ds.coords else grid.ravel()
            )
        frames.append(pd.DataFrame(data, index=pd.RangeIndex(int(np.prod(shape)))))
    out = pd.concat(frames, ignore_index=True)
    extra = [c for c in out.columns if c not in ["term", "level", *cols]]
    out = out[["term", "level", *cols, *extra]]
    out.attrs["constant_factors"] = read_attrs(dec).get("decompose_constant_factors") or {}
    return out


def variance_shares(effects: pd.DataFrame) -> pd.DataFrame:
    """Each term's share of the variance of the mean composite over the conditions.

    In a fully crossed design the effects of the mean are orthogonal: the
    variance of the cell means over the (equally weighted) conditions is the
    sum over terms of the mean over the term's levels of ``E**2``
    (:func:`xlikert.summary_table`'s ``E``). The share of a term is its part of
    that sum.

    Returns
    -------
    pandas.DataFrame
        Columns ``term``, ``variance`` and ``share`` (and the batch columns of
        ``effects``, e.g. ``subscale``: shares per batch).

    Examples
    --------
    >>> import xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=2))
    >>> round(float(variance_shares(summary_table(dec))["share"].sum()), 12)
    1.0
    """
    batch = [c for c in (SUBSCALE_DIM,) if c in effects.columns]
    rows = effects[effects["term"] != "grand"]
    var = (
        rows.assign(E2=rows["E"] ** 2)
        .groupby([*batch, "term"], sort=False)["E2"]
        .mean()
        .rename("variance")
        .reset_index()
    )
    total = var.groupby(batch)["variance"].transform("sum") if batch else var["variance"].sum()
    return var.assign(share=var["variance"] / total)


def _origin_of(dec_level: str, origin: Mapping[str, str] | None) -> str | None:
    return None if origin is None else origin.get(str(dec_level))


def aggregate_vs_factorial(
    dec: xr.DataTree,
    row: Hashable,
    col: Hashable,
    country_of_origin: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Aggregate main effect of ``row`` vs the ``col x row`` interaction (paper table).

    Panel A: the main effect of each level of ``row`` (what an aggregate
    benchmark sees, identical across ``col``). Panel B: the interaction of
    every (row, col) cell; ``reversal`` flags a sign opposite to the row's
    main effect; ``ingroup`` marks cells whose ``col`` level's country of
    origin equals the ``row`` level (when ``country_of_origin`` is given).

    Parameters
    ----------
    dec
        ``xl.decompose`` output (DataTree with children ``row`` and the
        two-factor term).
    row, col
        The two factors, e.g. ``"target"`` and ``"model"``.
    country_of_origin
        ``col`` level -> origin (a level of ``row``), e.g. ``{"Qwen": "China"}``.

    Returns
    -------
    pandas.DataFrame
        Columns ``panel`` (A/B), ``row``, ``col``, ``E``, ``SD``, ``SNR``,
        ``dPD``, ``reversal``, ``ingroup``; named after the factors. A batch dim
        of the decomposition (``subscale``) comes first, one block of rows per level.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=2)
    >>> t = aggregate_vs_factorial(xl.decompose(pmf), "target", "model")
    >>> t.panel.tolist(), t.columns[:3].tolist()
    (['A', 'A', 'B', 'B', 'B', 'B'], ['panel', 'target', 'model'])
    """
    main = dec[str(row)].dataset
    pair = interaction_node(dec, row, col)
    batch = [d for d in main["E"].dims if d != row]
    if not batch:
        return pd.DataFrame(_avf_rows(main, pair, row, col, country_of_origin))
    frames = []
    for cell in itertools.product(*(range(main.sizes[b]) for b in batch)):
        at = dict(zip(batch, cell, strict=True))
        labels = {b: main[b].values[i] if b in main.coords else i for b, i in at.items()}
        rows = _avf_rows(main.isel(at), pair.isel(at), row, col, country_of_origin)
        frames.append(pd.DataFrame([{**labels, **r} for r in rows]))
    return pd.concat(frames, ignore_index=True)


def _avf_rows(
    main: xr.Dataset,
    pair: xr.Dataset,
    row: Hashable,
    col: Hashable,
    origin: Mapping[str, str] | None,
) -> list[dict[Hashable, Any]]:
    """Panel A (the main effect of each ``row`` level) and B (each cell) of one batch cell."""
    rows: list[dict[Hashable, Any]] = []
    for lv in main[row].values:
        m = main.sel({row: lv})
        summary: dict[Hashable, float] = {k: float(m[k]) for k in SUMMARY_COLUMNS if k in m}
        rows.append({"panel": "A", row: str(lv), col: f"— (all {col})", **summary})
        rows[-1].update(reversal=False, ingroup=False)
    for lv in main[row].values:
        e_main = float(main["E"].sel({row: lv}))
        for cl in pair[col].values:
            c = pair.sel({row: lv, col: cl})
            home = _origin_of(cl, origin)
            label = f"{cl} ({home})" if home else str(cl)
            summary = {k: float(c[k]) for k in SUMMARY_COLUMNS if k in c}
            rows.append({"panel": "B", row: str(lv), col: label, **summary})
            rows[-1].update(
                reversal=bool(float(c["E"]) * e_main < 0),
                ingroup=bool(home is not None and home == str(lv)),
            )
    return rows


def interaction_node(dec: xr.DataTree, a: Hashable, b: Hashable) -> xr.Dataset:
    """The ``a`` x ``b`` interaction of a decomposition, whichever order its name has.

    Raises
    ------
    DesignError
        The decomposition has no such interaction (its terms are named).
    """
    for name in (f"{a}:{b}", f"{b}:{a}"):
        if name in dec.children:
            return dec[name].dataset
    raise DesignError(
        f"decomposition has no {a!r} x {b!r} interaction; its terms are {sorted(dec.children)}"
    )


def contrast_table(comp: xr.DataArray, dim: Hashable, *, max_levels: int = 8) -> pd.DataFrame:
    """Every pairwise contrast of the levels of ``dim``: E, SD, SNR and dPD of each.

    The blocked paired contrasts of :func:`xlikert.contrast` (every pair ``i < j`` in
    level order, mixed over the other factors), summarized (:func:`xlikert.summarize`).

    Parameters
    ----------
    comp
        Composite PMFs ``(*factors, score)`` (or item PMFs, composed first).
    dim
        The factor whose levels are contrasted.
    max_levels : keyword-only
        Above this many levels the table would be too long: an empty table.

    Returns
    -------
    pandas.DataFrame
        Columns ``Contrast`` (``"a − b"``), a batch dim of ``comp`` (``subscale``) if
        any, ``E``, ``SD``, ``SNR``, ``dPD``.

    Examples
    --------
    >>> import xlikert as xl
    >>> comp = xl.composite(xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=2))
    >>> contrast_table(comp, "target").Contrast.tolist()
    ['target0 − target1', 'target0 − target2', 'target1 − target2']
    """
    if comp.sizes[dim] > max_levels:
        return pd.DataFrame(columns=["Contrast", *SUMMARY_COLUMNS])
    summ = summarize(contrast(comp, dim)).reset_coords(drop=True)
    df = summ.to_dataframe().reset_index().rename(columns={"pair": "Contrast"})
    batch = [c for c in df.columns if c not in ("Contrast", *SUMMARY_COLUMNS)]
    return df[["Contrast", *batch, *SUMMARY_COLUMNS]]


def trend_table(comp: xr.DataArray, factors: Sequence[Hashable]) -> pd.DataFrame:
    """The per-unit trend (:func:`xlikert.trend`) over every factor with numeric values.

    A factor qualifies through a numeric index or a 1-D numeric non-index coordinate on
    its dim (e.g. ``model_size``) with distinct finite values, and two levels or more;
    the trend runs over those values.

    Returns
    -------
    pandas.DataFrame
        One row per (factor, coordinate): ``Factor``, ``Ordered by``, a batch dim of
        ``comp`` (``subscale``) if any, ``E``, ``SD``, ``SNR``, ``dPD`` (no qualifying
        factor: no rows).

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 3, "target": 2}, n_items=2)
    >>> comp = xl.composite(pmf.assign_coords(model_size=("model", [1.0, 4.0, 12.0])))
    >>> trend_table(comp, ["model", "target"])[["Factor", "Ordered by"]].values.tolist()
    [['model', 'model_size']]
    """
    rows = []
    for f in factors:
        if comp.sizes[f] < 2:
            continue
        for name, coord in comp.coords.items():
            if coord.dims != (f,) or not np.issubdtype(coord.dtype, np.number):
                continue
            values = np.asarray(coord.values, dtype=float)
            if not np.all(np.isfinite(values)) or len(np.unique(values)) != values.size:
                continue
            summ = summarize(trend(comp, f, values=values), dim="slope").reset_coords(drop=True)
            summ = summ if summ["E"].ndim else summ.expand_dims("_")  # one row per batch cell
            one = summ.to_dataframe().reset_index().drop(columns="_", errors="ignore")
            rows.append(one.assign(**{"Factor": str(f), "Ordered by": str(name)}))
    head = ["Factor", "Ordered by"]
    if not rows:
        return pd.DataFrame(columns=[*head, *SUMMARY_COLUMNS])
    df = pd.concat(rows, ignore_index=True)
    batch = [c for c in df.columns if c not in (*head, *SUMMARY_COLUMNS)]
    return df[[*head, *batch, *SUMMARY_COLUMNS]]
