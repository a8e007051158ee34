"""The elicitation level ``stated``: the parser on replies written out by hand, and the
level through the ordinary runner on the tiny model (the reply is generate's)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xlikert.collect.options import CollectOptions
from xlikert.collect.stated import parse_stated, stated_user
from xlikert.core.errors import CollectionError

NAN = float("nan")
FIVE = ["1", "2", "3", "4", "5"]
WORDS = ["Disagree", "Neutral", "Agree"]

#: (reply, labels, status, numbers as written per option)
TABLE = [
    ('{"1": 10, "2": 20, "3": 40, "4": 20, "5": 10}', FIVE, "ok", [10, 20, 40, 20, 10]),
    ('{"5": 10, "4": 20, "3": 40, "2": 20, "1": 10}', FIVE, "ok", [10, 20, 40, 20, 10]),
    (
        '{"1": "10%", "2": "20 %", "3": "40%", "4": "20%", "5": "10%"}',
        FIVE,
        "ok",
        [10, 20, 40, 20, 10],
    ),
    ('{"1": 0.1, "2": 0.2, "3": 0.4, "4": 0.2, "5": 0.1}', FIVE, "ok", [0.1, 0.2, 0.4, 0.2, 0.1]),
    (
        'Here is my answer:\n```json\n{"1": 5, "2": 5, "3": 80, "4": 5, "5": 5}\n```\nThanks.',
        FIVE,
        "ok",
        [5, 5, 80, 5, 5],
    ),
    (
        'Sure! {"1": 30, "2": 30, "3": 30, "4": 5, "5": 5} That is all.',
        FIVE,
        "ok",
        [30, 30, 30, 5, 5],
    ),
    ("1: 10%\n2: 20%\n3: 40%\n4: 20%\n5: 10%", FIVE, "ok", [10, 20, 40, 20, 10]),
    ("5: 10%\n4: 20%\n3: 40%\n2: 20%\n1: 10%", FIVE, "ok", [10, 20, 40, 20, 10]),
    ("- 1: 10\n- 2: 20\n- 3: 40\n- 4: 20\n- 5: 10", FIVE, "ok", [10, 20, 40, 20, 10]),
    (
        "  1 = 10 %\n  2 = 20 %\n  3 = 40 %\n  4 = 20 %\n  5 = 10 %",
        FIVE,
        "ok",
        [10, 20, 40, 20, 10],
    ),
    (
        "My estimates:\n1: 50%\n2: 50%\n3: 0%\n4: 0%\n5: 0%\nHope this helps.",
        FIVE,
        "ok",
        [50, 50, 0, 0, 0],
    ),
    ('{"1": 30, "2": 30, "3": 30, "4": 30, "5": 30}', FIVE, "ok", [30, 30, 30, 30, 30]),
    ('{"Disagree": 20, "Neutral": 30, "Agree": 50}', WORDS, "ok", [20, 30, 50]),
    ('{"agree": "50%", "disagree": "20%", "NEUTRAL": "30%"}', WORDS, "ok", [20, 30, 50]),
    ('Disagree: 20%\nNeutral: 30%\n"Agree": 50%', WORDS, "ok", [20, 30, 50]),
    ('{"1": 10, "2": 20, "3": 70}', FIVE, "missing_options", [10, 20, 70, NAN, NAN]),
    ("1: 50%\n5: 50%", FIVE, "missing_options", [50, NAN, NAN, NAN, 50]),
    ('{"Agree": 100}', WORDS, "missing_options", [NAN, NAN, 100]),
    ('{"1": 10, "2": 20, "3": 4', FIVE, "missing_options", [10, 20, 4, NAN, NAN]),
    ("I would probably agree, but I cannot give numbers.", FIVE, "not_a_distribution", [NAN] * 5),
    ("As an AI, I do not have personal opinions.", WORDS, "not_a_distribution", [NAN] * 3),
    (
        '{"1": -10, "2": 20, "3": 40, "4": 30, "5": 20}',
        FIVE,
        "not_a_distribution",
        [-10, 20, 40, 30, 20],
    ),
    ('{"1": 0, "2": 0, "3": 0, "4": 0, "5": 0}', FIVE, "not_a_distribution", [0, 0, 0, 0, 0]),
    ('{"a": 50, "b": 50}', FIVE, "not_a_distribution", [NAN] * 5),
    ("", FIVE, "no_reply", [NAN] * 5),
    ("   \n  ", WORDS, "no_reply", [NAN] * 3),
]


@pytest.mark.parametrize(("reply", "labels", "status", "numbers"), TABLE)
def test_the_parser_on_replies_written_by_hand(reply, labels, status, numbers):
    r = parse_stated(reply, labels)
    assert r.status == status
    np.testing.assert_array_equal(r.numbers, np.asarray(numbers, dtype=float))
    have = np.isfinite(np.asarray(numbers, dtype=float))
    if have.any():
        assert r.raw_sum == pytest.approx(float(np.asarray(numbers, dtype=float)[have].sum()))
    else:
        assert np.isnan(r.raw_sum)
    if status == "ok":
        np.testing.assert_allclose(r.pmf, np.asarray(numbers) / np.sum(numbers))
    else:
        assert r.pmf is None
    assert json.loads(r.numbers_json(labels)) == {
        lb: x for lb, x in zip(labels, numbers, strict=True) if x == x
    }


def test_the_table_holds_enough_replies_of_every_status():
    statuses = [row[2] for row in TABLE]
    assert len(TABLE) >= 20
    assert {s: statuses.count(s) >= 2 for s in set(statuses)} == dict.fromkeys(
        ("ok", "missing_options", "not_a_distribution", "no_reply"), True
    )


def test_an_instruction_that_does_not_name_the_options_is_refused_by_name():
    with pytest.raises(CollectionError, match=r"stated_instruction must name the options"):
        CollectOptions(stated_instruction="Give a probability for each answer.")
    with pytest.raises(CollectionError, match=r"exp.toml.*stated_instruction must name"):
        CollectOptions.from_mapping({"stated_instruction": "no options"}, where="exp.toml")
    assert stated_user("Q", "Options: {options}", ["A", "B"]) == "Q\n\nOptions: A, B"
    settings = CollectOptions().elicitation_settings("stated")
    assert set(settings) == {"stated_instruction", "stated_tokens"}
    assert "stated_instruction" not in CollectOptions().elicitation_settings("own_words")


# ------------------------------------------------------------------ the tiny model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    pytest.importorskip("transformers")
    from support.tiny import save_answering_tiny

    return str(save_answering_tiny(tmp_path_factory.mktemp("stated") / "model"))


def _prompts(levels):
    from support.tiny import tiny_prompts

    return tiny_prompts(n_targets=2, n_items=2).expand_dims(elicitation=levels)


def _generated(model, ids: list[int], cap: int) -> list[int]:
    """``generate(do_sample=False)`` of the plain model, an ending end-of-turn token dropped."""
    import torch

    stop = sorted(model.end_of_turn)
    with torch.inference_mode():
        out = model.lm.model.generate(
            torch.tensor([ids]), attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
            do_sample=False, max_new_tokens=cap, eos_token_id=stop, pad_token_id=0,
        )  # fmt: skip
    reply = out[0, len(ids) :].tolist()
    return reply[:-1] if reply and reply[-1] in stop else reply


def test_the_stored_reply_is_generate_and_each_cell_is_parsed(tiny, tmp_path):
    import xlikert.collect.backends.transformers as backend
    from xlikert.collect import collect
    from xlikert.core.codecs import decode_token_ids

    out = tmp_path / "stated.nc"
    kw = {"progress": False, "batch_size": 4, "top_k": 3, "stated_tokens": 10}
    ds = collect(_prompts(["first_token", "stated"]), [{"name": "tiny", "source": tiny}], out,
                 **kw)  # fmt: skip
    assert "stated_parse_rule" in ds.attrs and "stated_statuses" in ds.attrs
    first = ds.sel(model="tiny", elicitation="first_token")
    assert (first["stated_status"] == "").all()
    cells = ds.sel(model="tiny", elicitation="stated")
    model = backend.open({"name": "tiny", "source": tiny},
                         CollectOptions(scale=range(1, 8), top_k=3))  # fmt: skip
    try:
        labels = [str(y) for y in range(1, 8)]
        for target in cells["target"].values:
            for item in cells["item"].values:
                c = cells.sel(target=target, item=item)
                p = _prompts(["stated"]).sel(elicitation="stated", target=target, item=item)
                user = stated_user(str(p.user.values), CollectOptions().stated_instruction, labels)
                text = model.template.render(str(p.system.values), user)
                ids = model.template.encode(text)
                assert str(c.prompt_text.values) == text
                reply = decode_token_ids(str(c.reply_token_ids.values)).tolist()
                assert reply == _generated(model, ids, 10)
                reading = parse_stated(model.tokenizer.decode(reply, skip_special_tokens=True),
                                       labels)  # fmt: skip
                assert str(c.stated_status.values) == reading.status
                if reading.pmf is None:
                    assert np.isnan(c.pmf.values).all() and np.isnan(float(c.valid_mass))
                else:
                    np.testing.assert_allclose(c.pmf.values, reading.pmf)
                    assert float(c.valid_mass) == 1.0
    finally:
        model.close()
    # resumed and reused by cell key: a second run computes nothing
    again = collect(_prompts(["first_token", "stated"]), [{"name": "tiny", "source": tiny}],
                    tmp_path / "again.nc", reuse=[out], **kw)  # fmt: skip
    assert int(again.attrs["cells_computed"]) == 0, again.attrs["cells_computed"]
    for name in ("reply_text", "stated_status", "stated_numbers"):
        assert (again[name] == ds[name]).all()
    other = collect(_prompts(["stated"]), [{"name": "tiny", "source": tiny}],
                    stated_instruction="Say the chances of {options}.", **kw)  # fmt: skip
    assert not (other["prompt_text"].values == cells["prompt_text"].values[None]).any()


class _Replying:
    """A stand-in model whose greedy reply is a fixed text (one token per character)."""

    def __init__(self, reply: str):
        self.reply = reply
        self.template = self
        self.tokenizer = self
        self.options = CollectOptions(scale=(0, 1, 2, 3))

    def render(self, system: str, user: str) -> str:
        return f"<{system}|{user}>"

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)

    def greedy_reply(self, ids, cap: int):
        return [ord(c) for c in self.reply][:cap], "eos"


def _stated(model, opts):
    """score_stated on one prompt, labels B and C on the scores 1 and 2 of 0..3."""
    from xlikert.collect.record import UnitResult
    from xlikert.collect.stated import score_stated
    from xlikert.core.schema import ELICITATION_VARIABLES

    res = UnitResult.empty(1, opts.sizes)
    for name, var in ELICITATION_VARIABLES.items():
        res.data[name] = var.full((1,))
    return score_stated(model, [("s", "u")], ["B", "C"], [1, 2], opts, res)


def test_an_ok_reply_puts_its_pmf_on_the_items_own_points():
    """Labels "" off the item's support: the options are the item's points only, and the
    PMF lands on their scores (0 elsewhere)."""
    opts = CollectOptions(scale=(0, 1, 2, 3), stated_tokens=200)
    model = _Replying('{"B": 25, "C": "75%"}')
    d = _stated(model, opts).data
    assert d["stated_status"][0] == "ok" and d["stated_sum"][0] == 100.0
    np.testing.assert_allclose(d["pmf"][0], [0.0, 0.25, 0.75, 0.0])
    assert d["valid_mass"][0] == 1.0
    assert json.loads(d["stated_numbers"][0]) == {"B": 25.0, "C": 75.0}
    assert (
        d["prompt_text"][0]
        == "<s|u\n\n" + opts.stated_instruction.replace("{options}", "B, C") + ">"
    )
    short = _stated(_Replying('{"B": 25, "C": 75}'),
                    CollectOptions(scale=(0, 1, 2, 3), stated_tokens=9))  # fmt: skip
    assert short.data["stated_status"][0] == "missing_options"  # cut at 9 tokens: B only
    assert np.isnan(short.data["pmf"][0]).all() and np.isnan(short.data["valid_mass"][0])


def test_each_cell_reads_the_prompts_own_instruction_and_keeps_its_key(tiny, tmp_path):
    """The prompts' ``stated_instruction`` (the experiment's, per language) is what a stated
    cell reads and what its key hashes: the cells whose instruction is the run's keep the
    key of a run without it (reused), the others are new."""
    from xlikert.collect import collect

    kw = {"progress": False, "batch_size": 4, "top_k": 3, "stated_tokens": 6}
    spec = [{"name": "tiny", "source": tiny}]
    plain = collect(_prompts(["stated"]), spec, tmp_path / "plain.nc", **kw)
    own = "Chances, in percent, of {options}?"
    prompts = _prompts(["stated"])
    targets = [str(t) for t in prompts["target"].values]
    said = [CollectOptions().stated_instruction, own]
    prompts["stated_instruction"] = ("target", said)
    ds = collect(prompts, spec, tmp_path / "own.nc", reuse=[tmp_path / "plain.nc"], **kw)
    labels = ", ".join(str(y) for y in range(1, 8))
    for target, text in zip(targets, said, strict=True):
        cells = ds.sel(model="tiny", elicitation="stated", target=target)
        for item in cells["item"].values:
            p = prompts.sel(elicitation="stated", target=target, item=item)
            assert (
                str(cells.sel(item=item).prompt_text.values).count(
                    f"{p.user.values}\n\n{text.replace('{options}', labels)}"
                )
                == 1
            )
    n_items = prompts.sizes["item"]
    assert int(ds.attrs["cells_computed"]) == n_items  # the own-instruction target only
    same = ds.sel(target=targets[0])["cell_key"].values
    assert (same == plain.sel(target=targets[0])["cell_key"].values).all()
    assert not (ds.sel(target=targets[1])["cell_key"].values
                == plain.sel(target=targets[1])["cell_key"].values).any()  # fmt: skip


def test_a_prompts_instruction_without_the_options_is_refused_before_loading(tmp_path):
    from xlikert.collect import collect

    prompts = _prompts(["first_token", "stated"])
    prompts["stated_instruction"] = "Give percents."
    with pytest.raises(CollectionError, match=r"stated_instruction must name the options"):
        collect(prompts, [{"name": "none", "source": str(tmp_path / "no-such-model")}],
                progress=False)  # fmt: skip


# ------------------------------------------------------------------ reasoning mode
def test_a_reply_is_read_after_its_thought_only():
    """The thought's own JSON-like numbers are never parsed; a reply without the end
    marker (the thought never ended) is no_reply, counted, not dropped."""
    from xlikert.collect.stated import parse_stated_reply

    labels = ["1", "2", "3"]
    reply = ('Hmm, {"1": 80, "2": 10, "3": 10}? Or 1: 5%\n2: 5%\n3: 90%. '
             '</think>\n\n{"1": 20, "2": 30, "3": 50}')  # fmt: skip
    after = parse_stated_reply(reply, labels, "</think>")
    assert after.status == "ok" and after.numbers.tolist() == [20.0, 30.0, 50.0]
    np.testing.assert_allclose(after.pmf, [0.2, 0.3, 0.5])
    # the same text read whole would take the thought's numbers: the split is what differs
    assert parse_stated_reply(reply, labels).numbers.tolist() == [80.0, 10.0, 10.0]
    cot = 'Let me see: {"1": 1, "2": 1, "3": 98}\nAnswer: 1: 50%\n2: 25%\n3: 25%'
    assert parse_stated_reply(cot, labels, "Answer:").numbers.tolist() == [50.0, 25.0, 25.0]
    # a later marker is part of the reply after the first one
    twice = '</think>{"1": 1, "2": 1, "3": 2}</think>{"1": 9, "2": 9, "3": 9}'
    assert parse_stated_reply(twice, labels, "</think>").numbers.tolist() == [1.0, 1.0, 2.0]
    for unended in ('{"1": 80, "2": 10, "3": 10}', "1: 20\n2: 30\n3: 50", ""):
        r = parse_stated_reply(unended, labels, "</think>")
        assert r.status == "no_reply" and r.pmf is None and np.isnan(r.numbers).all()
    assert parse_stated_reply("</think>  ", labels, "</think>").status == "no_reply"
    assert parse_stated_reply("</think> none", labels, "</think>").status == "not_a_distribution"


@pytest.fixture(scope="module")
def thinker(tmp_path_factory) -> str:
    """The micro model (a thinking template, ``</think>`` one token) with the output rows of
    ``y`` and ``</think>`` swapped: it writes the end marker where it would write ``y``."""
    pytest.importorskip("transformers")
    import torch
    from support.tiny import save_micro
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = save_micro(tmp_path_factory.mktemp("thinker") / "model", seed=8)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    y, marker = tok.convert_tokens_to_ids("y"), tok.convert_tokens_to_ids("</think>")
    with torch.no_grad():
        w = model.lm_head.weight
        w[[y, marker]] = w[[marker, y]].clone()
    model.save_pretrained(path)
    return str(path)


def _expected(gen: list[int], stop: set[int], marker: int, budget: int, cap: int):
    """The reply, its end and the thought's length, from generate's tokens, written plainly."""
    eos = bool(gen) and gen[-1] in stop
    reply = gen[:-1] if eos else gen
    k = reply.index(marker) + 1 if marker in reply[:budget] else None
    if k is None:
        short = reply[:budget]
        return short, "thought_eos" if eos and len(reply) <= budget else "thought_length", None
    return reply[: k + cap], "eos" if eos and len(reply) <= k + cap else "length", k


def test_a_reasoning_model_states_after_its_thought_as_generate_writes_it(thinker, tmp_path):
    """Stored reply == generate(do_sample=False) on the same full prompt (the thinking
    template's), the thought included; read after the marker; a thought cut by its budget
    is no_reply; the cell key changes with the reasoning settings."""
    import torch

    import xlikert.collect.backends.transformers as backend
    from xlikert.collect import collect
    from xlikert.core.codecs import decode_token_ids

    cap = 5
    specs = [{"name": f"b{n}", "source": thinker, "reasoning": {"traces": 1, "max_new_tokens": n}}
             for n in (2, 12)]  # fmt: skip
    kw = {"progress": False, "batch_size": 4, "top_k": 3, "stated_tokens": cap}
    ds = collect(_prompts(["first_token", "stated"]), specs, tmp_path / "r.nc", **kw)
    model = backend.open(specs[1], CollectOptions(scale=range(1, 8), top_k=3))
    tok, stop = model.tokenizer, set(model.end_of_turn)
    marker = tok.convert_tokens_to_ids("</think>")
    labels = [str(y) for y in range(1, 8)]
    seen = set()
    try:
        for spec in specs:
            budget = spec["reasoning"]["max_new_tokens"]
            cells = ds.sel(model=spec["name"], elicitation="stated")
            for target in cells["target"].values:
                for item in cells["item"].values:
                    c = cells.sel(target=target, item=item)
                    p = _prompts(["stated"]).sel(elicitation="stated", target=target, item=item)
                    user = stated_user(str(p.user.values), CollectOptions().stated_instruction,
                                       labels)  # fmt: skip
                    text = tok.apply_chat_template(
                        [{"role": "system", "content": str(p.system.values)},
                         {"role": "user", "content": user}],
                        tokenize=False, add_generation_prompt=True, enable_thinking=True,
                    )  # fmt: skip
                    assert str(c.prompt_text.values) == text
                    ids = decode_token_ids(str(c.prompt_token_ids.values)).tolist()
                    assert ids == tok(text, add_special_tokens=False)["input_ids"]
                    with torch.inference_mode():
                        out = model.lm.model.generate(
                            torch.tensor([ids]), attention_mask=torch.ones((1, len(ids)),
                            dtype=torch.long), do_sample=False, max_new_tokens=budget + cap,
                            eos_token_id=sorted(stop), pad_token_id=0,
                        )  # fmt: skip
                    gen = out[0, len(ids) :].tolist()
                    want, end, k = _expected(gen, stop, marker, budget, cap)
                    reply = decode_token_ids(str(c.reply_token_ids.values)).tolist()
                    assert reply == want and str(c.reply_end.values) == end
                    assert str(c.reply_text.values) == tok.decode(want, skip_special_tokens=False)
                    status = str(c.stated_status.values)
                    if k is None:
                        assert status == "no_reply" and np.isnan(c.pmf.values).all()
                    else:
                        after = tok.decode(want[k:], skip_special_tokens=True)
                        assert status == parse_stated(after, labels).status
                    seen.add((spec["name"], k is not None))
    finally:
        model.close()
    assert seen == {("b2", False), ("b12", True)}, seen
    # reused by cell key; a changed thought budget changes the key: its cells are computed
    moved = {"name": "b3", "source": thinker, "reasoning": {"traces": 1, "max_new_tokens": 3}}
    again = collect(_prompts(["first_token", "stated"]), [specs[1], moved],
                    tmp_path / "again.nc", reuse=[tmp_path / "r.nc"], **kw)  # fmt: skip
    per_model = ds["pmf"].sel(model="b2").isel(score=0).size  # every cell of one entry
    assert int(again.attrs["cells_computed"]) == per_model, again.attrs["cells_computed"]
    for name in ("reply_text", "reply_end", "stated_status"):
        assert (again[name].sel(model="b12") == ds[name].sel(model="b12")).all()
