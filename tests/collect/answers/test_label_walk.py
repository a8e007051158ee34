"""The certified walk over the labels' trie against an independent enumeration of spellings.

A fake language model (pseudo-random logits seeded by the context) over the tiny
character tokenizer, so the brute force can list every spelling: the walk at
``tol = 0`` must equal it, a pruned walk must hold it within its stored bounds, and a
spent budget must say so. One test runs the tiny torch model end to end.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from support.tiny import build_tokenizer

from xlikert.collect.answers import walk
from xlikert.collect.answers.trie import LabelTrie, spelling_pieces
from xlikert.collect.answers.walk import (
    ROUND_NODES,
    WALK_ROUNDS,
    mass_bounds,
    run_walks,
    walk_labels,
    walk_steps,
)
from xlikert.collect.options import CollectOptions
from xlikert.collect.run.identity import numbers_options
from xlikert.kernels.readout import nucleus_logprobs

MARKERS = (" ", "▁", "Ġ")
# overlapping labels on purpose: "Bo" is a prefix of "Bob Dole" (disjoint: 'b' goes on
# with the word), "Agree" of "Agree strongly" (not disjoint: ' strongly' stops "Agree")
LABELS = {1: "Bob Dole", 2: "Bo", 3: "seven", 4: "Agree", 5: "Agree strongly"}
GRID = ((0.5, 1.0), (0.9, 1.0))


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def fake_lm(tok, labels):
    """``logits(context)``: pseudo-random, with the labels' characters favoured."""
    V = len(tok)
    boost = np.zeros(V)
    letters = set("".join(labels.values()))
    for t, i in tok.get_vocab().items():
        if t.lstrip("".join(MARKERS)) and set(t.lstrip("".join(MARKERS))) <= letters:
            boost[i] = 3.0

    def logits(ctx) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(np.asarray(ctx, dtype=np.int64).tobytes()))
        return rng.normal(size=V) * 2.0 + boost

    return logits


def brute_force(tok, labels, logits, temperatures=(1.0,), top_ps=(1.0,)):
    """Each label's mass by listing its spellings from the vocabulary strings (a first
    token may carry one marker, or be a bare space token; later markers are spaces),
    times P(next token does not start with a letter, digit or '_'), per grid setting."""
    special = set(tok.all_special_ids)
    text = {i: t for t, i in tok.get_vocab().items() if i not in special}

    def inner(t: str) -> str:
        return " " + t[1:] if t[:1] in MARKERS else t

    goes_on = [
        i for i, t in text.items() if t[:1] not in MARKERS and (t[0].isalnum() or t[0] == "_")
    ]
    spaces = [i for i, t in text.items() if t in MARKERS]
    out = {}
    for y, word in labels.items():
        seqs = []

        def extend(done: str, ids: tuple[int, ...], word=word, seqs=seqs) -> None:
            if done == word:
                seqs.append(ids)
                return
            for i, t in text.items():
                if word.startswith(done + inner(t)) and inner(t):
                    extend(done + inner(t), (*ids, i))

        for i, t in text.items():
            body = t[1:] if t[:1] in MARKERS else t
            if body and word.startswith(body):
                extend(body, (i,))
        for s in spaces:
            extend("", (s,))
        out[y] = seqs
    G = [(1.0, 1.0), *((t, p) for t in temperatures for p in top_ps)]
    mass = np.zeros((len(G), len(labels)))
    need = np.arange(len(tok))
    for k, seqs in enumerate(out.values()):
        for seq in seqs:
            for g, (t, p) in enumerate(G):
                prob = 1.0
                for n in range(len(seq) + 1):
                    q = np.exp(nucleus_logprobs(logits(seq[:n])[None], need, [t], [p])[0, 0, 0])
                    prob *= q[seq[n]] if n < len(seq) else 1.0 - q[goes_on].sum()
                mass[g, k] += prob
    return mass, out


def reader(logits, calls=None):
    def read(nodes, keep):
        if calls is not None:
            calls.append(list(nodes))
        return np.array([logits(n) for n in nodes])

    return read


@pytest.fixture(scope="module")
def exact(tok):
    logits = fake_lm(tok, LABELS)
    mass, seqs = brute_force(tok, LABELS, logits, *GRID)
    return logits, mass, seqs


