"""Section "Which reading is closest to people": each elicitation level set against the
same respondents (:func:`xlikert.validity`).

Only with human data (``--human``) and an ``elicitation`` factor of two levels or more.
One table: per condition (model, and the factors or groups both sides have) and level,
each distance's mean over the items with its SE bound, and, with a ``respondent``
factor and the respondents' answers, each individual score's skill over the population
marginal with its SE; the closest level by W1 and how sure. One figure: the W1 of each
level with its bars (:func:`xlikert.plot.reading_distances`).
"""

from __future__ import annotations

import pandas as pd

from ... import plot
from ...analysis.validity import DISTANCES, RESPONDENT_SCORES, validity
from ...core.dims import ELICITATION_DIM
from ...core.io import decode_attrs
from ..inputs import RESPONDENT_COLUMN, ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code
from .human_data import load_human

__all__ = ["closest_reading_section"]

_SHORT = {"wasserstein": "W1", "total_variation": "TV", "jensen_shannon": "JS",
          "log_score": "log score", "rps": "RPS", "brier": "Brier"}  # fmt: skip


def _table(v, levels_dim: str) -> pd.DataFrame:
    """One row per condition and level: distances, skills, the closest level by W1."""
    parts = {}
    for m in DISTANCES:
        parts[_SHORT[m]] = v["overall"].sel(metric=m, drop=True)
        parts[f"{_SHORT[m]} SE"] = v["overall_se"].sel(metric=m, drop=True)
    if "skill" in v:
        for m in RESPONDENT_SCORES:
            parts[f"{_SHORT[m]} skill"] = v["skill"].sel(metric=m, drop=True)
            parts[f"{_SHORT[m]} skill SE"] = v["skill_se"].sel(metric=m, drop=True)
    dims = parts["W1"].dims
    parts = {k: x.broadcast_like(parts["W1"]).transpose(*dims) for k, x in parts.items()}
    frame = pd.DataFrame({k: x.to_series() for k, x in parts.items()})
    best = v["closest"].sel(metric="wasserstein", drop=True)
    is_best = (v[levels_dim] == best).transpose(*dims)
    sure = v["closest_probability"].sel(metric="wasserstein", drop=True).where(is_best)
    frame["closest by W1"] = is_best.to_series().map({True: "yes", False: ""})
    frame["P(closest)"] = sure.transpose(*dims).to_series()
    return frame.reset_index()


def closest_reading_section(inputs: ReportInputs) -> Section | None:
    """The elicitation levels against the people; ``None`` without human data or without
    two elicitation levels."""
    ds = inputs.ds
    if inputs.human is None or ELICITATION_DIM not in ds["pmf"].dims:
        return None
    if ds.sizes[ELICITATION_DIM] < 2:
        return None
    human, how = load_human(inputs.human, ds["pmf"])
    human = decode_attrs(human)
    have = {str(i) for i in human["item"].values}
    items = [str(i) for i in ds["item"].values if str(i) in have]
    if not items:
        return None
    left = [str(i) for i in ds["item"].values if str(i) not in have]
    ds = ds.sel(item=items) if left else ds
    ds, empty = _levels_with_pmf(ds)
    if ds.sizes[ELICITATION_DIM] < 2:
        return None
    answers = inputs.respondents if RESPONDENT_COLUMN in inputs.factors else None
    v = validity(ds, human, answers=answers)
    s = Section("Which reading is closest to people")
    s.text(
        f"Each level of {md_code(ELICITATION_DIM)} is set against the same people ({how}): "
        "the W1, TV and JS (bits) of the model PMF to the human PMF, averaged over the items "
        "every level answers. SE: the humans' sampling error by the delta method, an upper "
        "bound for the mean over items. The closest level has the smallest W1; P(closest) is "
        "Φ of its lead over the runner-up in SEs of their paired difference (both read "
        "against the same people)."
        + (
            " With the respondents' answers, the skill of each level's individual scores over "
            "the population marginal, with paired SEs over the same people."
            if answers is not None
            else ""
        )
        + _unanswered(v)
        + (
            " Levels whose replies wrote no answer in any cell, counted and left out: "
            + ", ".join(f"{md_code(lv)} {n}" for lv, n in empty)
            + "."
            if empty
            else ""
        )
        + (
            f" Items without human data, left out: {', '.join(md_code(i) for i in left)}."
            if left
            else ""
        )
    )
    s.table(
        _table(v, ELICITATION_DIM), inputs.out, "closest_reading",
        "Each reading's distance to the people (mean over items, SE bound) and, where "
        "given, its skill over the population marginal; the closest level by W1.",
        digits=3, index=False,
    )  # fmt: skip
    s.figure(
        lambda: plot.reading_distances(v), inputs.out, "closest_reading",
        "W1 to the people per reading, ±1.96 SE (bound); filled: the closest level.",
    )  # fmt: skip
    return s


def _levels_with_pmf(ds):
    """``ds`` without the elicitation levels that have no PMF in any cell (a reply level
    whose every reply wrote no answer: nothing to set against the people, and it would
    leave no item that every level answers), and each such level's name and cell count."""
    answered = ds["pmf"].notnull().any("score")
    has = answered.any([d for d in answered.dims if d != ELICITATION_DIM])
    cells = answered.size // answered.sizes[ELICITATION_DIM]
    empty = [(str(lv), cells) for lv, h in zip(has[ELICITATION_DIM].values, has.values,
                                               strict=True) if not h]  # fmt: skip
    if not empty:
        return ds, empty
    gone = {lv for lv, _ in empty}
    keep = [lv for lv in ds[ELICITATION_DIM].values if str(lv) not in gone]
    return ds.sel({ELICITATION_DIM: keep}), empty


def _unanswered(v) -> str:
    cells = v["cells_unanswered"].sum([d for d in v["cells_unanswered"].dims
                                       if d != ELICITATION_DIM])  # fmt: skip
    parts = [f"`{lv}` {int(n)}" for lv, n in zip(cells[ELICITATION_DIM].values, cells.values,
                                                 strict=True) if n]  # fmt: skip
    if not parts:
        return ""
    return (
        " Cells whose reply wrote no answer have no PMF: counted, not compared ("
        + ", ".join(parts)
        + "); the means are over the items every level answers."
    )
