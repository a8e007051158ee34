"""The parts of the report drawn once per composite: one view per subscale, or one in all.

:func:`views` splits a result with a ``subscale`` dim into one selection per
subscale (with a file-name suffix and a caption prefix); :func:`composite_parts`
adds, for one composite, the main-effect figures, the interaction of ``by`` and
``second``, the pairwise contrasts and the per-unit trends (tables built by
:mod:`xlikert.analysis.construct.tables`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import NamedTuple

import xarray as xr

from ... import plot
from ...analysis.construct import (
    aggregate_vs_factorial,
    contrast_table,
    interaction_node,
    trend_table,
)
from ...core.dims import SUBSCALE_DIM
from ...core.errors import DesignError
from ..inputs import ReportInputs
from ..page import Section

__all__ = ["View", "composite_parts", "views"]


class View(NamedTuple):
    """One subscale's selection of a result (the whole result without subscales)."""

    tag: str  # file-name suffix: "" or "_<subscale>"
    label: str  # caption prefix: "" or "Subscale <name>: "
    data: xr.DataArray


def views(obj: xr.DataArray) -> Iterator[View]:
    """One :class:`View` per subscale of ``obj``; one plain view without a subscale dim."""
    if SUBSCALE_DIM not in obj.dims:
        yield View("", "", obj)
        return
    for name in obj[SUBSCALE_DIM].values:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "_", str(name)).strip("_") or "subscale"
        yield View(f"_{slug}", f"Subscale {name}: ", obj.sel({SUBSCALE_DIM: name}))


def _tree_view(dec: xr.DataTree, comp_s: xr.DataArray) -> xr.DataTree:
    """The decomposition of the subscale that ``comp_s`` was selected at (all of it without)."""
    if SUBSCALE_DIM not in comp_s.coords or SUBSCALE_DIM in comp_s.dims:
        return dec
    name = comp_s[SUBSCALE_DIM].values[()]
    return dec.map_over_datasets(
        lambda d: d.sel({SUBSCALE_DIM: name}) if SUBSCALE_DIM in d.dims else d
    )


def composite_parts(s: Section, inputs: ReportInputs, view: View) -> None:
    """Effect figures, interaction, contrasts and trends of one composite (one subscale)."""
    dec = _tree_view(inputs.decomposition, view.data)
    _main_effect_figures(s, inputs, view, dec)
    if inputs.second is not None:
        _interaction_parts(s, inputs, view, dec)
        _contrast_parts(s, inputs, view)
    _trend_parts(s, inputs, view)


def _main_effect_figures(s: Section, inputs: ReportInputs, view: View, dec: xr.DataTree) -> None:
    """The distribution of every main effect of a varying factor."""
    for f in inputs.factors:
        if f in dec.children and view.data.sizes[f] >= 2:
            node = dec[str(f)].dataset
            s.figure(
                partial(plot.effect_distributions, node["pmf"], node),
                inputs.out,
                f"main_effect_{f}{view.tag}",
                f"{view.label}Main-effect distributions of {f}.",
            )


def _interaction_parts(s: Section, inputs: ReportInputs, view: View, dec: xr.DataTree) -> None:
    """The ``by`` x ``second`` interaction: heatmap (in-group cells marked), aggregate vs factorial."""
    by, second, origin = inputs.by, inputs.second, inputs.origin
    try:
        node = interaction_node(dec, by, second)
    except DesignError:
        return
    ingroup = None
    if origin:
        ingroup = xr.DataArray(
            [[origin.get(str(m)) == str(t) for t in node[second].values] for m in node[by].values],
            dims=(by, second),
            coords={by: node[by], second: node[second]},
        )
    s.figure(
        lambda: plot.interaction_heatmap(
            node["E"], node["SD"], row=second, col=by, ingroup=ingroup
        ),
        inputs.out,
        f"interaction_{by}_{second}{view.tag}",
        f"{view.label}{by} × {second} interaction (E ± SD).",
    )
    s.table(
        aggregate_vs_factorial(dec, row=second, col=by, country_of_origin=origin),
        inputs.out,
        f"aggregate_vs_factorial{view.tag}",
        f"{view.label}Aggregate ({second} main effect, panel A) vs factorial ({by} × {second} "
        "interaction, panel B). reversal: sign opposite to the aggregate; "
        "ingroup: the model's own country.",
        index=False,
    )


def _contrast_parts(s: Section, inputs: ReportInputs, view: View) -> None:
    """Pairwise contrasts between the levels of ``second`` (at most 8 levels)."""
    second = inputs.second
    table = contrast_table(view.data, second, max_levels=8)
    if table.empty:
        return
    s.table(
        table,
        inputs.out,
        f"contrasts_{second}{view.tag}",
        f"{view.label}Pairwise contrasts between levels of {second}.",
        index=False,
    )


def _trend_parts(s: Section, inputs: ReportInputs, view: View) -> None:
    """Per-unit trends over the factors with a numeric coordinate (none: no table)."""
    table = trend_table(view.data, inputs.factors)
    if table.empty:
        return
    s.table(
        table,
        inputs.out,
        f"trends{view.tag}",
        f"{view.label}Per-unit trend of the composite over each factor with a numeric "
        "coordinate (paired adjacent-level differences divided by the spacing, "
        "length-weighted; E is the secant slope of the marginal means).",
        index=False,
    )
