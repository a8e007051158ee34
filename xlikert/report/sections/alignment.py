"""Section "Alignment with human respondents" (``xlikert report --human FILE``).

:func:`human_alignment_section` is the section's entry in the list of sections: it
appears only when human data are given, and :func:`_human_section` builds it from the
results and the human data.

The human data are a netCDF human PMF Dataset (:func:`xlikert.human_pmf` written
with ``to_netcdf``) or a CSV of respondents, one row per respondent: the columns
named like the results' items are the answers, the columns named like a factor
of the results (the persona factors, e.g. ``party``, ``education``) are group
attributes, a column ``weight`` holds survey weights; other columns are ignored
(the section says which).
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import pandas as pd
import xarray as xr

from ... import plot
from ...analysis import alignment as stage
from ...analysis.alignment import alignment
from ...analysis.alignment.pairs import ORDER_METRICS
from ...analysis.human import human_marginal
from ...analysis.nonsubstantive import nonsubstantive_alignment
from ...analysis.support import nominal_items
from ...core.io import decode_attrs, read_attrs
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md
from .human_data import WEIGHT_COLUMN, load_human

__all__ = ["WEIGHT_COLUMN", "human_alignment_section"]


def _human_section(
    ds: xr.Dataset, human: str | Path | xr.Dataset, out: Path, by: Hashable, section
):
    """The section "Alignment with human respondents": model vs human PMFs per group,
    representativeness by ``by`` (model) x group with intervals, and the noise ceiling.

    ``section`` is the report's section class (called with the title).
    """
    pmf = ds["pmf"]
    h, how = load_human(human, pmf)
    h = decode_attrs(h)
    groups = [d for d in h["n"].dims if d != "item"]
    other = [d for d in pmf.dims if d not in (by, "item", "score", *groups)]
    model = pmf.mean(other) if other else pmf  # other factors mixed uniformly
    model = model.sel(item=[i for i in model["item"].values if i in set(h["item"].values)])
    table = stage.alignment_table(model, h, by)
    attrs = read_attrs(alignment(model.isel({by: [0]}), h))
    s = section("Alignment with human respondents")
    s.text(_intro(how, other, groups if set(groups) & set(pmf.dims) else [], attrs))
    table = _without_nominal_order(s, model, table)
    _alignment_parts(s, model, h, table, by, out)
    if "nonsubstantive_mass" in ds and "nonsubstantive_rate" in h:
        _nonsubstantive_parts(s, ds, h, by, other, out)
    return s


def _intro(how: str, other: list[Hashable], groups: list[Hashable], attrs: dict) -> str:
    """The section's first paragraph: the human data, what is mixed, how groups meet the
    model's cells (``groups``: those that are factors of the results too), the methods."""
    return (
        f"Human data: {how}. "
        + (
            f"The results' factors {', '.join(md_code(str(g)) for g in other)} are mixed uniformly. "
            if other
            else ""
        )
        + (
            f"The respondents are grouped by {', '.join(md_code(str(g)) for g in groups)}, "
            "factors of the results too: each "
            "group is compared with the model's cells at its level, and for the pooled "
            "respondents the model's levels are mixed with the groups' counts (silicon "
            "population). "
            if groups
            else ""
        )
        + "Representativeness is 1 − W1/(K − 1) (OpinionQA); JS in bits. "
        f"SE: {attrs['se_method']}. Interval: {attrs['interval_method']} "
        f"({100 * attrs['confidence']:.0f}%). Ceiling: {attrs['ceiling_method']}."
    )


def _without_nominal_order(s: Section, model: xr.DataArray, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` less the metrics that need an order on the nominal items, said so."""
    nominal = nominal_items(model)
    if not nominal:
        return table
    s.text(
        f"Nominal items {', '.join(md(i) for i in nominal)} have no order: W1, representativeness and the mean "
        "difference are not defined for them (left out of the representativeness table "
        "and figure, empty in the table of every metric); total variation and "
        "Jensen–Shannon compare them."
    )
    return table[~table["item"].astype(str).isin(nominal) | ~table.metric.isin(ORDER_METRICS)]


def _alignment_parts(
    s: Section, model: xr.DataArray, h: xr.Dataset, table: pd.DataFrame, by: Hashable, out: Path
) -> None:
    """The representativeness and metric tables, the PMF and representativeness figures."""
    rep = table[table.metric == "representativeness"].drop(columns="metric")
    s.table(
        rep,
        out,
        "human_representativeness",
        f"Representativeness by {by} × group and item, with its interval and the noise ceiling "
        "(two independent human samples of the same size).",
        digits=3,
        index=False,
    )
    wide = table.pivot_table(
        index=[by, "group", "item"], columns="metric", values="estimate", sort=False
    )
    s.table(
        wide.reset_index(),
        out,
        "human_alignment",
        "Every alignment metric (estimates).",
        digits=3,
        index=False,
    )
    s.figure(
        lambda: plot.human_pmfs(model, h, by=by),
        out,
        "human_pmfs",
        "Model PMFs (lines) vs human PMFs (bars) per group.",
    )
    s.figure(
        lambda: plot.representativeness(table, by=by),
        out,
        "human_representativeness",
        "Representativeness with intervals; the bar marks the noise ceiling.",
    )


def _nonsubstantive_parts(
    s, ds: xr.Dataset, h: xr.Dataset, by: Hashable, other: list[Hashable], out: Path
) -> None:
    """Model minus human non-substantive rates, for the whole population: the model's
    masses mixed over the other factors uniformly and over the personas with the human
    groups' answering respondents."""
    masses = ds[["valid_mass", "nonsubstantive_mass"]]
    masses = masses.mean(other, skipna=False) if other else masses  # NaN: not offered
    items = [i for i in masses["item"].values if i in set(h["item"].values)]
    masses = masses.sel(item=items)
    groups = [d for d in h["n_answered"].dims if d != "item" and d in masses.dims]
    if groups:
        w = h["n_answered"].astype(float)
        masses = (masses * w).sum(groups, skipna=False) / w.sum(groups)
    pooled = human_marginal(h)
    res = nonsubstantive_alignment(masses, pooled)
    frame = res.to_dataframe().reset_index().dropna(subset=["nonsubstantive_difference"])
    prefix = "nonsubstantive_"
    names = {"nonsubstantive_model": "model_rate", "nonsubstantive_human": "human_rate"}
    frame = frame.rename(
        columns=lambda c: names.get(c, c[len(prefix) :]) if str(c).startswith(prefix) else c
    )
    s.text(
        "Non-substantive answers (e.g. Don't know, Refused) apart from the opinions: the model's "
        "rate among its answers against the respondents' rate among those who answered, for "
        "the whole population (personas mixed with the respondents' counts). SE: "
        + res["nonsubstantive_se"].attrs["long_name"]
        + "."
    )
    s.table(
        frame[[c for c in (by, "item", "option", "model_rate", "human_rate", "difference",
                           "se", "lower", "upper") if c in frame.columns]],
        out,
        "human_nonsubstantive",
        f"Non-substantive rate by {by}, item and option: model, humans, the difference (model "
        "minus humans) with the human side's SE and interval.",
        digits=3,
        index=False,
    )  # fmt: skip


def human_alignment_section(inputs: ReportInputs) -> Section | None:
    """Model vs human PMFs and representativeness; ``None`` without human data."""
    if inputs.human is None:
        return None
    return _human_section(inputs.ds, inputs.human, inputs.out, inputs.by, Section)
