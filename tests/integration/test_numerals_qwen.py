"""Numbers in any script on the real Qwen2.5-Coder-0.5B-Instruct (issue 40, item 2).

One collection: CETSCALE items 1 and 2 (target China) under four response formats,
the scale shown in ASCII, full-width, Arabic-Indic and Devanagari digits. Qwen keeps
ASCII and full-width digits as tokens of their own and spells an Arabic-Indic or a
Devanagari digit as two byte tokens, so the first two formats are read by the
one-token rule (with split space) and the last two by the multi-token rule. Each
cell is compared with an independent forward pass in plain transformers under the
stated rule, its spellings and its stop check worked out here from the tokenizer's
bytes without xlikert code.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

import torch
from support.forward import Reader

from xlikert.collect import collect, read_sequence
from xlikert.core.io import open_results
from xlikert.design import load_experiment

pytestmark = [pytest.mark.usefixtures("qwen_folder"), pytest.mark.xdist_group("numerals")]

SCRIPT_DIGITS = {"original": "0123456789", "fullwidth": "０１２３４５６７８９",
                 "arabic": "٠١٢٣٤٥٦٧٨٩", "devanagari": "०१२३४५६७८९"}  # fmt: skip
SCRIPT_NAME = {"original": "ascii", "fullwidth": "fullwidth", "arabic": "arabic-indic",
               "devanagari": "devanagari"}  # fmt: skip

EXPERIMENT = """
[experiment]
name = "numerals"
instrument = "cetscale"
system = '''You are a consumer in a market research study.
Response format: {anchors}.
Respond with ONLY one of {answer_labels}.'''

[factors.target]
levels = ["China"]

[factors.format]
kind = "format"

[factors.format.levels]
original = "original"
fullwidth = { labels = "１ ２ ３ ４ ５ ６ ７" }
arabic = { labels = "١ ٢ ٣ ٤ ٥ ٦ ٧" }
devanagari = { labels = "१ २ ३ ४ ५ ६ ७" }

[[models]]
name = "qwen"
source = "qwen2.5-coder-0.5b-instruct"
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("numerals")
    path = folder / "numerals.toml"
    path.write_text(EXPERIMENT, encoding="utf-8")
    exp = load_experiment(path)
    prompts = exp.build_prompts().sel(item=["1", "2"])
    # items 1 and 2 in ASCII and full-width digits; item 1 alone in the two scripts read
    # by the multi-token rule (35 s a cell for Devanagari on 2 cores: its digits are
    # three bytes, spelled many ways), the rest NaN
    parts = []
    for name, part in (("one-token", prompts.sel(format=["original", "fullwidth"])),
                       ("multi-token", prompts.sel(format=["arabic", "devanagari"], item=["1"]))):  # fmt: skip
        collect(part, exp.models, folder / f"{name}.nc", progress=False)
        parts.append(open_results(folder / f"{name}.nc"))
    return (
        exp,
        prompts,
        xr.concat(parts, "format", join="outer", coords="minimal", compat="override"),
    )


@pytest.fixture(scope="module")
def independent(qwen_folder):
    """Plain transformers on the zoo's float32 weights and the tokenizer's bytes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tok = AutoTokenizer.from_pretrained(qwen_folder)
    model = AutoModelForCausalLM.from_pretrained(qwen_folder, dtype=torch.float32).eval()
    back = {c: b for b, c in bytes_to_unicode().items()}
    special = set(tok.all_special_ids)
    data = {}
    for t, i in tok.get_vocab().items():
        if i not in special and all(c in back for c in t):
            data[i] = bytes(back[c] for c in t)
    return tok, model, data


def _first_char(b: bytes) -> str | None:
    """The first character of a token's bytes; None where they cut it off."""
    for k in range(1, min(4, len(b)) + 1):
        try:
            return b[:k].decode()
        except UnicodeDecodeError:
            continue
    return None


def _cont(data: dict[int, bytes]) -> np.ndarray:
    """Ids that go on with a number: a decimal digit first (any script), or the start
    of one's UTF-8 bytes (a digit split between tokens), no leading space."""
    starts = set()
    for cp in range(0x110000):
        if unicodedata.decimal(chr(cp), None) is not None:
            b = chr(cp).encode()
            starts.update(b[:k] for k in range(1, len(b)))
    out = []
    for i, b in data.items():
        first = _first_char(b)
        if first is None:
            if b in starts:
                out.append(i)
        elif unicodedata.decimal(first, None) is not None:
            out.append(i)
    return np.asarray(out)


