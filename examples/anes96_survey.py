"""ANES 1996 as fielded: five questions, each with its own options, on the offline models.

Runs the built-in experiment ``anes96_survey`` (2 offline models x party (3) x education
(2) personas x 5 items: the three liberal-conservative placements with "Don't know",
days of TV news in the past week (0..7) and the presidential vote (Clinton or Dole,
nominal)), reads the 944 respondents of ``statsmodels.datasets.anes96`` offline with each
item's own codes, and writes into ``anes96-survey/``:

* ``results.nc`` -- the exact model PMFs, each item over its own points, and the
  placements' ``nonsubstantive_mass`` ("Don't know");
* ``respondents.csv`` and ``human.nc`` -- the human side;
* ``alignment.nc`` -- the alignment metrics by model x persona x item (the vote without
  W1 and representativeness: it has no order); ``summary.txt``;
* ``report/`` -- ``xlikert report results.nc --human respondents.csv``.

    python examples/anes96_survey.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import xlikert as xl
from xlikert.collect import collect
from xlikert.datasets import ANES96_SURVEY_ITEMS, anes96_respondents
from xlikert.design import load_experiment, load_instrument
from xlikert.report import write_report


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exp = load_experiment("anes96_survey")
    ds = collect(exp.build_prompts(), exp.models, out / "results.nc", progress=True)

    people = anes96_respondents()
    people[[*ANES96_SURVEY_ITEMS, "party", "education"]].to_csv(
        out / "respondents.csv", index=False
    )
    survey = load_instrument("anes96_survey")
    # each item's scale, and the placements' "Don't know" (code 8; counted apart, the
    # extract holds none), from the instrument
    human = xl.human_pmf(
        people, list(ANES96_SURVEY_ITEMS), instrument=survey, by=["party", "education"]
    )
    human.to_netcdf(out / "human.nc")
    a = xl.alignment(ds, human)
    a.to_netcdf(out / "alignment.nc")
    dk = ds.nonsubstantive_mass.sel(option="Don't know", item=["selfLR", "ClinLR", "DoleLR"])
    text = "\n\n".join(
        [
            "Alignment by model x persona x item (estimate):",
            a.estimate.to_series().unstack("metric").round(3).to_string(),
            "Model's 'Don't know' mass on the placements:",
            dk.to_series().unstack("item").round(3).to_string(),
        ]
    )
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    print("report:", write_report(ds, out / "report", human=out / "respondents.csv"))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "anes96-survey"))
