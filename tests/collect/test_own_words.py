"""The elicitation level ``own_words``: the reply tree against brute-force enumeration.

On a tiny random-weight model with a small vocabulary and a short cap every reply is
enumerated by plain forward passes (no cache, a plainly written nucleus): the tree read
to the end equals it, pruned trees lie within their stored bounds for several ``tol``
and when the budget runs out, and through the runner (KV reuse on the transformers
backend) a cap of 1 gives the first-token PMF.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import build_model, nucleus, save_answering_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.own_words import bound, reply_tree, sampler_probabilities

SCALE = (1, 2, 3)
ANSWERS = {2: 1, 5: 2, 7: 3, 8: 3}  # token -> score (two tokens spell 3)
STOP = frozenset({9})
ROOT = [1, 4, 6, 3, 0]
KW = {"progress": False, "batch_size": 4, "chunk_size": 3, "top_k": 3}


@pytest.fixture(scope="module")
def small():
    return build_model(10, seed=3, scale=2.0)


def probs(model, ids) -> np.ndarray:
    import torch

    with torch.inference_mode():
        z = model(input_ids=torch.tensor([list(ids)])).logits[0, -1].double().numpy()
    return np.exp(z - z.max()) / np.exp(z - z.max()).sum()


def brute(model, root, cap, temp=1.0, top_p=1.0):
    """Every reply up to ``cap`` tokens, its probability and first answer, enumerated."""
    mass, none = np.zeros(len(SCALE)), 0.0

    def walk(prefix, w):
        nonlocal none
        q = nucleus(probs(model, [*root, *prefix]), temp, top_p)
        for t, qt in enumerate(q):
            if qt == 0:
                continue
            if t in ANSWERS:
                mass[SCALE.index(ANSWERS[t])] += w * qt
            elif t in STOP or len(prefix) + 1 == cap:
                none += w * qt
            else:
                walk([*prefix, t], w * qt)

    walk([], 1.0)
    return mass, none


def plain_reader(model, root):
    calls = []

    def read(prefixes, keep):
        calls.append(len(prefixes))
        return np.log(np.stack([probs(model, [*root, *p]) for p in prefixes]))

    return read, calls


@pytest.mark.parametrize(("cap", "temp", "top_p"), [(1, 1.0, 1.0), (3, 1.0, 1.0), (3, 0.7, 0.9)])
def test_the_tree_read_to_the_end_is_brute_force_enumeration(small, cap, temp, top_p):
    mass, none = brute(small, ROOT, cap, temp, top_p)
    read, calls = plain_reader(small, ROOT)
    tree = reply_tree(read, ANSWERS, SCALE, STOP, cap=cap, temperature=temp, top_p=top_p,
                      batch=3)  # fmt: skip
    assert tree.tol_met and tree.unread == 0 and tree.error == 0
    np.testing.assert_allclose(tree.answer_mass, mass, atol=1e-12, rtol=0)
    assert abs(tree.no_answer - none) < 1e-12
    assert abs(tree.valid_mass + tree.no_answer - 1) < 1e-12
    assert tree.passes == sum(calls) and (cap > 1) == (tree.passes > 1)


@pytest.fixture(scope="module")
def cap4(small):
    """Every reply of up to 4 tokens enumerated, and the tree read to the end: made once
    for the tolerances below."""
    mass, none = brute(small, ROOT, 4)
    read, _ = plain_reader(small, ROOT)
    return mass, none, reply_tree(read, ANSWERS, SCALE, STOP, cap=4)


@pytest.mark.parametrize("tol", [0.3, 0.1, 0.03, 0.01])
def test_pruned_trees_lie_within_their_stored_bounds(small, cap4, tol):
    mass, none, full = cap4
    exact_pmf = mass / mass.sum()
    read, _ = plain_reader(small, ROOT)
    tree = reply_tree(read, ANSWERS, SCALE, STOP, cap=4, tol=tol, batch=2)
    assert tree.tol_met and tree.error <= tol and tree.passes < full.passes
    assert tree.error == bound(tree.valid_mass, tree.unread) and tree.unread > 0
    assert np.abs(tree.pmf - exact_pmf).max() <= tree.error
    assert abs(tree.valid_mass - mass.sum()) <= tree.error
    assert abs(tree.no_answer - none) <= tree.error
    # the budget spent first: the bound reached is kept, and still holds
    short = reply_tree(read, ANSWERS, SCALE, STOP, cap=4, tol=tol / 100, max_passes=5, batch=2)
    assert not short.tol_met and short.passes == 5 and short.error > tol / 100
    assert np.abs(short.pmf - exact_pmf).max() <= short.error
    assert abs(short.valid_mass - mass.sum()) <= short.error


def test_children_beyond_the_offered_ones_stay_in_the_bound(small):
    mass, _ = brute(small, ROOT, 3)
    read, _ = plain_reader(small, ROOT)
    tree = reply_tree(read, ANSWERS, SCALE, STOP, cap=3, max_children=2)
    assert not tree.tol_met and tree.unread > 0  # the other children were never offered
    assert np.abs(tree.pmf - mass / mass.sum()).max() <= tree.error
    assert abs(tree.valid_mass - mass.sum()) <= tree.error


def test_sampler_probabilities_are_the_decoding_rule():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    for temp, top_p in ((1.0, 1.0), (0.5, 0.9), (1.3, 0.7)):
        np.testing.assert_allclose(sampler_probabilities(np.log(p), temp, top_p),
                                   nucleus(p, temp, top_p), atol=1e-15)  # fmt: skip


# ------------------------------------------------------------------ through the runner


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(save_answering_tiny(tmp_path_factory.mktemp("ow") / "model"))


def test_own_words_through_the_runner_is_the_enumeration_and_cap_one_the_first_token(tiny):
    import xlikert.collect.backends.transformers as backend
    from xlikert.collect.options import CollectOptions

    prompts = tiny_prompts(n_targets=1, n_items=2).expand_dims(
        elicitation=["first_token", "own_words"]
    )
    spec = [{"name": "tiny", "source": tiny}]
    ds = collect(prompts, spec, reply_tokens=1, split_space=False, **KW).sel(model="tiny")
    first, own = ds.sel(elicitation="first_token"), ds.sel(elicitation="own_words")
    np.testing.assert_allclose(own.pmf.values, first.pmf.values, atol=1e-6, rtol=0)
    np.testing.assert_allclose(own.valid_mass.values, first.valid_mass.values, atol=1e-6)
    np.testing.assert_allclose(own.no_answer_mass.values, 1 - first.valid_mass.values,
                               atol=1e-6)  # fmt: skip
    assert (own.elicitation_error == 0).all() and (own.elicitation_passes == 1).all()
    # cap 2, read to the end (tol 0) on the KV-reusing reader: every reply enumerated
    two = collect(prompts.sel(elicitation=["own_words"]), spec, reply_tokens=2,
                  own_words_tol=0.0, own_words_max_passes=10_000, split_space=False,
                  **KW).sel(model="tiny", elicitation="own_words")  # fmt: skip
    m = backend.open(spec[0], CollectOptions(scale=range(1, 8), split_space=False))
    try:
        hf, answers = m.lm.model, {int(i): int(y) for i, y in zip(m.valid.ids, m.valid.scores,
                                                                  strict=True)}  # fmt: skip
        stop = m.end_of_turn
        for item in two.item.values:
            cell = two.sel(target=str(two.target.values[0]), item=item)
            ids = [int(x) for x in m.template.encode(str(cell.prompt_text.values))]
            q0 = probs(hf, ids)
            mass, none = np.zeros(7), 0.0
            for t, qt in enumerate(q0):
                if t in answers:
                    mass[answers[t] - 1] += qt
                elif t in stop:
                    none += qt
                else:
                    q1 = probs(hf, [*ids, t])
                    for u, qu in enumerate(q1):
                        if u in answers:
                            mass[answers[u] - 1] += qt * qu
                        else:
                            none += qt * qu
            assert float(cell.elicitation_error) == 0 and int(cell.elicitation_tol_met) == 1
            np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6, rtol=0)
            assert abs(float(cell.valid_mass) - mass.sum()) < 1e-6
            assert abs(float(cell.no_answer_mass) - none) < 1e-6
    finally:
        m.close()


# ------------------------------------------------------------------ progress inside a cell


def test_the_tree_reports_its_passes_bound_and_time_after_every_round(small):
    """The progress seam (:mod:`xlikert.collect.progress`): after each round the passes read
    out of the budget, the bound reached and the unread mass; the last report is the tree's."""
    read, calls = plain_reader(small, ROOT)
    seen = []
    tree = reply_tree(read, ANSWERS, SCALE, STOP, cap=4, tol=0.01, max_passes=50, batch=2,
                      progress=seen.append)  # fmt: skip
    assert len(seen) == len(calls) >= 2
    assert [p.passes for p in seen] == list(np.cumsum(calls))
    assert {(p.reading, p.budget, p.tol) for p in seen} == {("own words", 50, 0.01)}
    last = seen[-1]
    assert (last.passes, last.bound, last.unread) == (tree.passes, tree.error, tree.unread)
    assert all(a.elapsed <= b.elapsed for a, b in itertools.pairwise(seen))
    assert seen[0].bound >= last.bound and seen[0].unread >= last.unread


def test_a_run_shows_a_long_cells_progress_on_its_bar(tiny, capsys):
    """Through the runner: the own-words cell's passes, budget, bound and time are on the
    run's progress bar (its postfix, on stderr) while the cell is read."""
    prompts = tiny_prompts(n_targets=1, n_items=1).expand_dims(elicitation=["own_words"])
    spec = [{"name": "tiny", "source": tiny}]
    collect(prompts, spec, reply_tokens=3, own_words_tol=1e-3, own_words_max_passes=40,
            split_space=False, **{**KW, "progress": True})  # fmt: skip
    err = capsys.readouterr().err
    said = re.findall(r"own words: (\d+)/40 passes, bound (\S+) \(tol 0\.001\), unread \S+, "
                      r"0m\d\ds", err)  # fmt: skip
    assert said, err[-2000:]
    assert int(said[-1][0]) <= 40