def test_walk_to_tol_0_equals_brute_force(tok, exact):
    logits, mass, seqs = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    assert not trie.disjoint  # "Agree" / "Agree strongly"
    assert min(len(s) for s in seqs.values()) >= 2  # several spellings each
    w = walk_labels(trie, reader(logits), tol=0.0, max_passes=10**6,
                    temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    np.testing.assert_allclose(w.read, mass, rtol=1e-12, atol=1e-300)
    assert w.tol_met and w.width == 0.0 and len(w.frontier_mass) == 0
    # every node of positive mass was read once: the proper prefixes of the spellings and
    # the whole spellings (their stop probability), the root among them
    nodes = {s[:k] for ss in seqs.values() for s in ss for k in range(len(s) + 1)}
    assert w.passes == len(nodes)


def test_walk_reading_the_canonical_spellings_first_equals_brute_force(tok, exact):
    """The root's round reads the canonical spellings' nodes too, before their masses are
    known: to tol 0 the same masses, each node read once; pruned, within the bounds."""
    logits, mass, seqs = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    canon = trie.canonical(tok)
    calls: list = []
    w = walk_labels(trie, reader(logits, calls), tol=0.0, max_passes=10**6, canonical=canon,
                    temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    ahead = {c[:k] for c in canon if c for k in range(1, len(c) + 1)}
    assert calls[0][0] == () and set(map(tuple, calls[0][1:])) == ahead
    np.testing.assert_allclose(w.read, mass, rtol=1e-12, atol=1e-300)
    nodes = {s[:k] for ss in seqs.values() for s in ss for k in range(len(s) + 1)}
    read = [tuple(n) for c in calls for n in c]
    assert len(read) == len(set(read)) == w.passes and set(read) >= nodes
    # with the spellings after a space read in the first round too: the same masses
    spaced = trie.spaced(tok)
    assert set(spaced) - set(canon)  # other spellings than the canonical ones
    calls = []
    both = walk_labels(trie, reader(logits, calls), tol=0.0, max_passes=10**6,
                       canonical=canon, spaced=spaced, temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    first = set(map(tuple, calls[0][1:]))
    assert first > ahead and first <= {
        c[:k] for c in (*canon, *spaced) for k in range(1, len(c) + 1)
    }
    np.testing.assert_allclose(both.read, mass, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(both.canonical, w.canonical)  # the canonical mass alone
    pruned = walk_labels(trie, reader(logits), tol=1e-3, max_passes=10**6, canonical=canon)
    b = pruned.bounds()
    assert np.all(b["mass_lower"][0] <= mass[0] + 1e-15)
    assert np.all(mass[0] <= b["mass_upper"][0] + 1e-15)


def test_rounds_read_ahead_down_the_canonical_spellings(tok, exact, monkeypatch):
    """Below each node a later round reads, the path on to each canonical spelling the
    node begins is read in the same pass, each split after its parent: to tol 0 the same
    masses, each node read once, in fewer rounds than without reading ahead."""
    logits, mass, _ = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    canon = trie.canonical(tok)
    kw = dict(tol=0.0, max_passes=10**6, canonical=canon, temperatures=GRID[0], top_ps=GRID[1])
    calls: list = []
    w = walk_labels(trie, reader(logits, calls), **kw)
    np.testing.assert_allclose(w.read, mass, rtol=1e-12, atol=1e-300)
    read = [tuple(n) for c in calls for n in c]
    assert len(read) == len(set(read)) == w.passes
    ahead = 0
    for c in calls[1:]:  # a node read ahead: its parent is read in the same round
        this = {tuple(n) for n in c}
        deep = [n for n in this if n[:-1] in this]
        ahead += len(deep)
        tails = {ids[k:] for ids in canon if ids for k in range(1, len(ids))}
        # below the bridge token, a path goes on by a canonical spelling's own tokens
        assert all(n[-1:] in {t[:1] for t in tails} or n[:-2] not in this for n in deep)
    assert ahead > 0
    monkeypatch.setattr(walk._Walker, "lookahead", lambda self, nodes, cap: [])
    plain = walk_labels(trie, reader(logits), **kw)
    np.testing.assert_allclose(plain.read, w.read, rtol=1e-12, atol=1e-300)
    assert w.rounds < plain.rounds and plain.passes == w.passes


def test_walks_read_together_read_what_each_reads_alone(tok, exact):
    """run_walks: three prompts' walks in lockstep, one read call a round for all of them,
    each reading the nodes and numbers it reads alone."""
    logits, _, _ = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    kw = dict(tol=1e-3, max_passes=10**6, canonical=trie.canonical(tok),
              temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip

    def after(i):  # prompt i: the fake model's logits after its own first token
        return lambda ctx: logits((90 + i, *ctx))

    solo_calls: list[list] = [[], [], []]
    solo = [walk_labels(trie, reader(after(i), solo_calls[i]), **kw) for i in range(3)]
    seen: list = []

    def unit(asks):
        seen.append(asks)
        return [np.array([after(i)(n) for n in nodes]) for i, nodes, _ in asks]

    together = run_walks([walk_steps(trie, **kw) for _ in range(3)], unit)
    assert len({w.rounds for w in solo}) > 1  # walks of different lengths
    assert len(seen) == max(w.rounds for w in solo)  # one call a round, for every walk
    for i, (a, b) in enumerate(zip(solo, together, strict=True)):
        np.testing.assert_array_equal(a.read, b.read)
        assert (a.passes, a.rounds, a.width) == (b.passes, b.rounds, b.width)
        mine = [list(nodes) for ask in seen for j, nodes, _ in ask if j == i]
        assert mine == solo_calls[i]


@pytest.mark.parametrize("tol", [1e-1, 1e-2, 1e-3, 1e-5])
def test_pruned_walk_holds_the_exact_masses_within_its_bounds(tok, exact, tol):
    logits, mass, _ = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    full = walk_labels(trie, reader(logits), tol=0.0, max_passes=10**6)
    w = walk_labels(trie, reader(logits), tol=tol, max_passes=10**6,
                    temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    assert w.tol_met and w.width <= tol and w.passes < full.passes
    for group in (None, np.array([True, True, False, True, True])):
        b = w.bounds(group)
        g = np.ones(len(scale), bool) if group is None else group
        ex_valid = mass[:, g].sum(1)
        assert np.all(b["mass_lower"] <= mass + 1e-15) and np.all(mass <= b["mass_upper"] + 1e-15)
        assert np.all(b["valid_lower"] <= ex_valid + 1e-15)
        assert np.all(ex_valid <= b["valid_upper"] + 1e-15)
        assert np.all(b["valid_upper"] - b["valid_lower"] <= tol + 1e-15)
        on = ex_valid > 0  # a column whose nucleus holds no answer has no PMF
        pmf = np.where(g, mass, 0.0)[on] / ex_valid[on, None]
        assert np.all(b["pmf_lower"][on] <= pmf + 1e-12)
        assert np.all(pmf <= b["pmf_upper"][on] + 1e-12)


def test_rounds_are_fixed_and_the_budget_is_reported(tok, exact):
    logits, mass, _ = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    calls: list = []
    w = walk_labels(trie, reader(logits, calls), tol=0.0, max_passes=40, round_nodes=16)
    sizes = [len(c) for c in calls]  # the root, then rounds of at most 16, the budget's end
    assert sizes[0] == 1 and max(sizes) <= 16 and sum(sizes) == 40
    assert w.passes == 40 and not w.tol_met and w.width > 0
    b = w.bounds()
    assert np.all(b["mass_lower"][0] <= mass[0] + 1e-15)
    assert np.all(mass[0] <= b["mass_upper"][0] + 1e-15)
    again = walk_labels(trie, reader(logits), tol=0.0, max_passes=40, round_nodes=16)
    np.testing.assert_array_equal(again.read, w.read)  # the same nodes, the same numbers
    seen = []
    walk_labels(trie, reader(logits), tol=1e-3, max_passes=10**6, progress=seen.append)
    assert [s.passes for s in seen] == sorted(s.passes for s in seen) and seen[-1].bound <= 1e-3
    assert {s.reading for s in seen} == {"word labels"} and seen[-1].budget == 10**6
    assert all(0 <= s.unread <= 1 for s in seen)


@pytest.mark.parametrize("tol", [1e-2, 1e-4])
def test_rounds_read_the_fewest_nodes_that_could_meet_tol(tok, exact, tol, monkeypatch):
    """Each round reads the fewest of the largest nodes whose reading could meet ``tol``
    (were their children of mass 0): between 1 and ROUND_NODES, the same nodes on every
    call, fewer nodes in all than full rounds, ``tol`` met all the same; the rounds'
    version is in every cell's key."""
    logits, _, _ = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    calls: list = []
    w = walk_labels(trie, reader(logits, calls), tol=tol, max_passes=10**6,
                    temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    assert w.tol_met and all(1 <= len(c) <= ROUND_NODES for c in calls)
    again: list = []
    walk_labels(trie, reader(logits, again), tol=tol, max_passes=10**6,
                temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    assert again == calls
    monkeypatch.setattr(walk._Walker, "round_size", lambda self, tol, cap: cap)
    fixed = walk_labels(trie, reader(logits), tol=tol, max_passes=10**6,
                        temperatures=GRID[0], top_ps=GRID[1])  # fmt: skip
    assert w.passes < fixed.passes
    assert numbers_options(CollectOptions(scale=(1, 2)))["answer_walk_rounds"] == WALK_ROUNDS


def test_canonical_spelling_mass(tok, exact):
    logits, _, _ = exact
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)
    canon = trie.canonical(tok)
    w = walk_labels(trie, reader(logits), tol=1e-1, max_passes=10**6, canonical=canon)
    for k, ids in enumerate(canon):  # the tokens' probability alone, no stop check
        p = 1.0
        for n in range(len(ids)):
            z = logits(ids[:n])
            p *= np.exp(z[ids[n]] - np.log(np.exp(z - z.max()).sum()) - z.max())
        np.testing.assert_allclose(w.canonical[k], p, rtol=1e-10)


def test_mass_bounds_counts_overlapping_labels_once_each():
    # one unread node of mass 0.1 consistent with both answers: disjoint events share it,
    # overlapping ones may each take all of it
    read, fm, mask = np.array([[0.2, 0.3]]), np.array([[0.1]]), np.array([[True, True]])
    assert mass_bounds(read, fm, mask)["valid_upper"][0] == pytest.approx(0.6)
    assert mass_bounds(read, fm, mask, disjoint=False)["valid_upper"][0] == pytest.approx(0.7)
