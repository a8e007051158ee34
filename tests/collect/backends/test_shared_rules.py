"""The rules every backend shares (xlikert.analysis.constraint), and every path held against them.

One test per rule — the token -> scale sum, the temperature/top-p tie rule, the
top-k intervals — first against a plain statement of the rule, then each path
that applies it: the transformers backend on an independent forward pass, the
server backend's listing, the synthetic demo data. The real engines (a vLLM
server, the in-process vLLM backend, llama.cpp servers) are held against these
paths in ``test_engine_*.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from xlikert.kernels.readout import nucleus_logprobs, scale_mass, topk_intervals


# ----------------------------------------------------------------------------- token -> scale
def test_scale_mass_is_the_sum_over_each_preimage():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(9), size=(4, 3))
    score = np.array([0, 2, -1, 1, 0, -1, 2, 2, 1])
    want = np.zeros((4, 3, 3))
    for t, s in enumerate(score):
        if s >= 0:
            want[..., s] += p[..., t]
    np.testing.assert_allclose(scale_mass(p, score, 3), want, rtol=0, atol=1e-15)
    # an unknown (NaN) token spoils only its own score
    q = p[0, 0].copy()
    q[3] = np.nan
    out = scale_mass(q, score, 3)
    assert np.isnan(out[1]) and not np.isnan(out[[0, 2]]).any()


# ----------------------------------------------------------------------------- top-p tie rule
def plain_nucleus(p: np.ndarray, temp: float, top_p: float) -> np.ndarray:
    """The tie rule written plainly: q = p^(1/T) normalised; sort descending; find the
    first token where the running mass reaches top_p; keep every token whose q is at
    least that token's q (ties all kept); renormalise."""
    q = p ** (1 / temp)
    q = q / q.sum()
    if top_p >= 1:
        return q
    running = 0.0
    for j in np.argsort(-q, kind="stable"):
        running += q[j]
        if running >= top_p:
            threshold = q[j]
            break
    keep = q >= threshold
    return np.where(keep, q, 0.0) / q[keep].sum()


def test_nucleus_keeps_every_token_tied_at_the_threshold():
    p = np.array([0.4, 0.2, 0.2, 0.2])
    q = np.exp(nucleus_logprobs(np.log(p), np.arange(4), [1.0], [0.5, 0.6, 0.35]))[0]
    np.testing.assert_allclose(q[0], p)  # 0.4 + 0.2 reaches 0.5: the tied 0.2s all stay
    np.testing.assert_allclose(q[1], p)
    np.testing.assert_allclose(q[2], [1, 0, 0, 0])  # 0.4 alone reaches 0.35
    # a greedy sampler keeping exactly the tokens before the threshold would have given
    # [2/3, 1/3, 0, 0] (order-dependent): the stored rule does not depend on the order
    perm = np.array([3, 1, 0, 2])
    qp = np.exp(nucleus_logprobs(np.log(p[perm]), np.arange(4), [1.0], [0.5]))[0, 0]
    np.testing.assert_allclose(qp, q[0][perm])


