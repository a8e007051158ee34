"""Section "Constraint: failure rate": the probability outside the valid answers."""

from __future__ import annotations

from collections.abc import Hashable

import pandas as pd
import xarray as xr

from ... import plot
from ...analysis.constraint import failure_rate, failure_summary, nonsubstantive_rate
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_escape as md

__all__ = ["constraint_section"]


def _nonsubstantive_table(ds: xr.Dataset, by: Hashable) -> pd.DataFrame:
    """Non-substantive answers by ``by``, item and option: the mass (mean, max over the other
    factors' conditions) and the rate among the answers (mean); items that do not offer an
    option have no row."""
    frame = xr.Dataset(
        {"mass": ds["nonsubstantive_mass"], "rate": nonsubstantive_rate(ds)}
    ).to_dataframe()[["mass", "rate"]]
    frame = frame.dropna(subset=["mass"]).reset_index()
    keys = [by, "item", "option"]
    out = frame.groupby(keys, sort=False).agg(
        mass_mean=("mass", "mean"), mass_max=("mass", "max"), rate_mean=("rate", "mean")
    )
    return out.reset_index()


def constraint_section(inputs: ReportInputs) -> Section:
    """Failure rate per condition and item (figure, summary by ``by``) and each model's rule."""
    s = Section("Constraint: failure rate")
    ds = inputs.answered  # an elicitation level with replies that write no answer: left out
    left = bool(inputs.unanswered_levels)
    if "valid_mass" in ds:
        fr = failure_rate(ds)
        s.figure(
            lambda: plot.failure_rate(fr, by=inputs.by),
            inputs.out,
            "failure_rate",
            "Failure rate (probability outside the valid answers) per condition and item, "
            f"by {inputs.by}.",
        )
        s.table(
            failure_summary(fr, inputs.by),
            inputs.out,
            "failure_rate",
            f"Failure rate by {inputs.by}: mean, SD and max over conditions and items.",
            digits=4,
        )
        if "nonsubstantive_mass" in ds:
            _nonsubstantive_parts(s, inputs)
        if "reply_answered" in ds or "no_answer_mass" in ds:
            s.text(
                "The failure rate is the probability outside the valid answers at the token "
                "where each cell's answer is read. What the model would write is in the "
                "section **Elicitation**: its greedy replies without an answer, and the "
                'probability that a sampled reply writes no answer (the own-words "no '
                'answer" mass).' + (" That section names the level left out here." if left else "")
            )
    else:
        s.text("The results hold no `valid_mass`: the failure rate cannot be reported.")
    rules = {
        str(name): str(info["answers"]).split(":")[0]
        for name, info in (inputs.ds.attrs.get("models") or {}).items()
        if isinstance(info, dict) and info.get("answers")
    }
    if rules:
        s.text(
            "Valid answers (the rule per model; the full text is in the file's "
            "`attrs['models'][name]['answers']`): "
            + "; ".join(f"{md(name)}: {md(rule)}" for name, rule in rules.items())
            + "."
        )
    return s


def _nonsubstantive_parts(s: Section, inputs: ReportInputs) -> None:
    """The non-substantive answers ("Don't know", "Refused"): what the failure rate leaves out."""
    s.text(
        "Some items offer non-substantive answers (options "
        + ", ".join(md(o) for o in inputs.answered["option"].values)
        + "). Their exact mass is measured apart: the item PMFs are over the substantive "
        "options, and the failure rate is 1 − substantive − non-substantive mass. The rate is "
        "the option's share among the model's answers (failures left out), as a survey's is "
        "among the respondents who answered."
    )
    s.table(
        _nonsubstantive_table(inputs.answered, inputs.by),
        inputs.out,
        "nonsubstantive",
        f"Non-substantive answers by {inputs.by}, item and option: mass (mean and max over "
        "conditions) and rate among the answers (mean).",
        digits=4,
        index=False,
    )
