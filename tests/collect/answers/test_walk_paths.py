"""Every path that reads word labels reaches the labels' walk on the transformers backend:
respondents (persona prompts read from their shared prefixes) and a non-substantive option
answered in words ("Don't know"), each against plain forward passes written here. (The
nominal item answered with the candidates' names is walked in test_item_options.)"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_word_tiny  # noqa: E402

from xlikert.collect import collect  # noqa: E402
from xlikert.collect.options import CollectOptions  # noqa: E402

LABELS = ("No", "Nay", "Yes")
DK = "Don't know"
PERSONAS = ["You are a nurse from Leeds.", "You are a farmer from Kent."]
ITEMS = ["Tea is good.", "Rain is fine."]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_word_tiny(tmp_path_factory.mktemp("paths") / "model", (*LABELS, DK))


def hand_masses(folder, text: str, labels) -> np.ndarray:
    """Each label's probability after a rendered prompt: its characters, or a bare space
    then them, times P(no letter, digit or '_' right away next); a plain forward pass."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tok(text, add_special_tokens=False).input_ids
    vocab, special = tok.get_vocab(), set(tok.all_special_ids)
    goes_on = [i for t, i in vocab.items()
               if i not in special and t[0] not in " ▁Ġ" and (t[0].isalnum() or t[0] == "_")]  # fmt: skip
    out = np.zeros(len(labels))
    for k, label in enumerate(labels):
        for spelling in ([vocab[c] for c in label], [vocab[" "], *(vocab[c] for c in label)]):
            with torch.no_grad():
                z = model(torch.tensor([[*ids, *spelling]])).logits[0, len(ids) - 1 :].double()
            p = torch.softmax(z, -1).numpy()
            out[k] += np.prod([p[n, t] for n, t in enumerate(spelling)]) * (
                1.0 - p[len(spelling), goes_on].sum()
            )
    return out


def test_respondents_answering_in_words_are_walked(folder):
    coords = {"respondent": ["r0", "r1"], "item": ["1", "2"]}
    user = np.array([[f"{p}\n{it}\nAnswer No, Nay or Yes:" for it in ITEMS] for p in PERSONAS])
    prompts = xr.Dataset({"user": (("respondent", "item"), user)}, coords=coords,
                         attrs={"instrument": "tiny", "scale_min": 1, "scale_max": 3})  # fmt: skip
    prompts["system"] = xr.DataArray("Answer in one word.")
    ds = collect(prompts, [{"name": "tiny", "source": str(folder)}], progress=False,
                 answer_labels=LABELS, max_answer_positions=4, answer_tol=0.0,
                 batch_size=8).isel(model=0)  # fmt: skip
    assert (ds.answer_passes > 1).all() and (ds.answer_error == 0).all()  # the walk read them
    for r, i in np.ndindex(2, 2):
        cell = ds.isel(respondent=r, item=i)
        m = hand_masses(folder, str(cell.prompt_text.values), LABELS)
        np.testing.assert_allclose(cell.pmf.values, m / m.sum(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(float(cell.valid_mass), m.sum(), rtol=1e-4)


def test_dont_know_in_words_is_walked_as_a_non_substantive_option(folder):
    import xlikert.collect.backends.transformers as backend

    opts = CollectOptions(scale=range(1, 4), answer_labels=(*LABELS, DK), nonsubstantive=(DK,),
                          max_answer_positions=4, answer_tol=0.0)  # fmt: skip
    model = backend.open({"name": "tiny", "source": str(folder)}, opts)
    assert model.answers.sequences == () and model.answers.layout is not None
    res = model.score([("Answer in one word.", "Is tea good? No, Nay, Yes or Don't know:")])
    d = res.data
    assert d["answer_passes"][0] > 1 and d["answer_error"][0] == 0
    m = hand_masses(folder, str(d["prompt_text"][0]), (*LABELS, DK))
    assert m[-1] > 0  # "Don't know" carries mass (ten letters: little)
    np.testing.assert_allclose(d["pmf"][0], m[:3] / m[:3].sum(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(d["valid_mass"][0], m[:3].sum(), rtol=1e-4)
    np.testing.assert_allclose(d["nonsubstantive_mass"][0], m[3:], rtol=1e-3)
    lo, hi = d["nonsubstantive_mass_lower"][0], d["nonsubstantive_mass_upper"][0]
    assert (lo <= m[3:] * (1 + 1e-3)).all() and (m[3:] <= hi * (1 + 1e-3)).all()
