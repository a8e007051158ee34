"""Sequential administration on the real SmolLM2-135M-Instruct: CETSCALE items 1-3 in one
conversation, every history's PMF against a plain forward pass of its whole conversation."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from xlikert.collect.context import administer, battery_from_prompts
from xlikert.collect.options import CollectOptions
from xlikert.design import load_experiment

SPEC = {"name": "smol", "source": "smollm2-135m-instruct"}


@pytest.fixture(scope="module")
def smol():
    import xlikert.collect.backends.transformers as backend

    return backend.open(SPEC, CollectOptions(scale=range(1, 8)))


@pytest.fixture(scope="module")
def battery():
    prompts = load_experiment("demo").build_prompts().sel(target="USA").isel(item=[0, 1, 2])
    return battery_from_prompts(prompts)


@pytest.fixture(scope="module")
def exact(smol, battery):
    return administer(smol, battery)


def test_every_history_equals_a_plain_pass_of_its_conversation(smol, battery, exact):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xlikert.collect.zoo import model_folder

    folder = model_folder(SPEC)[0]
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    vocab = tok.get_vocab()
    valid = {i: int(t[-1]) for t, i in vocab.items() if re.fullmatch(r"[Ġ▁ ]?[1-7]", t)}
    bare = {vocab[str(y)]: y for y in range(1, 8)}
    space = vocab["Ġ"]
    assert exact.passes == 1 + 7 + 49 and exact.tol_met
    assert smol.scorer.prefix_cache and "tree" in smol.lm.cache_checked
    for n, path in enumerate(exact.tree.paths):
        h = [int(a) for a in path if a >= 0]
        msgs = [{"role": "system", "content": battery.system}]
        for q, a in battery.turns(h):
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        msgs.append({"role": "user", "content": battery.questions[len(h)]})
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False).input_ids
        with torch.no_grad():  # the next token after ids, and after ids + the space
            z = model(torch.tensor([[*ids, space]])).logits[0, -2:].double()
            p0, p1 = torch.softmax(z, -1).numpy()
        mass = np.zeros(7)
        for i, y in valid.items():
            mass[y - 1] += p0[i]
        for i, y in bare.items():
            mass[y - 1] += p0[space] * p1[i]
        np.testing.assert_allclose(exact.tree.pmf[n], mass / mass.sum(), atol=1e-5, err_msg=h)
        assert abs(exact.tree.valid_mass[n] - mass.sum()) <= 1e-5


def test_pruned_runs_meet_their_bounds_and_context_moves_the_answers(smol, battery, exact):
    truth = exact.marginals()["pmf"]
    res = administer(smol, battery, tol=1e-2, batch=4)  # several tol: tests/collect
    m = res.marginals()
    assert res.tol_met and (m["error"] <= 1e-2).all() and res.passes < exact.passes
    assert (np.abs(m["pmf"] - truth) <= m["error"][:, None] + 1e-5).all()
    iso = smol.score([(battery.system, q) for q in battery.questions]).data["pmf"]
    np.testing.assert_allclose(truth[0], iso[0], atol=1e-5)  # item 1 has no history
    assert np.abs(truth[1:] - iso[1:]).max() > 1e-3  # earlier answers move the later items
