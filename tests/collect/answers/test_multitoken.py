"""Exact multi-token answers (0-10 scale) against a brute-force enumeration of spellings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from support.tiny import build_tokenizer, nucleus, save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.answers.spellings import _find_answer_sequences
from xlikert.collect.answers.tokens import needs_sequences

SCALE = list(range(0, 11))
MARKERS = (" ", "▁", "Ġ")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("mt") / "model", seed=3)


@pytest.fixture(scope="module")
def prompts():
    ds = tiny_prompts(2, 3)
    ds.attrs.update(scale_min=0, scale_max=10)
    return ds


@pytest.fixture(scope="module")
def result(tiny_dir, prompts):
    return collect(prompts, [{"name": "t", "source": str(tiny_dir)}], progress=False, batch_size=8)


def spellings(tok) -> dict[int, list[tuple[int, ...]]]:
    """Every 1- or 2-token spelling of each value (plus a leading bare space), by brute force."""
    special = set(tok.all_special_ids)
    vocab = {i: t for t, i in tok.get_vocab().items() if i not in special}

    def strip(t):
        return t[1:] if t[:1] in MARKERS else t

    out: dict[int, list[tuple[int, ...]]] = {y: [] for y in SCALE}
    words = {str(y): y for y in SCALE}
    for i, t in vocab.items():
        if strip(t) in words and strip(t):
            out[words[strip(t)]].append((i,))
    for (i, a), (j, b) in itertools.product(vocab.items(), repeat=2):
        if b[:1] in MARKERS or not strip(a) or not b:
            continue
        if strip(a) + b in words:
            out[words[strip(a) + b]].append((i, j))
    # a bare space token, then a spelling without any marker (" 10" as " ", "1", "0")
    spaces = [i for i, t in vocab.items() if t in MARKERS]
    for y, seqs in list(out.items()):
        plain = [s for s in seqs if all(vocab[t][:1] not in MARKERS for t in s)]
        out[y] += [(sp, *s) for sp in spaces for s in plain]
    return out


def brute_force(model, tok, text: str, temp: float = 1.0, top_p: float = 1.0):
    """P(value) from plain full forward passes, one per spelling."""
    ids = tok(text, add_special_tokens=False)["input_ids"]
    special = set(tok.all_special_ids)
    cont = [i for t, i in tok.get_vocab().items() if i not in special and t[:1] in "0123456789"]
    stop = np.ones(len(tok), bool)
    stop[cont] = False

    def dist(seq):
        with torch.no_grad():
            z = model(torch.tensor([ids + list(seq)])).logits[0, -1].double()
        return nucleus(torch.softmax(z, -1).numpy(), temp, top_p)

    mass = np.zeros(len(SCALE))
    for y, seqs in spellings(tok).items():
        for seq in seqs:
            p = 1.0
            for k, t in enumerate(seq):
                p *= dist(seq[:k])[t]
            mass[y] += p * dist(seq)[stop].sum()
    return mass


def test_spellings_match_brute_force():
    tok = build_tokenizer()
    ans = _find_answer_sequences(tok, SCALE)
    want = spellings(tok)
    got: dict[int, set] = {y: set() for y in SCALE}
    for seq, y in zip(ans.sequences, ans.scores, strict=True):
        got[y].add(seq)
    assert got == {y: set(v) for y, v in want.items()}
    assert any(len(s) == 2 for s in want[10])  # "10" really needs two tokens here
    assert needs_sequences(SCALE) and not needs_sequences(range(1, 8))


def test_exact_pmf_equals_enumeration(result, tiny_dir):
    from transformers import AutoModelForCausalLM

    tok = build_tokenizer()
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()
    assert result.pmf.sizes["score"] == 11
    np.testing.assert_allclose(result.pmf.sum("score"), 1.0, atol=1e-12)
    assert bool((result.valid_mass <= 1 + 1e-12).all())
    for target, item in [("USA", "1"), ("France", "3")]:
        cell = result.sel(model="t", target=target, item=item)
        mass = brute_force(model, tok, str(cell.prompt_text.values))
        np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), rtol=1e-5)
        np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6)
        assert mass[10] > 0  # the two-token answer carries mass
    # the decoding grid: temperature and nucleus at every answer position
    np.testing.assert_allclose(
        result.decoding_pmf.sel(temperature=1.0, top_p=1.0), result.pmf, atol=1e-10
    )
    cell = result.sel(model="t", target="USA", item="2")
    mass = brute_force(model, tok, str(cell.prompt_text.values), temp=0.5, top_p=0.9)
    got = cell.decoding_valid_mass.sel(temperature=0.5, top_p=0.9)
    np.testing.assert_allclose(float(got), mass.sum(), atol=1e-6)
    if mass.sum() > 0:
        got_pmf = cell.decoding_pmf.sel(temperature=0.5, top_p=0.9).values
        np.testing.assert_allclose(got_pmf, mass / mass.sum(), atol=1e-6)


def test_provenance_and_batching(result, tiny_dir, prompts):
    info = result.likert.attrs["models"]["t"]
    assert info["answers"].startswith("multi-token (exact")
    tens = [r for r in info["answer_spellings"] if r["score"] == 10]
    # stored as text: the tiny tokenizer's '▁1' is the text " 1", beside the bare space token
    assert {tuple(r["tokens"]) for r in tens} == {("1", "0"), (" 1", "0"), (" ", "1", "0")}
    other = collect(
        prompts,
        [{"name": "t", "source": str(tiny_dir)}],
        progress=False,
        batch_size=1,
        prefix_cache=False,
    )
    np.testing.assert_allclose(other.pmf, result.pmf, atol=1e-6)
    np.testing.assert_allclose(other.valid_mass, result.valid_mass, rtol=1e-5)
