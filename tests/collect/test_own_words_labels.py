"""``own_words`` and ``greedy`` over word labels: the answer starts at the reply's first
token that begins a label and is completed by the labels' walk (WORD_REPLY_RULE).

On a tiny model whose head favours the labels' letters: the reply tree with its walks,
read to the end, equals a plain enumeration of every reply (each prefix's next token, and
after a label's first letter each continuation written out by hand, its stop check
included); a walk left bounded keeps the own-words bound certified; the greedy reply is
parsed by the same rule and its in-text PMF is the walk's after the reply's prefix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import nucleus, save_word_tiny  # noqa: E402

from xlikert.collect.elicitation import score_elicited  # noqa: E402
from xlikert.collect.options import CollectOptions  # noqa: E402
from xlikert.core.codecs import decode_token_ids  # noqa: E402

LABELS = ("No", "Nay", "Yes")
PROMPTS = [("Answer No, Nay or Yes.", "Tea?"), ("Answer No, Nay or Yes.", "Coffee?")]
TEMP = 0.8


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return save_word_tiny(tmp_path_factory.mktemp("ownwords") / "model", LABELS, boost=3.5)


def open_words(folder: Path, **kw):
    import xlikert.collect.backends.transformers as backend

    kw = {"reply_tokens": 2, **kw}
    opts = CollectOptions(scale=range(1, 4), answer_labels=LABELS, max_answer_positions=4,
                          own_words_temperature=TEMP, own_words_top_p=1.0,
                          own_words_tol=0.0, own_words_max_passes=100_000, **kw)  # fmt: skip
    return backend.open({"name": "tiny", "source": str(folder)}, opts)


def enumerate_replies(model, ids: list[int], cap: int) -> tuple[np.ndarray, float]:
    """The first answer of a reply sampled at TEMP, every reply written out: a token that
    is a label's first letter starts the answer, whose letters are then read one by one
    (the label's mass, its stop check: no letter, digit or '_' next); anything else that
    leaves the labels is no answer; an end of turn or the cap is no answer."""
    hf, tok = model.lm.model, model.lm.tokenizer
    vocab, special = tok.get_vocab(), set(tok.all_special_ids)
    goes_on = [i for t, i in vocab.items()
               if i not in special and t[0] not in " ▁Ġ" and (t[0].isalnum() or t[0] == "_")]  # fmt: skip
    stop = model.end_of_turn

    seen: dict[tuple[int, ...], np.ndarray] = {}

    def q(ctx: list[int]) -> np.ndarray:
        if tuple(ctx) not in seen:
            with torch.no_grad():
                z = hf(torch.tensor([ctx])).logits[0, -1].double()
            seen[tuple(ctx)] = nucleus(torch.softmax(z, -1).numpy(), TEMP)
        return seen[tuple(ctx)]

    def label_mass(ctx: list[int], label: str) -> float:  # the first letter given
        p = 1.0
        for k in range(1, len(label)):
            p *= q(ctx + [vocab[c] for c in label[:k]])[vocab[label[k]]]
        return p * (1.0 - q(ctx + [vocab[c] for c in label])[goes_on].sum())

    starts = {vocab[c] for c in {lb[0] for lb in LABELS}}
    mass, none = np.zeros(len(LABELS)), 0.0
    todo = [([], 1.0)]
    while todo:
        prefix, w = todo.pop()
        qi = q(ids + prefix)
        for t in range(len(qi)):
            if qi[t] == 0:
                continue
            if t in starts:
                got = [label_mass(ids + prefix, lb) if vocab[lb[0]] == t else 0.0 for lb in LABELS]
                mass += w * qi[t] * np.array(got)
                none += w * qi[t] * (1.0 - sum(got))
            elif t in stop or len(prefix) + 1 >= cap:
                none += w * qi[t]
            else:
                todo.append(([*prefix, t], w * qi[t]))
    return mass, none


def test_own_words_over_word_labels_equals_the_enumeration(folder):
    model = open_words(folder, answer_tol=0.0)
    assert model.answers.sequences == ()  # too many spellings to list: the walk reads them
    res = score_elicited(model, PROMPTS[:1], "own_words", model.options)
    d = res.data
    for b, (s, u) in enumerate(PROMPTS[:1]):
        ids = model.template.encode(model.template.render(s, u))
        mass, none = enumerate_replies(model, ids, cap=2)
        assert mass.sum() > 1e-6 and (mass > 1e-9).sum() >= 2  # labels answered, several
        np.testing.assert_allclose(d["pmf"][b], mass / mass.sum(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(d["valid_mass"][b], mass.sum(), rtol=1e-4)
        np.testing.assert_allclose(d["no_answer_mass"][b], none, rtol=1e-5)
        assert d["elicitation_error"][b] == 0 and d["elicitation_tol_met"][b] == 1


def test_a_bounded_walk_keeps_the_own_words_bound_certified(folder):
    exact = open_words(folder, answer_tol=0.0)
    ex = score_elicited(exact, PROMPTS[1:], "own_words", exact.options).data
    model = open_words(folder, answer_tol=0.0, answer_max_passes=5)  # walks stop short
    d = score_elicited(model, PROMPTS[1:], "own_words", model.options).data
    err = d["elicitation_error"]
    assert (err > 0).all() and (d["elicitation_tol_met"] == 0).all()
    assert np.isfinite(d["pmf"]).all()  # some label completed in every walk
    assert (np.abs(d["pmf"] - ex["pmf"]) <= err[:, None] + 1e-6).all()
    assert (np.abs(d["valid_mass"] - ex["valid_mass"]) <= err + 1e-6).all()
    assert (d["valid_mass"] <= ex["valid_mass"] + 1e-7).all()  # the masses read: lower ends


def in_text_masses(model, ctx: list[int]) -> np.ndarray:
    """Each label's probability after ``ctx`` under the run's rule, written plainly: its
    letters, or a bare space then them, times P(no letter, digit or '_' next)."""
    hf, tok = model.lm.model, model.lm.tokenizer
    vocab, special = tok.get_vocab(), set(tok.all_special_ids)
    goes_on = [i for t, i in vocab.items()
               if i not in special and t[0] not in " ▁Ġ" and (t[0].isalnum() or t[0] == "_")]  # fmt: skip
    out = np.zeros(len(LABELS))
    for k, label in enumerate(LABELS):
        for spelling in ([vocab[c] for c in label], [vocab[" "], *(vocab[c] for c in label)]):
            with torch.no_grad():
                z = hf(torch.tensor([[*ctx, *spelling]])).logits[0, len(ctx) - 1 :].double()
            p = torch.softmax(z, -1).numpy()
            prob = np.prod([p[n, t] for n, t in enumerate(spelling)])
            out[k] += prob * (1.0 - p[len(spelling), goes_on].sum())
    return out


@pytest.mark.parametrize(
    ("text", "answer", "at"),
    [("Hm, Nay.", 2, 4), ("I'd say Yes", 3, 8), ("Nope, Yes", None, None), ("Well", None, None)],
)
def test_greedy_parses_a_word_label_at_its_first_token(folder, text, answer, at):
    model = open_words(folder, answer_tol=0.0)
    vocab = model.lm.tokenizer.get_vocab()
    reply = [vocab[c] for c in text]  # the tiny tokenizer's tokens are characters
    model.greedy_reply = lambda ids, n: (reply, "eos")  # the reply the model writes
    d = score_elicited(model, PROMPTS[:1], "greedy", model.options).data
    if answer is None:  # no label start, or the first one completes no label ("Nope")
        assert d["reply_answered"][0] == 0 and np.isnan(d["pmf"][0]).all()
        return
    assert d["reply_answered"][0] == 1 and d["reply_answer"][0] == answer
    assert d["reply_answer_position"][0] == at
    ids = model.template.encode(model.template.render(*PROMPTS[0]))
    ctx = list(decode_token_ids(d["prompt_token_ids"][0]))
    assert ctx == [*ids, *reply[:at]]
    mass = in_text_masses(model, ctx)  # the in-text PMF: the walk's after the reply's prefix
    np.testing.assert_allclose(d["pmf"][0], mass / mass.sum(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(d["valid_mass"][0], mass.sum(), rtol=1e-4)
    assert d["answer_passes"][0] > 1 and d["answer_error"][0] == 0  # read by the walk
