"""The transformers backend's packed walk reader (one tree-masked row a round on one
growing KV cache) against plain, uncached forward passes of each node's whole sequence."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny  # noqa: E402

from xlikert.collect.backends.transformers import load_model  # noqa: E402
from xlikert.collect.backends.transformers.packed import (  # noqa: E402
    PackedUnitReader,
    packable,
)
from xlikert.collect.backends.transformers.scorer import Scorer  # noqa: E402


@pytest.fixture(scope="module")
def scorer(tmp_path_factory):
    folder = save_tiny(tmp_path_factory.mktemp("packed") / "m")
    return Scorer(load_model({"name": "tiny", "source": str(folder)}, range(1, 8)))


def plain(scorer: Scorer, ids: list[int]) -> np.ndarray:
    """The next-token logits after ``ids``: one uncached forward pass, no mask given."""
    with torch.inference_mode():
        out = scorer.lm.model(input_ids=torch.tensor([ids]))
    return out.logits[0, -1].float().numpy()


# rounds of nodes as a walk reads them (parents before children, within a round too),
# with a root read twice, a node read again and a node whose prefix was never read
ROUNDS = [
    [(), (11,), (11, 12), (13,)],
    [(11, 14), (13, 15), (13, 16), (13, 15, 17)],
    [(11, 12, 18), (13, 15), (20, 21, 22)],
    [(), (11, 14, 19, 23)],
]


@pytest.mark.parametrize("takes_keep", [True, False])
@pytest.mark.parametrize("shared", [0, 5, 40])
def test_packed_reads_equal_plain_forward_passes(scorer, shared, takes_keep, monkeypatch):
    # the lm_head at the read positions alone (logits_to_keep), or, for a model that does
    # not take it, every position's logits and the read ones picked
    assert scorer.keeps_positions
    monkeypatch.setattr(scorer, "_keep", takes_keep)
    prompt = [2, *range(30, 48)]
    state = None
    if shared:
        state = scorer.prefix_state(prompt[:shared])
        assert packable(scorer, state)
    read = PackedUnitReader(scorer, [prompt], (state, shared))  # one prompt
    for nodes in ROUNDS:
        (got,) = read([(0, nodes, [True] * len(nodes))])
        want = np.stack([plain(scorer, prompt + list(n)) for n in nodes])
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)
    assert read.passes == len(ROUNDS) and read.packed
    # each token position run once, the re-read ones again, the prompt's rest once
    fresh = len({n[:k] for r in ROUNDS for n in r for k in range(1, len(n) + 1)})
    assert read.tokens_run == len(prompt) - min(shared, len(prompt) - 1) + fresh + 2
    if shared:  # the scorer's shared prefix was copied, not extended
        assert scorer.prefix_state(prompt[:shared]).get_seq_length() == len(prompt[:shared])


@pytest.mark.parametrize("shared", [0, 5])
def test_a_unit_of_prompts_read_together_equals_plain_forward_passes(scorer, shared):
    """PackedUnitReader: prompts of different lengths below one shared prefix, each with
    its nodes, in one pass a round (some prompts not asked in some rounds, asks in any
    order), each node's logits those of an uncached pass of its prompt and tokens."""
    prompts = [[2, *range(30, 48)], [2, *range(30, 40), 60, 61], [2, *range(30, 36)]]
    state = scorer.prefix_state(prompts[0][:shared]) if shared else None
    unit = PackedUnitReader(scorer, prompts, (state, shared))
    assert len(unit) == 3
    for r, nodes in enumerate(ROUNDS):
        asks = [(i, nodes, [True] * len(nodes)) for i in (2, 0, 1) if (r + i) % 3 != 1]
        got = unit(asks)
        assert len(got) == len(asks)
        for (i, ns, _), g in zip(asks, got, strict=True):
            want = np.stack([plain(scorer, prompts[i] + list(n)) for n in ns])
            np.testing.assert_allclose(g, want, atol=2e-4, rtol=1e-4)
    assert unit.passes == len(ROUNDS) and unit.packed


def test_packed_reads_under_eager_attention_take_an_additive_mask(scorer):
    prompt = [2, *range(30, 40)]
    scorer.lm.model.set_attn_implementation("eager")
    try:
        read = PackedUnitReader(scorer, [prompt], (scorer.prefix_state(prompt[:6]), 6))
        for nodes in ROUNDS[:2]:
            want = np.stack([plain(scorer, prompt + list(n)) for n in nodes])
            (got,) = read([(0, nodes, [True] * len(nodes))])
            np.testing.assert_allclose(got, want, atol=2e-4)
    finally:
        scorer.lm.model.set_attn_implementation("sdpa")
