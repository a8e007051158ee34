"""ANES 1996 one respondent at a time: a persona per person, exact individual scores.

Draws a seeded sample of the 944 respondents of ``statsmodels.datasets.anes96``
(offline), gives each a persona from their age, party identification, education and
household income (value maps render the codes as words; no item asked is used), reads
the five questions of the built-in ``anes96_survey`` instrument (the three
liberal-conservative placements with "Don't know", days of TV news, the vote) for every
person on SmolLM2-135M-Instruct through the real collection, and also the six group
personas (party x education) of the ``anes96_survey`` experiment. Then:

* ``individual.nc`` -- each person's answer scored against the model's exact PMF for
  them: the probability of the answer and its log, the RPS (ordinal items), the Brier
  score and whether the mode is the answer;
* ``summary.nc`` -- the scores averaged over the people per item with SEs (the humans'
  sampling error; the model's side is exact), and skill against the population's
  marginal, the group persona and a uniform answer;
* ``ppi.nc`` -- the share of Dole votes, prediction-powered: half the people drawn
  answer, the others only have the model's exact probability (a demonstration of the
  mechanics on a handful; the interval narrows only where the model predicts people);
* ``personas.json`` -- the template, the columns used, the draw; ``summary.txt``.

    python examples/anes96_respondents.py [OUT_DIR] [N_PEOPLE]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from xlikert.analysis.individual import individual_scores, individual_summary
from xlikert.analysis.ppi import prediction_powered
from xlikert.collect import collect
from xlikert.datasets import (
    ANES96_PERSONA,
    ANES96_PERSONA_VALUES,
    ANES96_SURVEY_ITEMS,
    anes96_respondents,
)
from xlikert.design import experiment_from_dict, load_experiment
from xlikert.design.respondents import respondent_personas

MODEL = {"name": "SmolLM2-135M-Instruct", "source": "smollm2-135m-instruct"}
PPI_COLUMNS = ["estimate", "lower", "upper", "human_estimate", "human_lower", "human_upper",
               "effective_n", "ppi_lambda", "ppi_lambda_unclipped"]  # fmt: skip
SYSTEM = (
    "{respondent} You are a respondent in the 1996 American National Election Study. "
    "Answer each question with ONLY the number of one of its options."
)


def main(out: Path, n_people: int = 12, seed: int = 1996) -> None:
    out.mkdir(parents=True, exist_ok=True)
    people = anes96_respondents()
    people.index = people.index.astype(str)
    personas = respondent_personas(
        people,
        ANES96_PERSONA,
        values=ANES96_PERSONA_VALUES,
        items=ANES96_SURVEY_ITEMS,
        sample=n_people,
        seed=seed,
    )
    (out / "personas.json").write_text(json.dumps(personas.record(), indent=1) + "\n")
    exp = experiment_from_dict({
        "experiment": {"name": "anes96_respondents", "instrument": "anes96_survey",
                       "system": SYSTEM, "user": "{item}\n{options}\nAnswer:"},
        "factors": {"respondent": personas.factor_spec()},
        "models": [MODEL],
    })  # fmt: skip
    ds = collect(exp.build_prompts(), [MODEL], out / "respondents.nc", progress=True)
    groups = collect(load_experiment("anes96_survey").build_prompts(), [MODEL], out / "groups.nc")
    scores = individual_scores(ds, people)
    scores.to_netcdf(out / "individual.nc")
    summary = individual_summary(ds, people, persona_results=groups, persona=["party", "education"])
    summary.to_netcdf(out / "summary.nc")
    rng = np.random.default_rng(seed)
    labeled = sorted(rng.choice(personas.levels, size=n_people // 2, replace=False).tolist())
    ppi = prediction_powered(ds, people, "vote", category=1, labeled=labeled)
    ppi.to_netcdf(out / "ppi.nc")
    est = summary.estimate.sel(model=MODEL["name"]).to_pandas()
    skill = summary.skill.sel(model=MODEL["name"], metric=["log_score", "rps", "brier"])
    text = "\n\n".join(
        [
            f"{n_people} respondents drawn with seed {seed} from {len(people)}; persona "
            f"columns {list(personas.columns)}; e.g. {next(iter(personas.personas.values()))!r}",
            "Mean individual scores per item (model side exact; SE over the people):",
            est.round(3).to_string(),
            "Skill against the baselines (1 - L / L_baseline):",
            skill.to_series().unstack("metric").round(3).to_string(),
            f"Dole share, prediction-powered ({ppi.attrs['n_labeled']} answered, "
            f"{ppi.attrs['n_unlabeled']} predicted):",
            ppi[PPI_COLUMNS].to_pandas().round(3).to_string(),  # one model: scalars
        ]
    )
    (out / "summary.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main(
        Path(sys.argv[1] if len(sys.argv) > 1 else "anes96-respondents"),
        int(sys.argv[2]) if len(sys.argv) > 2 else 12,
    )
