"""Sequential administration over word labels read by the labels' walk, on a tiny model.

The labels ("No", "Nay", "Yes") have more spellings than ``max_answer_positions`` lets a
reader list, so every history's answers are read by the certified walk
(:mod:`xlikert.collect.answers.walk`) from the conversation's kept cache. The check
enumerates every history itself: the chat template, one forward pass per spelling of
each label (the label's characters, or a bare space then them), the stop check, and
the histories mixed by hand. At ``answer_tol = 0`` the tree equals it; with a
tolerance or a pass budget that leaves the walks bounded, the exact values lie within
the stored certified bounds (READING_BOUND_RULE), which survive the Dataset.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_word_tiny  # noqa: E402

from xlikert.collect.context import (  # noqa: E402
    Battery,
    administer,
    history_tree,
    item_marginals,
    sequential_dataset,
)
from xlikert.collect.options import CollectOptions  # noqa: E402

LABELS = ("No", "Nay", "Yes")
BATTERY = Battery("Rate.", ("Tea?", "Coffee?", "Milk?"), LABELS)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return save_word_tiny(tmp_path_factory.mktemp("words") / "model", LABELS)


def open_words(folder: Path, **kw):
    import xlikert.collect.backends.transformers as backend

    opts = CollectOptions(scale=range(1, 4), answer_labels=LABELS, max_answer_positions=4, **kw)
    return backend.open({"name": "tiny", "source": str(folder)}, opts)


@functools.lru_cache(maxsize=1)
def plain_model(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    return tok, AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def label_masses(folder: Path, turns) -> np.ndarray:
    """Each label's probability after a conversation, written plainly: its spellings (the
    characters, or a bare space then them) times P(the next token does not go on with a
    letter, digit or '_' right away)."""
    tok, model = plain_model(folder)
    msgs = [{"role": "system", "content": BATTERY.system}]
    for q, a in turns:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": BATTERY.questions[len(turns)]})
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False).input_ids
    vocab, special = tok.get_vocab(), set(tok.all_special_ids)
    goes_on = [
        i
        for t, i in vocab.items()  # a leading marker is a space: it does not go on
        if i not in special and t[0] not in " ▁Ġ" and (t[0].isalnum() or t[0] == "_")
    ]
    out = np.zeros(len(LABELS))
    for k, label in enumerate(LABELS):
        chars = [vocab[c] for c in label]
        for spelling in (chars, [vocab[" "], *chars]):
            with torch.no_grad():
                z = model(torch.tensor([[*ids, *spelling]])).logits[0, len(ids) - 1 :].double()
            p = torch.softmax(z, -1).numpy()
            prob = np.prod([p[n, t] for n, t in enumerate(spelling)])
            out[k] += prob * (1.0 - p[len(spelling), goes_on].sum())
    return out


@pytest.fixture(scope="module")
def truth(folder):
    """Every history's label masses, and the items' PMFs, valid masses and the first two
    items' joint mixed over the histories by hand."""
    K, S = len(BATTERY.questions), len(LABELS)
    read = {}
    for j in range(K):
        for h in itertools.product(range(S), repeat=j):
            read[h] = label_masses(
                folder, [(BATTERY.questions[i], LABELS[a]) for i, a in enumerate(h)]
            )

    def prob(h) -> float:
        return float(np.prod([read[h[:i]][h[i]] / read[h[:i]].sum() for i in range(len(h))]))

    pmf, valid, joint = np.zeros((K, S)), np.zeros(K), np.zeros((S, S))
    for h, m in read.items():
        pmf[len(h)] += prob(h) * m / m.sum()
        valid[len(h)] += prob(h) * m.sum()
        if len(h) == 1:
            joint[h[0]] += prob(h) * m / m.sum()
    return {"read": read, "pmf": pmf, "valid_mass": valid, "joint": joint}


def test_the_walk_to_tol_0_equals_the_enumeration_history_by_history(folder, truth):
    model = open_words(folder, answer_tol=0.0)
    assert model.answers.sequences == () and model.walks_listing()  # only the walk reads it
    res = administer(model, BATTERY)
    assert res.tol_met and res.tree.complete and res.tree.answer_error is None
    assert model.walk_passes > res.passes  # several trie nodes a history
    for n, path in enumerate(res.tree.paths):
        m = truth["read"][tuple(int(a) for a in path if a >= 0)]
        np.testing.assert_allclose(res.tree.pmf[n], m / m.sum(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(res.tree.valid_mass[n], m.sum(), rtol=1e-4)
    marg = res.marginals()
    assert (truth["pmf"][:, 1:] > 1e-3).any()  # more than one label carries mass
    np.testing.assert_allclose(marg["pmf"], truth["pmf"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(marg["valid_mass"], truth["valid_mass"], rtol=1e-4)
    np.testing.assert_allclose(res.joints()["joint"][0, 1], truth["joint"], atol=1e-5)


@pytest.mark.parametrize(
    "kw",
    [{"answer_tol": 1e-2, "answer_max_passes": 12}, {"answer_tol": 0.0, "answer_max_passes": 5}],
)
def test_bounded_walks_keep_certified_bounds_into_the_tree(folder, truth, kw):
    model = open_words(folder, **kw)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        res = administer(model, BATTERY)
    eps = res.tree.answer_error
    assert eps is not None and np.nanmax(eps) > 0  # the walks stopped short of exact
    assert not res.tol_met and any("answer_tol" in str(w.message) for w in said)
    m, j = res.marginals(), res.joints()
    ex, vm = truth["pmf"], truth["valid_mass"]
    assert (m["error"] > 0).all()
    assert (m["pmf_lower"] <= ex + 1e-6).all() and (ex <= m["pmf_upper"] + 1e-6).all()
    assert (np.abs(m["pmf"] - ex) <= m["error"][:, None] + 1e-6).all()
    assert (m["valid_mass_lower"] <= vm * (1 + 1e-4)).all()
    assert (vm <= m["valid_mass_upper"] * (1 + 1e-4)).all()
    assert (np.abs(j["joint"][0, 1] - truth["joint"]) <= j["error"][0, 1] + 1e-6).all()
    # the Dataset keeps each history's reading width, and the bounds come back from it
    ds = sequential_dataset(res)
    assert "reading_bound_rule" in ds.attrs
    back = history_tree(ds)
    np.testing.assert_array_equal(back.answer_error, eps)
    np.testing.assert_allclose(item_marginals(back)["error"], m["error"], rtol=1e-12)