@settings(max_examples=200, deadline=None)
@given(
    logits=st.lists(st.integers(-6, 6), min_size=2, max_size=12),  # integers: many ties
    temp=st.sampled_from([0.1, 0.5, 1.0, 1.3]),
    top_p=st.sampled_from([0.3, 0.5, 0.8, 0.9, 1.0]),
)
def test_nucleus_equals_the_plain_rule(logits, temp, top_p):
    z = np.asarray(logits, dtype=np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    q = np.sort(p ** (1 / temp) / (p ** (1 / temp)).sum())[::-1]
    assume(np.abs(np.cumsum(q) - top_p).min() > 1e-9)  # not on the boundary within round-off
    got = np.exp(nucleus_logprobs(np.log(p), np.arange(p.size), [temp], [top_p]))[0, 0]
    np.testing.assert_allclose(got, plain_nucleus(p, temp, top_p), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    peak=st.integers(0, 12),  # how far the head stands above the rest: 0 is flat
    temp=st.sampled_from([0.1, 0.5, 1.0, 1.3]),
    top_p=st.sampled_from([0.3, 0.8, 0.9]),
)
def test_nucleus_over_a_large_vocabulary_equals_the_plain_rule(seed, peak, temp, top_p):
    """Vocabularies large enough for the partial sort (only the largest logits sorted):
    integer logits put ties at the cut between the sorted head and the rest."""
    rng = np.random.default_rng(seed)
    V = 5000
    z = rng.integers(-20, 0, V).astype(np.float64)
    z[rng.choice(V, rng.integers(1, 200), replace=False)] = peak + rng.integers(0, 3, 1)
    p = np.exp(z - z.max())
    p /= p.sum()
    q = np.sort(p ** (1 / temp) / (p ** (1 / temp)).sum())[::-1]
    assume(np.abs(np.cumsum(q) - top_p).min() > 1e-9)
    need = np.arange(0, V, 7)
    got = np.exp(nucleus_logprobs(np.log(p), need, [temp], [top_p]))[0, 0]
    np.testing.assert_allclose(got, plain_nucleus(p, temp, top_p)[need], atol=1e-12)


def test_nucleus_keeps_ties_that_straddle_the_sorted_head():
    """100 tokens tied at the top: the 64 largest alone end inside the tie, so the
    nucleus must come from a longer head (1024) or the full sort, never from 64."""
    for V in (5000, 300):  # 5000: the 1024-head; 300: the full sort
        z = np.full(V, -30.0)
        z[np.arange(0, 3 * 100, 3)] = 10.0
        q = np.exp(nucleus_logprobs(z, np.arange(V), [1.0], [0.5]))[0, 0]
        np.testing.assert_allclose(q[z == 10.0], 1 / 100, rtol=1e-12)
        assert (q[z < 10] == 0).all()


def test_nucleus_with_no_token_asked_for():
    """A listing with no valid token asks for none: an empty grid, not an error."""
    lp = np.log([[0.5, 0.3, 0.2]])
    for kw in ({}, {"unlisted_max": 0.1}):
        out = nucleus_logprobs(lp, np.array([], dtype=int), [1.0], [0.5, 1.0], **kw)
        assert out.shape == (1, 1, 2, 0)


def test_nucleus_from_an_incomplete_list_is_exact_or_nan():
    rng = np.random.default_rng(1)
    p = np.sort(rng.dirichlet(np.full(50, 0.3)))[::-1]
    listed = 12  # the 12 most probable are known; every other token is at most p[11]
    got = nucleus_logprobs(np.log(p[:listed]), np.arange(listed), [1.0, 0.5], [0.5, 0.9, 1.0],
                           unlisted_max=p[listed - 1])  # fmt: skip
    assert np.isnan(got[1]).all()  # temperature != 1 needs every token
    np.testing.assert_allclose(np.exp(got[0, 2]), p[:listed])  # top_p = 1: as listed
    for pi, top_p in enumerate([0.5, 0.9]):
        full = plain_nucleus(p, 1.0, top_p)
        inside = (np.cumsum(p) >= top_p)[: listed - 1].any()  # threshold strictly above p_12
        if inside:
            np.testing.assert_allclose(np.exp(got[0, pi]), full[:listed], atol=1e-12)
        else:
            assert np.isnan(got[0, pi]).all()


def test_local_backend_follows_the_reference_rules(tmp_path):
    """The transformers path: its PMFs and grid are the reference rules applied to the
    logits of an independent forward pass (no xlikert code in the oracle's pass)."""
    pytest.importorskip("torch")
    import torch
    from support.tiny import save_tiny, tiny_prompts
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xlikert.collect import collect

    d = save_tiny(tmp_path / "m")
    temps, tops = (0.5, 1.0, 1.3), (0.8, 1.0)
    ds = collect(tiny_prompts(2, 2), [{"name": "t", "source": str(d)}], progress=False,
                 split_space=False, temperatures=temps, top_ps=tops)  # fmt: skip
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    valid = ds.likert.attrs["models"]["t"]["valid_tokens"]
    ids = np.array([r["id"] for r in valid])
    score = np.array([r["score"] - 1 for r in valid])
    for cell in ds.prompt_text.stack(c=ds.prompt_text.dims):
        text = str(cell.values)
        with torch.no_grad():
            z = model(torch.tensor([tok(text, add_special_tokens=False).input_ids])).logits[0, -1]
        z = z.double().numpy()
        grid = np.exp(nucleus_logprobs(z, ids, temps, tops))  # (T, P, n)
        mass = scale_mass(grid, score, 7)
        where = {d: cell[d].item() for d in ("model", "target", "item")}
        np.testing.assert_allclose(ds.decoding_valid_mass.sel(where), mass.sum(-1), atol=1e-6)
        with np.errstate(invalid="ignore"):  # no valid token in the nucleus: NaN, as stored
            pmf = mass / mass.sum(-1, keepdims=True)
        np.testing.assert_allclose(ds.decoding_pmf.sel(where), pmf, atol=1e-6)
        raw = scale_mass(np.exp(z - np.logaddexp.reduce(z))[ids], score, 7)
        np.testing.assert_allclose(ds.pmf.sel(where), raw / raw.sum(), atol=1e-6)


def test_synthetic_demo_grid_follows_the_tie_rule():
    from xlikert.datasets import synthetic_results

    ds = synthetic_results(n_items=2)
    p = ds.pmf.isel(model=0, target=0, item=0).values
    for t in ds.temperature.values:
        for top_p in ds.top_p.values:
            got = ds.decoding_pmf.isel(model=0, target=0, item=0).sel(temperature=t, top_p=top_p)
            np.testing.assert_allclose(got, plain_nucleus(p, t, top_p), atol=1e-12)


# ----------------------------------------------------------------------------- top-k intervals
def server_listing(p: np.ndarray, k: int, sampled: int, first: bool) -> np.ndarray:
    """The ids a server lists for top_logprobs=k: the sampled token first, then the ranking,
    cut at k entries (vLLM), or the true top k (first=False)."""
    ranking = list(np.argsort(-p, kind="stable"))
    if not first:
        return np.array(ranking[:k])
    out = [sampled] + [i for i in ranking if i != sampled]
    return np.array(out[:k])


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    vocab=st.integers(8, 40),
    k=st.integers(1, 8),
    first=st.booleans(),
    known_counts=st.booleans(),
)
def test_topk_intervals_hold_for_a_server_that_lists_the_sampled_token_first(
    seed, vocab, k, first, known_counts
):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(vocab, rng.choice([0.1, 0.5, 2.0])))
    score = np.full(vocab, -1)
    valid = rng.choice(vocab, size=min(vocab, 7 + int(rng.integers(0, 6))), replace=False)
    score[valid] = np.arange(valid.size) % 7
    score[valid[:7]] = np.arange(7)  # every score has a token
    sampled = int(rng.choice(vocab, p=p))
    listed = server_listing(p, k + 1, sampled, first)  # xlikert asks for k + 1
    unlisted = np.bincount(score[np.setdiff1d(valid, listed)], minlength=7)
    b = topk_intervals(p[listed], score[listed], 7, unlisted if known_counts else None)
    mass = scale_mass(p, score, 7)
    truth, vm = mass / mass.sum(), mass.sum()
    eps = 1e-12
    assert np.all(b["pmf_lower"] <= truth + eps) and np.all(truth <= b["pmf_upper"] + eps)
    assert b["valid_mass_lower"] <= vm + eps <= b["valid_mass_upper"] + 2 * eps
    assert np.all(p[np.setdiff1d(np.arange(vocab), listed)] <= b["unlisted_max"] + eps)


