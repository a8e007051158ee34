"""Section "Individual respondents": the model's exact PMF for each person, scored
against the answer that person gave (:func:`xlikert.analysis.individual.individual_summary`).

Only for results with a ``respondent`` factor (one persona per row of a survey table)
and a table of the respondents' answers (``write_report(respondents=...)``,
``xlikert report --respondent-answers FILE``). Per item (and per level of the other
factors): the mean probability of the actual answer, log score, ranked probability
score, Brier score and mode accuracy over the respondents, each with the standard
error of a mean over respondents; then the skill against the population's marginal
PMF, a uniform answer and, with ``persona_results``, the group persona.
The model's side is exact; the SEs are the humans' sampling error.
"""

from __future__ import annotations

from collections.abc import Hashable

import pandas as pd
import xarray as xr

from ...analysis.individual import INDIVIDUAL_SCORES
from ..inputs import RESPONDENT_COLUMN, ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["individual_respondents_section"]


def individual_respondents_section(inputs: ReportInputs) -> Section | None:
    """Individual scores per item with SEs and skill scores; ``None`` without a
    ``respondent`` factor or without the respondents' answers."""
    summary, answers = inputs.individual, inputs.respondents
    if summary is None or answers is None:
        return None
    lead = [d for d in summary["estimate"].dims if d not in ("item", "metric")]
    metrics = list(INDIVIDUAL_SCORES)
    s = Section("Individual respondents")
    n_people = inputs.ds.sizes[RESPONDENT_COLUMN]
    s.text(
        f"The answers of the {n_people} respondents of the results (the answers table has "
        f"{len(answers)} rows; all of them make the population baseline) are each "
        "scored against the model's exact PMF for that person's persona: the probability "
        "of the actual answer, its log (log score), the ranked probability score of an "
        "ordinal item (RPS; conditional on a substantive answer), the Brier score and "
        "whether the model's mode is the answer (tied modes share the credit). "
        "A non-substantive answer is scored against the model's non-substantive mass. "
        "The model's side is exact; the SEs (sd/√n over the respondents who answered) are "
        "the humans' sampling error."
        + (f" Rows by {', '.join(md(str(d)) for d in lead)}." if lead else "")
    )
    frame = summary[["estimate", "se"]].to_dataframe().reset_index()
    wide = frame.pivot_table(
        index=[*lead, "item"], columns="metric", values=["estimate", "se"], sort=False
    )
    n = summary["n"].sel(metric="answer_probability").to_series().rename("n")
    table = pd.DataFrame(index=wide.index)
    table["n"] = n.reindex(table.index.get_level_values("item")).to_numpy()
    for m in metrics:
        table[m] = wide[("estimate", m)]
        table[f"{m}_se"] = wide[("se", m)]
    s.table(
        table.reset_index(),
        inputs.out,
        "individual_scores",
        "Mean individual score per item over the respondents (n: respondents who "
        "answered), each with its SE: answer probability, log score, RPS, Brier score, "
        "mode accuracy.",
        digits=3,
        index=False,
    )
    _skill_table(s, inputs, summary, lead, metrics)
    return s


def _skill_table(
    s: Section, inputs: ReportInputs, summary: xr.Dataset, lead: list[Hashable], metrics: list[str]
) -> None:
    """The skill against each baseline, with SEs, and the respondents the group persona
    baseline left out."""
    baselines = [str(b) for b in summary["baseline"].values]
    frame = summary[["skill", "skill_se"]].to_dataframe().reset_index()
    wide = frame.pivot_table(
        index=[*lead, "item", "baseline"], columns="metric", values=["skill", "skill_se"],
        sort=False,
    )  # fmt: skip
    skill = pd.DataFrame(index=wide.index)
    for m in metrics:
        skill[m] = wide[("skill", m)]
        skill[f"{m}_se"] = wide[("skill_se", m)]
    s.text(
        "Skill against each baseline, (M − B)/(P − B) over the same respondents (M the "
        "model's mean score, B the baseline's, P the perfect score; 1 − L/L_b for a loss), "
        "with the delta-method SE of the paired means. Baselines: "
        + ", ".join(md_code(b) for b in baselines)
        + " (population: the shares of the answers in the whole table; uniform: every "
        "answer of the item equally likely"
        + (
            f"; group persona: the group personas' results read at each respondent's "
            f"{', '.join(md(c) for c in inputs.persona)}"
            if "group_persona" in baselines
            else ""
        )
        + ")."
    )
    if "group_persona_left_out" in summary.attrs:
        s.text(md(str(summary.attrs["group_persona_left_out"])) + ": their group persona "
               "skill is over the other respondents.")  # fmt: skip
    s.table(
        skill.reset_index(),
        inputs.out,
        "individual_skill",
        "Skill of the individual scores per item against each baseline, with SEs "
        "(0: no better than the baseline, 1: perfect).",
        digits=3,
        index=False,
    )
