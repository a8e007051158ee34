"""The elicitation factor through the ordinary runner, on a tiny random-weight model.

Each level's reading is compared with an independent computation: ``prefix`` with a
plain forward pass over the prompt followed by the prefix, ``greedy``'s reply with
``model.generate(do_sample=False)`` and its in-text PMF with plain forward passes over
the prompt and the reply's tokens before the answer; a reply cap of 1 gives the
first-token PMF. A file without the factor is unchanged, and the first-token cells of a
file with it are the same cells (the same keys) as those of a file without it.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_answering_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.elicitation import (
    ELICITATION_KEY,
    Elicitations,
    check_elicitation_backends,
    elicitation_sent,
    parse_answer,
)
from xlikert.collect.options import CollectOptions
from xlikert.core.codecs import decode_token_ids
from xlikert.core.errors import CollectionError, ConfigError, DesignError, ElicitationLevelError
from xlikert.core.schema import ELICITATION_VARIABLES
from xlikert.design.elicitation import check_elicitation_levels
from xlikert.design.parser import experiment_from_dict

KW = {"progress": False, "batch_size": 4, "chunk_size": 3, "top_k": 3}
LEVELS = ["first_token", "prefix", "greedy"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(save_answering_tiny(tmp_path_factory.mktemp("eli") / "model"))


@pytest.fixture(scope="module")
def model(tiny):
    import xlikert.collect.backends.transformers as backend

    m = backend.open({"name": "tiny", "source": tiny},
                     CollectOptions(scale=range(1, 8), top_k=3, batch_size=4))  # fmt: skip
    yield m
    m.close()


def prompts(levels=LEVELS) -> xr.Dataset:
    return tiny_prompts(n_targets=2, n_items=3).expand_dims(elicitation=levels)


@pytest.fixture(scope="module")
def run(tiny, tmp_path_factory) -> xr.Dataset:
    out = tmp_path_factory.mktemp("run") / "eli.nc"
    return collect(prompts(), [{"name": "tiny", "source": tiny}], out, reply_tokens=6,
                   answer_prefix="Answer: ", **KW)  # fmt: skip


def independent_readout(model, ids: list[int]) -> tuple[np.ndarray, float]:
    """The PMF and valid mass after ``ids`` from plain forward passes (no cache, no batch):
    each spelling of each score's probability as the product of its tokens' softmax
    probabilities, summed per score."""
    import torch

    hf = model.lm.model

    def probs(ctx: list[int]) -> np.ndarray:
        with torch.inference_mode():
            z = hf(input_ids=torch.tensor([ctx])).logits[0, -1].double().numpy()
        return np.exp(z - z.max()) / np.exp(z - z.max()).sum()

    scale = list(model.answers.scale)
    mass = np.zeros(len(scale))
    for seq, y in zip(model.answers.sequences, model.answers.scores, strict=True):
        p = 1.0
        for k, t in enumerate(seq):
            p *= probs(list(ids) + list(seq[:k]))[t]
        mass[scale.index(y)] += p
    return mass / mass.sum(), float(mass.sum())


def generated(model, ids: list[int], cap: int) -> list[int]:
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


# ------------------------------------------------------------------ the design


def test_the_factor_parses_and_refuses_unknown_levels():
    base = {"experiment": {"instrument": "cetscale", "items": ["1", "2"]},
            "factors": {"target": {"levels": ["USA"]}}}  # fmt: skip
    exp = experiment_from_dict({**base, "factors": {**base["factors"], "elicitation": {}}})
    assert exp.factor("elicitation").levels == ("first_token", "prefix", "greedy")
    ds = exp.build_prompts()
    assert ds.user.dims == ("target", "elicitation", "item")
    # the factor changes no prompt text: how the answer is read changes
    assert (ds.user.isel(elicitation=0) == ds.user.isel(elicitation=2)).all()
    bad = {**base, "factors": {**base["factors"], "elicitation": {"levels": ["chat"]}}}
    with pytest.raises(ConfigError, match=r"unknown level\(s\) \['chat'\]"):
        experiment_from_dict(bad)
    named = {**base, "factors": {**base["factors"], "how": {"kind": "elicitation"}}}
    with pytest.raises(ConfigError, match="must be named 'elicitation'"):
        experiment_from_dict(named)
    with pytest.raises(DesignError, match="each level once"):
        check_elicitation_levels(["greedy", "greedy"])


def test_cells_of_each_level_and_their_keys():
    user = prompts().user
    el = Elicitations.of(user)
    assert el is not None and el.used == LEVELS
    flat = np.asarray(user.transpose(*user.dims).values).ravel()
    assert len(el.levels) == flat.size
    where = np.indices(user.shape)[user.dims.index("elicitation")].ravel()
    assert el.levels == [LEVELS[i] for i in where]
    opts = CollectOptions()
    assert elicitation_sent("first_token", [1, 2], opts) == [1, 2]
    a = elicitation_sent("greedy", [1, 2], opts)
    b = elicitation_sent("greedy", [1, 2], opts.replace(reply_tokens=5))
    assert a[ELICITATION_KEY]["settings"] == {"reply_tokens": 32} and a != b
    with pytest.raises(CollectionError, match=r"unknown level\(s\) \['chat'\]"):
        Elicitations.of(tiny_prompts(1, 1).expand_dims(elicitation=["chat"]).user)


def test_parse_answer_takes_the_first_answer_token():
    assert parse_answer([9, 4, 3], {3: 7, 4: 2}) == (1, 2)
    assert parse_answer([], {3: 7}) is None
    assert parse_answer([9, 9], {3: 7}) is None


# ------------------------------------------------------------------ each level's reading


def test_prefix_equals_an_independent_pass_after_the_prefix(run, model):
    cells = run.sel(model="tiny", elicitation="prefix")
    for target in cells.target.values:
        for item in cells.item.values:
            c = cells.sel(target=target, item=item)
            p = prompts().sel(elicitation="prefix", target=target, item=item)
            text = model.template.render(str(p.system.values), str(p.user.values)) + "Answer: "
            assert str(c.prompt_text.values) == text
            ids = decode_token_ids(str(c.prompt_token_ids.values))
            assert ids.tolist() == model.template.encode(text)
            pmf, valid = independent_readout(model, ids.tolist())
            np.testing.assert_allclose(c.pmf.values, pmf, atol=1e-6, rtol=0)
            assert abs(float(c.valid_mass) - valid) < 1e-6


def test_greedy_reply_equals_generate_and_its_in_text_pmf_a_plain_pass(run, model):
    cells = run.sel(model="tiny", elicitation="greedy")
    scores = {int(i): int(y) for i, y in zip(model.valid.ids, model.valid.scores, strict=True)}
    answered = 0
    for target in cells.target.values:
        for item in cells.item.values:
            c = cells.sel(target=target, item=item)
            p = prompts().sel(elicitation="greedy", target=target, item=item)
            ids = model.template.encode(
                model.template.render(str(p.system.values), str(p.user.values))
            )
            reply = decode_token_ids(str(c.reply_token_ids.values)).tolist()
            assert reply == generated(model, ids, 6)
            found = parse_answer(reply, scores)
            if found is None:
                assert int(c.reply_answered) == 0 and np.isnan(c.pmf.values).all()
                continue
            answered += 1
            t, y = found
            assert (int(c.reply_answered), float(c.reply_answer)) == (1, y)
            assert int(c.reply_answer_position) == t
            read = decode_token_ids(str(c.prompt_token_ids.values)).tolist()
            assert read == ids + reply[:t]
            pmf, valid = independent_readout(model, read)
            np.testing.assert_allclose(c.pmf.values, pmf, atol=1e-6, rtol=0)
            assert abs(float(c.valid_mass) - valid) < 1e-6
    assert answered >= 2  # the boosted model answers, so the comparison ran


def test_a_reply_cap_of_one_is_the_first_token_reading(tiny, tmp_path, model):
    ds = collect(prompts(["first_token", "greedy"]), [{"name": "tiny", "source": tiny}],
                 reply_tokens=1, **KW)  # fmt: skip
    first = ds.sel(model="tiny", elicitation="first_token")
    greedy = ds.sel(model="tiny", elicitation="greedy")
    top = first.topk_token.isel(rank=0)
    ok = greedy.reply_answered.values == 1
    assert ok.any() and (~ok).any()  # both cases occur on this model
    # answered: the reply is the most probable token, an answer, and the PMF is the
    # first-token PMF; not answered: that token is no answer
    np.testing.assert_allclose(greedy.pmf.values[ok], first.pmf.values[ok], atol=1e-6, rtol=0)
    np.testing.assert_allclose(greedy.valid_mass.values[ok], first.valid_mass.values[ok],
                               atol=1e-6, rtol=0)  # fmt: skip
    assert (greedy.reply_answer_position.values[ok] == 0).all()
    assert (greedy.reply_text.values == top.values).all()
    assert (greedy.reply_end.values == "length").all()


def test_a_file_without_the_factor_is_unchanged_and_its_cells_are_reused(tiny, tmp_path):
    spec = [{"name": "tiny", "source": tiny}]
    plain = collect(tiny_prompts(n_targets=2, n_items=3), spec, tmp_path / "plain.nc", **KW)
    assert not any(name in plain for name in ELICITATION_VARIABLES)
    assert "answer_parse_rule" not in plain.attrs
    both = collect(prompts(["first_token", "greedy"]), spec, tmp_path / "both.nc",
                   reuse=[tmp_path / "plain.nc"], reply_tokens=2, **KW)  # fmt: skip
    first = both.sel(elicitation="first_token")
    assert (first.cell_key == plain.cell_key).all()
    assert (first.reused_from != "").all() and (both.sel(elicitation="greedy").reused_from
                                                == "").all()  # fmt: skip
    assert int(both.attrs["cells_reused"]) == plain.cell_key.size
    np.testing.assert_array_equal(first.pmf.values, plain.pmf.values)
    assert both.attrs["answer_parse_rule"].startswith("the answer of a reply")
    greedy_keys = set(both.sel(elicitation="greedy").cell_key.values.ravel())
    assert not greedy_keys & set(plain.cell_key.values.ravel())


def test_every_level_is_reused_by_its_key_and_other_settings_are_not(tiny, tmp_path, run):
    spec = [{"name": "tiny", "source": tiny}]
    src = tmp_path / "first.nc"
    run.to_netcdf(src)
    again = collect(prompts(), spec, reply_tokens=6, answer_prefix="Answer: ", reuse=[src],
                    **KW)  # fmt: skip
    assert int(again.attrs["cells_reused"]) == run.cell_key.size
    for v in ("pmf", "valid_mass", "reply_answer"):
        np.testing.assert_array_equal(again[v].values, run[v].values)
    assert (again.reply_text == run.reply_text).all()
    assert (again.cell_key == run.cell_key).all()
    # another prefix or reply cap: those levels' cells are new, the first-token ones reused
    other = collect(prompts(), spec, reply_tokens=5, answer_prefix="My answer is",
                    reuse=[src], **KW)  # fmt: skip
    reused = other.reused_from != ""
    assert reused.sel(elicitation="first_token").all()
    assert not reused.sel(elicitation=["prefix", "greedy"]).any()


def test_backends_and_modes_that_cannot_read_a_level_are_refused_before_loading(tiny):
    server = [{"name": "srv", "source": "openai:some-model", "base_url": "http://127.0.0.1:9"}]
    # refused by name before anything runs: no server listens on port 9
    with pytest.raises(ElicitationLevelError, match=r"'own_words'.*OpenAI-compatible server"):
        collect(prompts(["first_token", "greedy", "own_words"]), server, **KW)
    # prefix renders the prompt with the model's chat template: a server entry without a
    # tokenizer cannot, and is refused by name too
    with pytest.raises(ElicitationLevelError, match=r"'prefix'.*give `tokenizer`"):
        collect(prompts(["prefix"]), server, **KW)
    seq = prompts(["greedy"]).expand_dims(administration=["sequential"])
    with pytest.raises(CollectionError, match=r"does not combine|do not combine"):
        collect(seq, [{"name": "tiny", "source": tiny}], **KW)


@pytest.mark.parametrize(
    ("levels", "backend", "match"),
    [
        (["stated", "own_words"], "transformers",
         r"model 'r': the elicitation level\(s\) \['own_words'\] do not combine with reasoning "
         r"mode .* reads \['stated'\] .* with an entry of the same model without reasoning"),
        (["prefix"], "transformers", r"\['prefix'\] do not combine with reasoning mode"),
        (["greedy"], "transformers", r"\['greedy'\] do not combine with reasoning mode"),
        (["stated"], "vllm", r"reasoning mode are read on the transformers backend only, not "
                             r"'vllm': use backend = 'transformers'"),
    ],
)  # fmt: skip
def test_reasoning_mode_reads_stated_only_and_refuses_the_rest_by_name(levels, backend, match):
    """A model in reasoning mode reads ``stated`` on transformers; every other level (and
    stated on another backend) is refused by name, with what to do, before anything loads."""
    spec = {"name": "r", "source": "some/model", "backend": backend,
            "reasoning": {"traces": 2}}  # fmt: skip
    used = Elicitations(["first_token", *levels])
    with pytest.raises(CollectionError, match=match):
        check_elicitation_backends([spec], used, CollectOptions())
    check_elicitation_backends([{**spec, "backend": "transformers"}],
                               Elicitations(["first_token", "stated"]), CollectOptions())  # fmt: skip