def _spellings(data: dict[int, bytes], text: str, space: int) -> list[tuple[int, ...]]:
    """Token sequences whose bytes are ``text`` (first token: optional leading space),
    or a bare space token and then such a sequence without one."""
    word = text.encode()
    by = {}
    for i, b in data.items():
        if len(b) <= len(word) + 1:
            by.setdefault(b, []).append(i)

    def ways(rest: bytes) -> list[tuple[int, ...]]:
        if not rest:
            return [()]
        out = []
        for k in range(1, len(rest) + 1):
            for i in by.get(rest[:k], ()):
                out += [(i, *w) for w in ways(rest[k:])]
        return out

    seqs = ways(word)
    seqs += [(i, *w) for k in range(1, len(word) + 1) for i in by.get(b" " + word[:k], ())
             for w in ways(word[k:])]  # fmt: skip
    seqs += [(space, *w) for w in ways(word)]
    return sorted(set(seqs))


def _masses(model, ids, spellings, stop_ids) -> np.ndarray:
    """P of each score's spellings: the product of the tokens' probabilities; with
    ``stop_ids`` (the continuation ids), times P(the next token is none of them). The
    prompt is read once (transformers' own KV cache, logits at its last position only);
    each answer context is read on a copy of it, once for every score."""
    import copy

    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
    prompt = out.cache  # transformers >= 5.2 names the KV cache `cache`
    cache: dict[tuple[int, ...], np.ndarray] = {
        (): torch.softmax(out.logits[0, -1].double(), -1).numpy()
    }

    def dist(ctx):
        if ctx not in cache:
            with torch.no_grad():
                z = model(torch.tensor([list(ctx)]), cache=copy.deepcopy(prompt),
                          use_cache=True, logits_to_keep=1).logits[0, -1].double()  # fmt: skip
            cache[ctx] = torch.softmax(z, -1).numpy()
        return cache[ctx]

    def mass(seqs) -> float:
        total = 0.0
        for s in seqs:
            p = 1.0
            for k, t in enumerate(s):
                p *= dist(s[:k])[t]
            if stop_ids is not None:
                p *= 1.0 - dist(s)[stop_ids].sum()
            total += p
        return total

    return np.asarray([mass(seqs) for seqs in spellings])


def test_qwen_digits_per_script_are_pinned(independent):
    """Which scripts' digits Qwen's vocabulary holds as tokens of their own."""
    from xlikert.collect.answers.tokens import known_scripts
    from xlikert.collect.answers.vocabulary import numeral_index

    tok, _, _ = independent
    assert known_scripts(tok) == ("ascii", "fullwidth")
    singles = {(n.script, n.value) for n in numeral_index(tok) if not n.marked}
    for d in range(10):
        assert ("ascii", d) in singles and ("fullwidth", d) in singles
        assert len(tok.encode(SCRIPT_DIGITS["fullwidth"][d])) == 1
        for name in ("arabic", "devanagari"):  # two byte tokens each
            assert len(tok.encode(SCRIPT_DIGITS[name][d])) == 2
    # Qwen splits every ASCII number into digits; two full-width numbers are tokens
    assert {v for s, v in singles if s == "ascii"} == set(range(10))
    assert {v for s, v in singles if s == "fullwidth"} == set(range(10)) | {10, 20}


def test_fullwidth_is_read_as_the_numbers_shown(run):
    _, _, ds = run
    vm = ds.valid_mass.sel(model="qwen", target="China")
    asc, full = vm.sel(format="original").values, vm.sel(format="fullwidth").values
    # measured: 0.9896 vs 0.9805 (item 1), 0.9784 vs 0.9675 (item 2: shown full-width the
    # model answers more numbers off the scale and names more points in words, see
    # examples/fullwidth_answers.py); before the numeral rule, 0.03-0.05
    np.testing.assert_allclose(full, asc, atol=0.015)
    assert (asc > 0.9).all() and (full > 0.9).all()
    sm = ds.script_mass.sel(model="qwen", target="China", format="fullwidth")
    # shown full-width, answered ASCII: the mass per script says which
    read = sm.sel(script=["ascii", "fullwidth"]).sum("script").values
    np.testing.assert_allclose(read, full, atol=1e-12)
    assert np.isnan(sm.sel(script="thai")).all()  # a script Qwen has no number token for
    assert "numeral_rule" in ds.attrs and "script" in ds.script_mass.dims


