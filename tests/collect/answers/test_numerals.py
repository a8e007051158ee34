"""Numbers in any script (issue 40): the numeral rule, token bytes and per-script mass.

A toy byte-level tokenizer (GPT-2's byte alphabet, as Qwen and SmolLM2 spell their
vocabularies) holds ASCII, full-width and Arabic-Indic digits, an Arabic-Indic digit
split into its two bytes, and distractors that must never count.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from xlikert.collect.answers.numerals import (
    read_numeral,
    rule_scripts,
    scripts,
    shown_scripts,
    write_numeral,
)
from xlikert.collect.answers.spellings import _find_answer_sequences, answer_rule
from xlikert.collect.answers.tokens import find_valid_tokens, known_scripts
from xlikert.collect.answers.vocabulary import _byte_level, show_bytes, token_text, vocabulary
from xlikert.collect.options import CollectOptions
from xlikert.collect.run.identity import numbers_options
from xlikert.core.errors import AnswerLabelError, CollectionError

_TO = {b: c for c, b in _byte_level().items()}


def spell(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "".join(_TO[b] for b in data)


class ByteTok:
    """A byte-level vocabulary: each entry is the GPT-2 spelling of its bytes."""

    all_special_ids = (0,)

    def __init__(self, pieces):
        self.vocab = {"<s>": 0, **{spell(p): i + 1 for i, p in enumerate(pieces)}}
        self.inv = {i: t for t, i in self.vocab.items()}

    def get_vocab(self):
        return dict(self.vocab)

    def convert_tokens_to_string(self, tokens):
        back = _byte_level()
        return bytes(back[c] for t in tokens for c in t).decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, i):
        return self.inv[i]

    def decode(self, ids):
        return self.convert_tokens_to_string([self.inv[i] for i in ids])

    def batch_decode(self, rows):
        return [self.decode(r) for r in rows]


PIECES = [
    "1", "2", "3", " 1", " 2", "１", "２", " ３", "٣", "١", "٢",  # digits, three scripts
    "٥".encode()[:1], "٥".encode()[1:],  # an Arabic-Indic 5 as two byte tokens
    " ", "12", "05", "1٠", "7.", "x", "३",  # distractors (and Devanagari 3)
]  # fmt: skip


@pytest.fixture(scope="module")
def tok():
    return ByteTok(PIECES)


def ids_of(tok, *pieces):
    return {tok.vocab[spell(p)] for p in pieces}


def test_read_and_write_agree_in_every_script():
    for s in scripts():
        for v in (0, 1, 7, 10, 42, -3):
            assert read_numeral(write_numeral(v, s)) == (v, s)
    assert len(scripts()) == len(set(scripts())) and scripts()[0] == "ascii"
    # every Nd character is a digit of exactly one script
    nd = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Nd"]
    assert len(nd) == 10 * len(scripts())
    assert read_numeral("1٠") is None and read_numeral("05") is None and read_numeral("²") is None
    assert shown_scripts({1: "१", 2: "२"}) == ("devanagari",)
    assert rule_scripts("any", {1: "१"}) is None


def test_valid_tokens_in_any_script(tok):
    vt = find_valid_tokens(tok, range(1, 4))
    got = {(tok.inv[i], y, c) for i, y, c in zip(vt.ids, vt.scores, vt.scripts, strict=True)}
    assert {(t, y) for t, y, _ in got} == {
        (spell(p), y) for p, y in [("1", 1), (" 1", 1), ("１", 1), ("١", 1), ("2", 2), (" 2", 2),
                                   ("２", 2), ("٢", 2), ("3", 3), (" ３", 3), ("٣", 3), ("३", 3)]
    }  # fmt: skip
    assert (spell(" ３"), 3, "fullwidth") in got
    assert vt.numeral_scripts == known_scripts(tok) == (
        "ascii", "arabic-indic", "devanagari", "fullwidth"
    )  # fmt: skip
    # restricted to ASCII: the ASCII tokens alone
    ascii_only = find_valid_tokens(tok, range(1, 4), scripts=("ascii",))
    assert set(ascii_only.ids) == ids_of(tok, "1", " 1", "2", " 2", "3")
    assert ascii_only.numeral_scripts == ("ascii",)


def test_labels_shown_in_a_script_are_read_as_their_numbers(tok):
    labels = {1: "١", 2: "٢", 3: "٣"}
    shown = find_valid_tokens(tok, range(1, 4), labels, scripts=rule_scripts("shown", labels))
    assert set(shown.ids) == ids_of(tok, "١", "٢", "٣")
    # a reversed format: label ١ means score 3
    rev = find_valid_tokens(tok, range(1, 4), {1: "٣", 2: "٢", 3: "١"}, scripts=("ascii",))
    by = dict(zip(rev.ids, rev.scores, strict=True))
    assert by[tok.vocab[spell("1")]] == 3 and by[tok.vocab[spell("٣")]] == 1
    with pytest.raises(AnswerLabelError, match="same number"):
        find_valid_tokens(tok, range(1, 3), {1: "1", 2: "١"})
    with pytest.raises(CollectionError, match="unknown numeral script"):
        find_valid_tokens(tok, range(1, 3), scripts=("klingon",))


def test_a_digit_split_between_byte_tokens_is_spelled(tok):
    ans = _find_answer_sequences(tok, [3, 5], {3: "٣", 5: "٥"}, scripts=("arabic-indic",))
    lo, hi = ids_of(tok, "٥".encode()[:1]), ids_of(tok, "٥".encode()[1:])
    five = [s for s, y in zip(ans.sequences, ans.scores, strict=True) if y == 5]
    assert (lo.pop(), hi.pop()) in five
    # the first byte of a digit goes on with a number: it is no stop
    assert tok.vocab[spell("٥".encode()[:1])] in ans.continuation
    assert tok.vocab[spell("x")] not in ans.continuation
    assert tok.vocab[spell("३")] in ans.continuation  # a digit of another script


def test_script_mass_sums_to_the_valid_mass(tok):
    rng = np.random.default_rng(0)
    for labels in (None, {1: "１", 2: "２", 3: "３"}):
        _, ans, rule = answer_rule(tok, [1, 2, 3], labels=labels)
        assert "decimal script" in rule
        logq = np.log(rng.dirichlet(np.ones(ans.width), size=(4, len(ans.contexts))))
        out = ans.readout(logq)
        sm = out["script_mass"]
        read = [scripts().index(s) for s in ans.numeral_scripts]
        np.testing.assert_allclose(sm[:, read].sum(-1), out["valid_mass"], rtol=1e-12)
        others = np.setdiff1d(np.arange(len(scripts())), read)
        assert np.isnan(sm[:, others]).all()
        # by hand: the ASCII column is the sum of the ASCII spellings
        asc = [k for k, c in enumerate(ans.scripts) if c == "ascii"]
        np.testing.assert_allclose(sm[:, 0], ans.spelling_masses(logq)[:, asc].sum(-1), rtol=1e-12)


def test_numerals_option_is_validated_and_keyed():
    assert CollectOptions().numerals == "any"
    with pytest.raises(CollectionError, match="numerals must be one of"):
        CollectOptions(numerals="all")
    a = numbers_options(CollectOptions(scale=(1, 2)))
    b = numbers_options(CollectOptions(scale=(1, 2), numerals="shown"))
    assert a["numerals"] == "any" and b["numerals"] == "shown"
    opts = CollectOptions(scale=(1, 2), answer_labels=("１", "２"), numerals="shown")
    assert opts.numeral_scripts == ("fullwidth",)
    assert opts.sizes["script"] == len(scripts())
    assert list(opts.coords["script"]) == list(scripts())


def test_tokens_read_as_text(tok):
    assert token_text(tok, tok.vocab[spell(" ３")]) == " ３"
    assert token_text(tok, tok.vocab[spell("٥".encode()[:1])]) == "\\xd9"
    assert show_bytes("不同".encode()[:4]) == "不\\xe5"
    assert vocabulary(tok) is vocabulary(tok)  # built once per tokenizer


def test_server_readout_reads_numbers_in_any_script(tok):
    """The OpenAI-compatible backend: listed tokens by text (top-k) and by id (exact)."""
    from xlikert.collect.answers.tokens import find_label_tokens
    from xlikert.collect.backends.openai.readout import Readout
    from xlikert.collect.backends.openai.spec import OpenAISpec

    spec = OpenAISpec(name="m", model="m", base_url="http://127.0.0.1:9")
    opts = CollectOptions(scale=(1, 2, 3))
    by_text = Readout(spec, opts, "topk", False)
    assert [by_text.score_of(t) for t in ("1", " ２", "٣", "▁1", "12", "1٠", "x")] == [
        0, 1, 2, 0, -1, -1, -1
    ]  # fmt: skip
    shown = Readout(spec, opts.replace(numerals="shown"), "topk", False)
    assert [shown.score_of(t) for t in ("1", "１", "٣")] == [0, -1, -1]
    valid = find_label_tokens(tok, [1, 2, 3])
    by_id = Readout(spec, opts, "exact", True, valid, tok)
    for i, y in zip(valid.ids, valid.scores, strict=True):
        assert by_id.score_of(i) == y - 1
    got = {i: np.log(0.05) for i in valid.ids}
    sm = by_id._script_mass(got)
    counts = {c: valid.scripts.count(c) for c in valid.numeral_scripts}
    for c, n in counts.items():
        assert sm[scripts().index(c)] == pytest.approx(0.05 * n)


def test_server_topk_listing_bounds_each_scripts_mass(tok):
    """Top-k mode: each script's listed mass, and a certified interval that holds the
    script's true mass under the full distribution whatever the server left unlisted."""
    from xlikert.collect.answers.tokens import find_label_tokens
    from xlikert.collect.backends.openai.readout import Readout
    from xlikert.collect.backends.openai.spec import OpenAISpec
    from xlikert.collect.record import UnitResult

    spec = OpenAISpec(name="m", model="m", base_url="http://127.0.0.1:9")
    opts = CollectOptions(scale=(1, 2, 3), top_k=4)
    valid = find_label_tokens(tok, [1, 2, 3])
    readout = Readout(spec, opts, "topk", True, valid, tok)
    script = dict(zip(valid.ids, valid.scripts, strict=True))
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(len(tok.vocab), 0.3))
    truth = np.zeros(len(scripts()))
    for i, c in script.items():
        truth[scripts().index(c)] += p[i]
    for n in (2, 4, 8, len(tok.vocab)):  # the server lists its n most probable tokens
        keys = [int(i) for i in np.argsort(-p)[:n]]
        res = UnitResult.empty(1, {**opts.sizes, "script": len(scripts())}, bounded=True)
        readout._script_intervals(res, 0, keys, np.log(p[keys]))
        lo, hi, point = (res.data[k][0] for k in ("script_mass_lower", "script_mass_upper",
                                                  "script_mass"))  # fmt: skip
        read = [scripts().index(c) for c in valid.numeral_scripts]
        assert (lo[read] <= truth[read] + 1e-12).all() and (truth[read] <= hi[read] + 1e-12).all()
        listed = np.zeros(len(scripts()))
        for i in keys:
            if i in script:
                listed[scripts().index(script[i])] += p[i]
        np.testing.assert_allclose(point[read], listed[read], rtol=1e-12)
        off = np.setdiff1d(np.arange(len(scripts())), read)
        assert np.isnan(point[off]).all() and np.isnan(hi[off]).all()
        if n == len(tok.vocab):  # everything listed: the point, within the server's rtol
            r = readout.rtol
            np.testing.assert_allclose(lo[read], truth[read] * (1 - r), rtol=1e-12)
            np.testing.assert_allclose(hi[read], truth[read] * (1 + r), rtol=1e-12)


