"""A whole interview on the real SmolLM2-135M-Instruct: a questionnaire's items in one
conversation, each read over its own answers.

``trust`` 1..4 answered with letters, its "Don't know" and "Refused" lettered E and F
(:mod:`support.survey`), then a nominal vote 1..3 answered with its codes: the history
tree branches on trust's six answers, each written into the conversation with its own
letter. Every history read, and the items' PMFs, valid and non-substantive masses mixed
over them, equal plain forward passes of each whole conversation read here by the
one-token rule (a token spelling the label, one leading space allowed, or a bare space
then it; as :func:`support.forward.one_token`), within 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from support.forward import Reader
from support.survey import SURVEY, survey_experiment

from xlikert.collect.context import administer, battery_from_prompts
from xlikert.collect.options import CollectOptions

#: The survey's ``trust`` item, then a nominal vote answered with its codes.
INSTRUMENT = (
    SURVEY.split('[[items]]\nid = "self"')[0]
    + '[[items]]\nid = "trust"'
    + SURVEY.split('[[items]]\nid = "trust"')[1].split("[[items]]")[0]
    + """[[items]]
id = "vote"
template = "Whom did you vote for?"
nominal = true
[items.scale]
min = 1
max = 3
anchors = { 1 = "Clinton", 2 = "Dole", 3 = "Perot" }
"""
)


@pytest.fixture(scope="module")
def interview(smollm2_folder, tmp_path_factory):
    import xlikert.collect.backends.transformers as backend

    exp = survey_experiment(tmp_path_factory.mktemp("exp"), instrument=INSTRUMENT)
    prompts = exp.build_prompts().isel(party=0)
    battery = battery_from_prompts(prompts)
    opts = CollectOptions(
        scale=tuple(int(y) for y in prompts.score.values),
        nonsubstantive=tuple(str(o) for o in prompts.option.values),
    )
    model = backend.open({"name": "smol", "source": str(smollm2_folder)}, opts)
    try:
        yield battery, administer(model, battery)
    finally:
        model.close()


def test_every_history_equals_a_plain_pass_of_its_conversation(smollm2_folder, interview):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    battery, res = interview
    assert battery.items == ("trust", "vote") and battery.options == ("Don't know", "Refused")
    assert battery.answers[0] == ("A", "B", "C", "D", "E", "F")
    tok = AutoTokenizer.from_pretrained(smollm2_folder)
    model = AutoModelForCausalLM.from_pretrained(smollm2_folder, dtype=torch.float32).eval()
    special = set(tok.all_special_ids)
    vocab = {i: t.replace("Ġ", " ") for t, i in tok.get_vocab().items() if i not in special}
    space = next(i for i, t in vocab.items() if t == " ")
    spelled = {x: [i for i, t in vocab.items() if t in (x, " " + x)]
               for row in battery.answers for x in row if x}  # fmt: skip
    bare = {x: [i for i, t in vocab.items() if t == x] for x in spelled}
    S = len(battery.scores)
    tree = res.tree
    assert res.tol_met and res.passes == tree.size == 1 + 6  # trust's six answers
    pmf, valid, options = np.zeros((2, S)), np.zeros(2), np.zeros(2)
    first = None
    for n, path in enumerate(tree.paths):
        h = [int(a) for a in path if a >= 0]
        msgs = [{"role": "system", "content": battery.system}]
        for q, a in battery.turns(h):  # the answer's own letter
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        msgs.append({"role": "user", "content": battery.questions[len(h)]})
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False).input_ids
        row = battery.answers[len(h)]
        labels = {a: x for a, x in enumerate(row) if x}
        p0, p1 = Reader(model, ids).after([space])
        mass = {a: p0[spelled[x]].sum() + p0[space] * p1[bare[x]].sum() for a, x in labels.items()}
        points = np.array([mass.get(a, 0.0) for a in range(S)])
        ns = np.array([mass.get(S + o, np.nan) for o in range(2)])
        where = f"history {battery.turns(h)}"
        np.testing.assert_allclose(tree.valid_mass[n], points.sum(), atol=1e-5, err_msg=where)
        np.testing.assert_allclose(tree.pmf[n], points / points.sum(), atol=1e-5, err_msg=where)
        np.testing.assert_allclose(tree.nonsubstantive_mass[n], ns, atol=1e-5, err_msg=where)
        # mixed by hand: P(h) is trust's answer's share of the answers given
        if not h:
            first = mass
            p = 1.0
        else:
            p = first[h[0]] / sum(first.values())
        pmf[len(h)] += p * points / points.sum()
        valid[len(h)] += p * points.sum()
        options[len(h)] += p * np.nansum(ns)
    m = res.marginals()
    np.testing.assert_allclose(m["pmf"], pmf, atol=1e-5)
    np.testing.assert_allclose(m["valid_mass"], valid, atol=1e-5)
    np.testing.assert_allclose(np.nansum(m["nonsubstantive_mass"][0]), options[0], atol=1e-5)
    assert np.isnan(m["nonsubstantive_mass"][1]).all()  # the vote offers no option
    # the numbers are not all zero: the test can fail
    assert min(first[4], first[5]) > 1e-8 and valid.min() > 1e-3