@pytest.mark.parametrize("fmt", ["arabic", "devanagari"])
def test_arabic_indic_and_devanagari_are_read_as_their_numbers(run, fmt):
    _, _, ds = run
    cell = ds.sel(model="qwen", target="China", format=fmt, item="1")
    assert float(cell.valid_mass) > 0.5
    sm = cell.script_mass
    scripts = [s for s in sm.script.values if not np.isnan(sm.sel(script=s).values).all()]
    assert set(scripts) == {"ascii", "fullwidth", SCRIPT_NAME[fmt]}
    np.testing.assert_allclose(sm.sel(script=scripts).sum("script"), cell.valid_mass, atol=1e-12)


# Devanagari's three-byte digits have many byte spellings: its independent pass took 916 s
# on a loaded 2-core machine (passed 2026-11-27), a costly test; the default run keeps the
# two-byte Arabic-Indic.
@pytest.mark.parametrize(
    "fmt", ["original", "fullwidth", "arabic", pytest.param("devanagari", marks=pytest.mark.costly)]
)
def test_each_cell_equals_an_independent_forward_pass(run, independent, fmt):
    _, _, ds = run
    tok, model, data = independent
    space = tok.convert_tokens_to_ids("Ġ")
    scripts = ["original", "fullwidth"] + ([fmt] if fmt in ("arabic", "devanagari") else [])
    multi = fmt in ("arabic", "devanagari")
    stop = _cont(data) if multi else None
    item = "1"
    ids = read_sequence(ds, model="qwen", target="China", format=fmt, item=item).ids.tolist()
    labels = SCRIPT_DIGITS[fmt]
    # the label shown first means score 1 (ascending formats): label digit d means score d
    spellings = []
    for y in range(1, 8):
        seqs = [s for sc in scripts for s in _spellings(data, SCRIPT_DIGITS[sc][y], space)]
        if not multi:  # the one-token rule with split space: no stop check, <= 2 tokens
            seqs = [s for s in seqs if len(s) == 1 or (len(s) == 2 and s[0] == space)]
        spellings.append(seqs)
    masses = _masses(model, ids, spellings, stop)
    cell = ds.sel(model="qwen", target="China", format=fmt, item=item)
    assert labels[1] in str(cell.prompt_text.values)
    np.testing.assert_allclose(float(cell.valid_mass), masses.sum(), atol=1e-5)
    np.testing.assert_allclose(cell.pmf.values, masses / masses.sum(), atol=1e-5)


def test_numerals_shown_counts_only_the_script_shown(run):
    exp, prompts, ds = run
    one = prompts.sel(format=["fullwidth"], item=["1"])
    shown = collect(one, exp.models, progress=False, numerals="shown")
    cell = shown.sel(model="qwen", target="China", format="fullwidth", item="1")
    full = ds.sel(model="qwen", target="China", format="fullwidth", item="1")
    np.testing.assert_allclose(
        float(cell.valid_mass), float(full.script_mass.sel(script="fullwidth")), rtol=1e-5
    )
    assert np.isnan(float(cell.script_mass.sel(script="ascii")))
    assert str(cell.cell_key.values) != str(full.cell_key.values)


def test_topk_of_a_chinese_prompt_reads_back_as_chinese(run, independent):
    """Tokens as text (issue 40, item 3): no stored token is a byte-level string."""
    exp, prompts, _ = run
    tok, _, _ = independent
    one = prompts.sel(format=["original"], item=["1"]).copy()
    one["system"][:] = "请只用中文回答。"
    one["user"][:] = "你同意这个说法吗？请回答“同意”或“不同意”。"
    ds = collect(one, exp.models, progress=False, top_k=10)
    cell = ds.sel(model="qwen", target="China", format="original", item="1")
    texts = [str(t) for t in cell.topk_token.values]
    ids = [int(i) for i in cell.topk_token_id.values]
    cjk = [t for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)]
    assert cjk, texts  # the model answers in Chinese, and the file shows it
    assert not any(c in t for t in texts for c in "ĠäåæçèéĊ"), texts  # no byte-level letters
    for t, i in zip(texts, ids, strict=True):
        if "\\x" not in t:  # whole characters: the tokenizer's own decoding
            assert t == tok.decode([i]), (t, i)


# ---------------------------------------------------------------- word labels (item 4)
WORDS = """
[instrument]
name = "tea"
citation = "none"
language = "zh"
default_framing = "plain"

[scale]
min = 1
max = {n}
answers = "labels"
anchors = {{ {anchors} }}

[framings]
plain = "请对下面的说法表态。只回答以下之一：{{answer_labels}}。"

[[items]]
id = "1"
template = "我喜欢喝茶。"
"""


def _word_cont(data: dict[int, bytes]) -> np.ndarray:
    """Ids that go on with a word: a letter, digit or '_' first, or the start of a
    character cut off (a lead byte first)."""
    out = []
    for i, b in data.items():
        first = _first_char(b)
        if (first is None and b[:1] >= b"\xc0") or (first and (first.isalnum() or first == "_")):
            out.append(i)
    return np.asarray(out)