def test_a_script_shown_without_tokens_of_its_own_takes_the_multi_token_rule(tok):
    # ٣ is a token, ٥ only its two bytes: the one-token rule could not read ٥ as shown
    _, ans, rule = answer_rule(tok, [3, 5], labels={3: "٣", 5: "٥"})
    assert rule.startswith("multi-token")
    assert any(c == "arabic-indic" and len(s) == 2 and y == 5
               for s, y, c in zip(ans.sequences, ans.scores, ans.scripts, strict=True))  # fmt: skip
    _, _, rule = answer_rule(tok, [1, 2, 3], labels={1: "١", 2: "٢", 3: "٣"})
    assert not rule.startswith("multi-token")


def test_word_labels_in_cjk_are_spelled_on_bytes():
    """Issue 40, item 4: labels that share a prefix and a character split between tokens."""
    yi = "意".encode()
    tok = ByteTok(["非常", "同意", "不", "同", yi[:2], yi[2:], " ", "x", "。"])
    _, ans, rule = answer_rule(tok, [1, 2], labels={1: "非常不同意", 2: "非常同意"})
    assert rule.startswith("multi-token")
    got = {
        (tuple(tok.inv[i] for i in s), y) for s, y in zip(ans.sequences, ans.scores, strict=True)
    }
    want = {
        (("非常", "不", "同意"), 1),
        (("非常", "不", "同", yi[:2], yi[2:]), 1),
        (("非常", "同意"), 2),
        (("非常", "同", yi[:2], yi[2:]), 2),
    }
    assert {(tuple(spell(p) for p in s), y) for s, y in want} <= got
    # "非常" then "不" continues the word: no answer stops after "非常"
    assert tok.vocab[spell("不")] in ans.continuation
    assert tok.vocab[spell(yi[:2])] in ans.continuation  # the start of a character
    assert tok.vocab[spell("。")] not in ans.continuation
