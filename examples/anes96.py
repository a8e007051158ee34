"""ANES 1996 silicon sample: whose liberal-conservative placements do the offline models resemble?

Runs the built-in experiment ``anes96`` (2 offline models x party (3) x education (2)
personas x 3 items = 36 forward passes; a few minutes on a laptop CPU, most of it loading
the models), reads the 944 respondents of ``statsmodels.datasets.anes96`` offline, and
writes into ``anes96-example/``:

* ``results.nc`` -- the exact model PMFs; ``respondents.csv`` and ``human.nc`` -- the human side;
* ``alignment.nc`` -- every alignment metric by model x persona x item, with SE, interval
  and noise ceiling; ``summary.txt`` -- the tables below;
* ``report/`` -- ``xlikert report results.nc --human respondents.csv`` (figures included).

    python examples/anes96.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import xlikert as xl
from xlikert.collect import collect
from xlikert.datasets import ANES96_ITEMS, anes96_respondents
from xlikert.design import load_experiment, load_instrument
from xlikert.report import write_report


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exp = load_experiment("anes96")
    ds = collect(exp.build_prompts(), exp.models, out / "results.nc", progress=True)

    people = anes96_respondents()
    people[[*ANES96_ITEMS, "party", "education", "age"]].to_csv(
        out / "respondents.csv", index=False
    )
    human = xl.human_pmf(
        people,
        list(ANES96_ITEMS),
        instrument=load_instrument("anes96"),
        by=["party", "education"],
    )
    human.to_netcdf(out / "human.nc")

    # per persona (model x party x education x item)
    a = xl.alignment(ds, human)
    a.to_netcdf(out / "alignment.nc")
    rep = a.sel(metric="representativeness").reset_coords(drop=True)
    cells = rep[["estimate", "lower", "upper", "ceiling"]].to_dataframe()
    # the population: personas mixed with the respondents' counts vs all respondents
    pop = xl.alignment(xl.silicon_population(ds, human), xl.human_marginal(human))
    pop_rep = pop.sel(metric="representativeness").reset_coords(drop=True)
    pop_rep = pop_rep[["estimate", "lower", "upper", "ceiling"]]
    # party subgroups: personas mixed over education vs each party's respondents
    party = (
        xl.alignment(
            xl.silicon_population(ds, human, dim="education"),
            xl.human_marginal(human, dim="education"),
        )
        .sel(metric="representativeness")
        .reset_coords(drop=True)[["estimate", "lower", "upper", "ceiling"]]
    )
    text = "\n\n".join(
        [
            "Representativeness 1 - W1/6 (95% delta-method interval; ceiling: two human samples)",
            "Population (silicon population vs all 944 respondents):",
            pop_rep.to_dataframe().round(3).to_string(),
            "By party (personas mixed over education with the respondents' counts):",
            party.to_dataframe().round(3).to_string(),
            "By persona (party x education):",
            cells.round(3).to_string(),
        ]
    )
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    print("report:", write_report(ds, out / "report", human=out / "respondents.csv"))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "anes96-example"))
