"""The shipped demo results reproduce from the token ids they store, on the real model.

``xlikert/data/demo_results.nc`` stores, for every cell, the token ids the model read
(``prompt_token_ids``; :func:`xlikert.collect.read_sequence`). One plain transformers
forward pass over them, with the answer rule written out by hand, gives the stored PMF
and valid mass of SmolLM2 (float32 noise of another batch and transformers version
apart).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

import torch

from xlikert.collect import read_sequence
from xlikert.collect.zoo import model_folder
from xlikert.datasets import load_demo_results

SMOL = "SmolLM2-135M-Instruct"


@pytest.mark.usefixtures("smollm2_folder")
def test_the_demo_results_recompute_from_their_token_ids():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ds = load_demo_results(verbose=False)
    assert int(ds.attrs["synthetic"]) == 0
    folder = model_folder({"name": SMOL, "source": "smollm2-135m-instruct"})[0]
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    vocab = tok.get_vocab()
    valid = {i: int(t[-1]) for t, i in vocab.items() if re.fullmatch(r"[Ġ▁ ]?[1-7]", t)}
    bare = {i: y for i, y in valid.items() if tok.convert_ids_to_tokens(i) == str(y)}
    space = vocab["Ġ"]

    def next_probs(ids: list[int]) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()

    for target, item in (("USA", "1"), ("France", "9")):
        seq = read_sequence(ds, model=SMOL, target=target, item=item)
        assert seq.trace.size == 0 and seq.closing.size == 0
        cell = ds.sel(model=SMOL, target=target, item=item)
        # the ids are the text the file says was sent
        assert tok.decode(seq.ids) == str(cell.prompt_text.values)
        # the answer rule written plainly: a valid token, or the bare space then a digit
        ids = seq.ids.tolist()
        p0, p1 = next_probs(ids), next_probs([*ids, space])
        mass = np.zeros(7)
        for i, y in valid.items():
            mass[y - 1] += p0[i]
        for i, y in bare.items():
            mass[y - 1] += p0[space] * p1[i]
        np.testing.assert_allclose(cell.pmf, mass / mass.sum(), atol=1e-4)
        np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), atol=1e-4)