def test_topk_rule_that_trusts_the_smallest_entry_fails_on_such_a_server():
    """The reason for out_of_order=1: with the sampled token first, the k-th listed entry
    is not an upper bound for the unlisted tokens."""
    p = np.array([0.30, 0.25, 0.20, 0.15, 0.06, 0.04])
    score = np.array([-1, 0, -1, 1, -1, -1])
    listed = server_listing(p, 3, sampled=5, first=True)  # [5, 0, 1]: token 2 (0.20) cut
    unlisted = np.array([0, 1])
    naive = topk_intervals(p[listed], score[listed], 2, unlisted, out_of_order=0)
    assert naive["unlisted_max"] < p[2]  # the bound is broken by the cut token
    truth = scale_mass(p, score, 2)
    truth = truth / truth.sum()
    assert (truth < naive["pmf_lower"]).any() or (truth > naive["pmf_upper"]).any()
    safe = topk_intervals(p[listed], score[listed], 2, unlisted, out_of_order=1)
    assert np.all(safe["pmf_lower"] <= truth) and np.all(truth <= safe["pmf_upper"])


def test_topk_rtol_widens_and_reduces_to_the_exact_rule():
    p = np.array([0.5, 0.3, 0.15, 0.01])
    sc = np.array([0, 1, -1, -1])
    exact = topk_intervals(p, sc, 2, np.array([0, 1]), out_of_order=0)
    wide = topk_intervals(p, sc, 2, np.array([0, 1]), out_of_order=0, rtol=1e-3)
    assert np.all(wide["pmf_lower"] < exact["pmf_lower"])
    assert np.all(wide["pmf_upper"] > exact["pmf_upper"])
    assert wide["valid_mass_lower"] < exact["valid_mass_lower"] == 0.8
    # every token listed: the exact rule gives a point, the widened one a proper interval
    full = topk_intervals(p / p.sum(), np.array([0, 1, -1, -1]), 2, np.zeros(2), out_of_order=0)
    np.testing.assert_allclose(full["pmf_lower"], full["pmf_upper"])
    full_w = topk_intervals(p / p.sum(), np.array([0, 1, -1, -1]), 2, np.zeros(2), rtol=2e-4)
    assert np.all(full_w["pmf_upper"] - full_w["pmf_lower"] > 0)
