"""The labels' walk on a server (top-k listings per node) against the exhaustive walk.

A fake server lists the ``k`` most probable next tokens of a pseudo-random language model
over the tiny character tokenizer; the walk that reads it (:mod:`.openai.walk`), widened by
the mass the listings leave out, must hold the exact masses and PMF (the in-process walk
to ``tol = 0`` on the full rows) within its stored bounds at every ``k``, equal them when
everything is listed, and keep in its bounds the mass of a node the server cannot read.
"""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest
from support.tiny import build_tokenizer

from xlikert.collect.answers.trie import LabelTrie, spelling_pieces
from xlikert.collect.answers.walk import walk_labels
from xlikert.collect.backends.openai.walk import ServerWalk, WalkSetup

# "Ag" / "Ag s" overlap (not disjoint: " s" stops "Ag"); "Bo" / "Bob" do not; "seven" is
# also a token of its own
LABELS = {1: "Bo", 2: "Bob", 3: "seven", 4: "Ag", 5: "Ag s"}
PROMPT = [40, 41, 42]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def logits_of(tok):
    """``logits(ids)``: pseudo-random, the labels' letters favoured (as the walk's tests)."""
    V = len(tok)
    boost = np.zeros(V)
    letters = set("".join(LABELS.values()))
    for t, i in tok.get_vocab().items():
        if t.strip() and set(t.strip()) <= letters:
            boost[i] = 4.0

    def logits(ids) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes()))
        return rng.normal(size=V) * 2.0 + boost

    return logits


class FakePlan:
    """A vLLM server's ``/completions`` on token ids: the top ``logprobs`` tokens by id;
    ``unreadable``: nodes it answers with nothing listed (as a server that cannot read them)."""

    kind = "vllm"

    def __init__(self, logits, unreadable=()):
        self.spec = SimpleNamespace(name="fake", public_url="http://fake/v1", model="m",
                                    temperature=1.0)  # fmt: skip
        self.logits, self.unreadable, self.sent = logits, set(unreadable), 0

    def complete(self, body, what=""):
        self.sent += 1
        z = self.logits(body["prompt"])
        lp = z - np.logaddexp.reduce(z)
        top = [] if tuple(body["prompt"][len(PROMPT) :]) in self.unreadable else (
            np.argsort(-lp, kind="stable")[: body["logprobs"]])  # fmt: skip
        return {"choices": [{"logprobs": {"top_logprobs": [
            {f"token_id:{int(i)}": float(lp[i]) for i in top}]}}]}  # fmt: skip


def _server_walk(tok, trie, plan, k, tol=1e-9, max_passes=400):
    with ThreadPoolExecutor(2) as pool:
        setup = WalkSetup(plan, pool, trie, tok, k, 0.0, len(tok))
        sw = ServerWalk(setup, PROMPT)
        w = walk_labels(trie, sw, tol=tol, max_passes=max_passes, canonical=trie.canonical(tok))
        return sw, sw.widen(w, tol, None)


@pytest.fixture(scope="module")
def setting(tok):
    logits = logits_of(tok)
    scale = tuple(LABELS)
    trie = LabelTrie(spelling_pieces(tok, scale, LABELS), scale)

    def rows(nodes, keep):
        return np.stack([logits(PROMPT + list(n)) for n in nodes])

    exact = walk_labels(trie, rows, tol=0.0, max_passes=10**6, canonical=trie.canonical(tok))
    assert exact.tol_met and exact.width == 0.0 and exact.read[0].sum() > 1e-4
    return logits, trie, exact


def _contains(w, exact, slack=1e-12):
    b, e = w.bounds(), exact.bounds()
    for lo, hi, x in (("mass_lower", "mass_upper", "mass_lower"),
                      ("pmf_lower", "pmf_upper", "pmf_lower"),
                      ("valid_lower", "valid_upper", "valid_lower")):  # fmt: skip
        assert np.all(b[lo][0] <= e[x][0] + slack) and np.all(e[x][0] <= b[hi][0] + slack), lo
    return float(b["valid_upper"][0] - b["valid_lower"][0])


def test_top_k_listings_bound_the_exact_walk(tok, setting):
    logits, trie, exact = setting
    widths = []
    for k in (2, 8, 32, len(tok)):
        _, w = _server_walk(tok, trie, FakePlan(logits), k)
        widths.append(_contains(w, exact))
        assert w.width >= widths[-1] - 1e-12  # the stored width covers the valid mass's
    print("valid-mass widths by k:", [f"{x:.2g}" for x in widths])
    assert widths[0] > 1e-5 and widths[-1] < 1e-12  # only bounded at k = 2; exact when all listed
    assert widths == sorted(widths, reverse=True)
    # everything listed: the walk's own numbers, the canonical spellings' too
    _, w = _server_walk(tok, trie, FakePlan(logits), len(tok))
    np.testing.assert_allclose(w.read, exact.read, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(w.canonical, exact.canonical, rtol=1e-9)
    assert w.tol_met and list(w.topk_id[:3]) == list(exact.topk_id[:3])


def test_a_node_the_server_cannot_read_stays_in_the_bound(tok, setting):
    logits, trie, exact = setting
    first = {c[:1] for c in trie.canonical(tok) if c}  # the labels' first tokens
    sw, w = _server_walk(tok, trie, FakePlan(logits, unreadable=first), len(tok))
    assert all(sw.read[n].unlisted == 1.0 for n in first if n in sw.read)
    width = _contains(w, exact)
    assert width > 1e-4 and not w.tol_met  # their mass is unread: wider, and said so
    assert np.all(np.isnan(w.canonical))  # no canonical spelling read past its first token


def test_a_budget_spent_leaves_the_bound_reached(tok, setting):
    logits, trie, exact = setting
    _, w = _server_walk(tok, trie, FakePlan(logits), 8, max_passes=3)
    # the first round reads the root and the canonical spellings' nodes (read in any
    # case), so a budget below that round is spent by it and no round follows
    ahead = sum(len(c) for c in trie.canonical(tok) if c)
    assert 3 <= w.passes <= 1 + ahead and not w.tol_met
    _contains(w, exact)