def _word_cell(tmp_path, labels: list[str]):
    anchors = ", ".join(f'{y} = "{w}"' for y, w in enumerate(labels, 1))
    (tmp_path / "tea.toml").write_text(WORDS.format(n=len(labels), anchors=anchors), "utf-8")
    (tmp_path / "exp.toml").write_text(
        '[experiment]\ninstrument = "tea.toml"\n[[models]]\nname = "qwen"\n'
        'source = "qwen2.5-coder-0.5b-instruct"\n', encoding="utf-8")  # fmt: skip
    exp = load_experiment(tmp_path / "exp.toml")
    return collect(exp.build_prompts(), exp.models, progress=False)


def _check_word_cell(ds, independent, labels: list[str]) -> None:
    tok, model, data = independent
    space = tok.convert_tokens_to_ids("Ġ")
    ids = read_sequence(ds, model="qwen", item="1").ids.tolist()
    spellings = [_spellings(data, w, space) for w in labels]
    info = ds.likert.attrs["models"]["qwen"]
    assert info["answers_by_labels"][" ".join(labels)].startswith("multi-token"), info
    from xlikert.collect.answers.spellings import answer_rule  # the same spellings as listed here

    _, ans, _ = answer_rule(tok, list(range(1, len(labels) + 1)),
                            labels=dict(enumerate(labels, 1)))  # fmt: skip
    assert set(ans.sequences) == {s for seqs in spellings for s in seqs}
    # every prefix of every spelling read once, on the prompt's cache (a trie walk)
    dist = Reader(model, ids).tree([s for seqs in spellings for s in seqs])
    stop = _word_cont(data)
    masses = np.array([
        sum(np.prod([dist[s[:k]][t] for k, t in enumerate(s)]) * (1.0 - dist[s][stop].sum())
            for s in seqs)
        for seqs in spellings
    ])  # fmt: skip
    cell = ds.isel(model=0).sel(item="1")
    np.testing.assert_allclose(float(cell.valid_mass), masses.sum(), atol=1e-5)
    np.testing.assert_allclose(cell.pmf.values, masses / masses.sum(), atol=1e-5)


def test_chinese_word_labels_equal_an_independent_pass(independent, tmp_path):
    """Issue 40, item 4, on Qwen's tokenizer: 不对 / 对 answered with the labels, every
    spelling (32, most of them splitting a character between byte tokens) with its stop
    check (after 不 the word goes on: 不 alone is no answer), against plain transformers
    over spellings listed here from the bytes."""
    labels = ["不对", "对"]
    _check_word_cell(_word_cell(tmp_path, labels), independent, labels)


@pytest.mark.costly
def test_labels_sharing_a_prefix_equal_an_independent_pass(independent, tmp_path):
    """非常不同意 / 非常同意: after 非常 the word goes on, so no answer stops there (1,012
    spellings; the reading runs its 1,012 leaves a chunk at a time)."""
    labels = ["非常不同意", "非常同意"]
    _check_word_cell(_word_cell(tmp_path, labels), independent, labels)


def test_labels_of_too_many_spellings_are_refused_before_reading(independent):
    """Qwen 2.5 spells "Strongly disagree" ... "Strongly agree" in 51,699 ways: refused at
    once, naming the labels (counted, not listed); the count is the listing's."""
    from xlikert.collect.answers.spellings import answer_rule
    from xlikert.core.errors import AnswerLabelError

    tok, _, _ = independent
    english = {1: "Strongly disagree", 2: "Disagree", 3: "Agree", 4: "Strongly agree"}
    with pytest.raises(AnswerLabelError, match=r"'Strongly disagree' \([\d,]+ spellings\)"):
        answer_rule(tok, [1, 2, 3, 4], labels=english, max_positions=20_000)
    _, ans, _ = answer_rule(tok, [1, 2], labels={1: "不同意", 2: "同意"}, max_positions=20_000)
    with pytest.raises(AnswerLabelError, match="max_answer_positions=100"):
        answer_rule(tok, [1, 2], labels={1: "不同意", 2: "同意"}, max_positions=100)
    n_tokens = sum(len(s) for s in ans.sequences)
    answer_rule(tok, [1, 2], labels={1: "不同意", 2: "同意"}, max_positions=n_tokens)
    with pytest.raises(AnswerLabelError):
        answer_rule(tok, [1, 2], labels={1: "不同意", 2: "同意"}, max_positions=n_tokens - 1)
