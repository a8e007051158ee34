"""Section "Construct": composite-score PMFs, the human baseline and the distributional ANOVA."""

from __future__ import annotations

import pandas as pd
import xarray as xr

from ... import plot
from ...analysis.construct import SCORING
from ...analysis.human import human_vs_llm
from ...core.dims import SUBSCALE_DIM
from ...datasets import human_baseline
from ..inputs import ReportInputs
from ..layout import paper_layout
from ..page import Section
from .per_subscale import composite_parts, views

__all__ = ["construct_section"]


def construct_section(inputs: ReportInputs) -> Section | None:
    """Composite PMFs, human samples where the instrument has a baseline, effects, and
    the parts of every composite (:func:`~.per_subscale.composite_parts`); ``None`` where
    the instrument defines no composite (:attr:`~..inputs.ReportInputs.no_composite`: the
    design section says why)."""
    if inputs.no_composite:
        return None
    s = Section("Construct: composite scores and distributional ANOVA")
    if inputs.nominal:
        s.text(inputs.nominal_note("the composite scores and their effects"))
    per_subscale = SUBSCALE_DIM in inputs.composite.dims
    second = inputs.second
    s.figure(
        lambda: plot.composite_pmfs(inputs.composite, facet=inputs.by, hue=second),
        inputs.out,
        "composite_pmfs",
        f"Exact composite-score PMFs by {inputs.by}"
        + (f", {second} as colour" if second else "")
        + (" (small multiples: one row per subscale)" if per_subscale else "")
        + ".",
    )
    base = _baseline_for(inputs.ds)
    if base is not None:
        _human_baseline_parts(s, inputs, base)
    s.table(
        paper_layout(inputs.effects),
        inputs.out,
        "effects",
        "Grand mean, main effects and interactions of the composite score (E, SD, SNR, dPD"
        + (", per subscale" if per_subscale else "")
        + f"). {SCORING['both']}.",
        index=False,
    )
    for view in views(inputs.composite):
        composite_parts(s, inputs, view)
    return s


def _baseline_for(ds: xr.Dataset) -> pd.DataFrame | None:
    """The published human samples of the file's instrument, if it has them (CETSCALE)."""
    name = str(ds.attrs.get("instrument", ""))
    if not name:
        return None
    if isinstance(ds.attrs.get("instrument"), str):
        key = name.split()[0].split("/")[-1].removesuffix(".toml")
    else:  # pragma: no cover
        return None
    try:
        base = human_baseline(key)
    except KeyError:
        return None
    scores = ds["pmf"]["score"].values
    # the baseline is on the 17-item, 1..7 composite
    if ds.sizes.get("item") != 17 or scores.min() != 1 or scores.max() != 7:
        return None
    return base


def _human_baseline_parts(s: Section, inputs: ReportInputs, base: pd.DataFrame) -> None:
    """Human samples vs each ``by`` level's composite, at the level of ``second`` that is the
    samples' country where there is one (the paper: target = USA, Shimp & Sharma's US
    respondents)."""
    by, second = inputs.by, inputs.second
    cond = {}
    countries = set(base["country"].astype(str)) if "country" in base else set()
    if second is not None and len(countries) == 1:
        (country,) = countries
        if country in [str(v) for v in inputs.pmf[second].values]:
            cond = {second: country}
    hv = human_vs_llm(inputs.pmf, base, by=by, condition=cond)
    where = "".join(f" at {k} = {v}" for k, v in cond.items())
    s.table(
        hv,
        inputs.out,
        "human_vs_llm",
        f"Human samples (Shimp & Sharma 1987) vs each {by}'s composite{where}: E and SD.",
        index=False,
    )
    s.figure(
        lambda: plot.human_vs_llm(hv),
        inputs.out,
        "human_vs_llm",
        f"Human samples vs LLMs{where}. Human SD: spread across respondents; "
        "LLM SD: dispersion of one model's PMF (not commensurable).",
    )
