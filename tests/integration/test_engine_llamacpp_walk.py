"""Word labels and numbers of several digits on a llama.cpp server (llama-cpp-python) by the
labels' walk (issue 50).

The server lists the top ``walk_logprobs`` tokens of each node only, and leaves special
tokens (the end of turn that stops a label) out of its listings by text, so its reading is
certified, not exact: the test checks that the stored bounds hold the transformers
backend's reading of the same weights (the GGUF dequantised; the server computes with the
quantised kernels, hence a small slack) and that a server whose node reads cannot be
certified is refused by name before any cell is read.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("transformers")

from xlikert.collect.backends.openai import OpenAIModel, parse_openai_spec
from xlikert.collect.backends.transformers import LocalModel, load_model
from xlikert.collect.options import CollectOptions
from xlikert.core.errors import AnswerLabelError, CollectionError

LABELS = ("Strongly agree", "Agree", "Disagree", "Strongly disagree")
PROMPT = ("", "Do you agree that tea is better than coffee? Reply with Strongly agree, Agree, "
          "Disagree or Strongly disagree.")  # fmt: skip
#: The quantised kernels' noise on a mass of a few percent (the GGUF is Q4_1)
SLACK = 2e-3
#: A 0-10 item: "10" is two tokens ("1", "0") in SmolLM2's vocabulary
ELEVEN = tuple(range(0, 11))
NUMBER_PROMPT = ("", "On a scale from 0 to 10, how much do you like tea? Reply with one number "
                 "from 0 to 10.")  # fmt: skip


def _options(**kw) -> CollectOptions:
    return CollectOptions(scale=(1, 2, 3, 4), answer_labels=LABELS, temperatures=(1.0,),
                          top_ps=(0.9, 1.0), **kw)  # fmt: skip


def _holds(d: dict, scale, options: CollectOptions, prompt: tuple[str, str], text: str) -> dict:
    """The transformers backend's reading of ``prompt`` (the same weights, dequantised),
    after checking that the server read the same text and that its stored bounds hold it
    within the reading's own error and :data:`SLACK`; the reading returned."""
    t = LocalModel(load_model("smollm2-135m-instruct", scale), options)
    rendered = t.template.render(*prompt)
    assert text == rendered
    ref = {k: np.asarray(v)[0]
           for k, v in t.read_prompts([rendered], [t.template.encode(rendered)]).items()}  # fmt: skip
    err = float(ref["answer_error"]) + SLACK
    print(f"server: valid mass [{d['valid_mass_lower']:.5f}, {d['valid_mass_upper']:.5f}], "
          f"pmf widths up to {np.max(d['pmf_upper'] - d['pmf_lower']):.2g}, "
          f"{int(d['answer_passes'])} passes; transformers: valid mass {ref['valid_mass']:.5f}, "
          f"pmf {np.round(ref['pmf'], 4)}")  # fmt: skip
    assert d["valid_mass_lower"] - err <= ref["valid_mass"] <= d["valid_mass_upper"] + err
    assert np.all(d["pmf_lower"] - err <= ref["pmf"]) and np.all(ref["pmf"] <= d["pmf_upper"] + err)
    return ref


def _open(srv, folder, **kw) -> OpenAIModel:
    spec = {"name": "m", "source": "openai:smol", "base_url": srv.url,
            "tokenizer": str(folder), "concurrency": 1, "backoff": 0.05, **kw}  # fmt: skip
    return OpenAIModel.open(parse_openai_spec(spec), _options(answer_tol=1e-3,
                            answer_max_passes=24), PROMPT)  # fmt: skip


@pytest.mark.costly  # 75-192 s on 2 loaded cores: 24 node requests, and the transformers walk
def test_walk_bounds_hold_the_transformers_reading(llamacpp_smol, smollm2_folder):
    m = _open(llamacpp_smol, smollm2_folder, walk_logprobs=100)
    try:
        with warnings.catch_warnings(record=True) as told:
            warnings.simplefilter("always")
            r = m.score([PROMPT])
        prov = m.provenance()
    finally:
        m.close()
    d = {k: np.asarray(v)[0] for k, v in r.data.items()}
    assert r.mode == "topk" and "certified walk" in prov["answers"] and prov["walk_logprobs"] == 100
    assert 0 < int(d["answer_passes"]) <= 24 and int(d["answer_tol_met"]) == 0
    assert any("answer_tol=0.001" in str(w.message) for w in told)  # the bound reached, said
    _holds(d, range(1, 8), _options(answer_tol=1e-4), PROMPT, r.data["prompt_text"][0])
    assert np.all(d["pmf_lower"] <= d["pmf"]) and np.all(d["pmf"] <= d["pmf_upper"])
    assert float(d["answer_error"]) >= float(d["valid_mass_upper"] - d["valid_mass_lower"]) - 1e-12
    # temperature 1 measured (top-p 1), the rest of the grid not
    assert np.isnan(d["decoding_pmf"][0, 0]).all()
    np.testing.assert_allclose(d["decoding_pmf"][0, 1], d["pmf"], rtol=1e-12)


def test_a_server_whose_nodes_cannot_be_certified_is_refused_by_name(llamacpp_smol, smollm2_folder):
    # the same server named llama.cpp: its requests would not be checked token by token
    with pytest.raises(AnswerLabelError, match=r"labels' walk .*'llama\.cpp'"):
        _open(llamacpp_smol, smollm2_folder, server="llama.cpp")


def test_a_0_to_10_item_is_walked_and_its_bounds_hold_the_transformers_reading(
    llamacpp_smol, smollm2_folder
):
    """Numbers of several digits in top-k mode (llama-cpp-python has no logprob_token_ids):
    read by the labels' walk, not refused; the stored bounds hold the transformers backend's
    reading of the same prompt (answer_tol 1e-5) within its error and the quantised kernels'
    slack. Named llama.cpp (no request checked token by token), the same item is refused."""
    opts = CollectOptions(scale=ELEVEN, temperatures=(1.0,), top_ps=(1.0,), answer_tol=1e-3,
                          answer_max_passes=24)  # fmt: skip
    spec = {"name": "m", "source": "openai:smol", "base_url": llamacpp_smol.url,
            "tokenizer": str(smollm2_folder), "concurrency": 2, "backoff": 0.05,
            "walk_logprobs": 1000}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bound reached, said (checked in the test above)
        m = OpenAIModel.open(parse_openai_spec(spec), opts, NUMBER_PROMPT)
        try:
            r = m.score([NUMBER_PROMPT])
            prov = m.provenance()
        finally:
            m.close()
    d = {k: np.asarray(v)[0] for k, v in r.data.items()}
    assert r.mode == "topk" and prov["server_kind"] == "llama-cpp-python"
    assert "certified walk" in prov["answers"] and "logprob_token_ids" in prov["exact_unavailable"]
    assert any(len(s["ids"]) == 2 for s in prov["answer_spellings"])  # "10" among them
    ref = _holds(d, ELEVEN, opts.replace(answer_tol=1e-5), NUMBER_PROMPT,
                 r.data["prompt_text"][0])  # fmt: skip
    assert ref["valid_mass"] > 0.05  # the item is answered with numbers: a real test
    assert np.all(d["pmf_lower"] <= d["pmf"]) and np.all(d["pmf"] <= d["pmf_upper"])
    assert float(d["answer_error"]) >= float(d["valid_mass_upper"] - d["valid_mass_lower"]) - 1e-12
    with pytest.raises(CollectionError, match=r"need several tokens.*this one is 'llama\.cpp'"):
        OpenAIModel.open(parse_openai_spec({**spec, "server": "llama.cpp"}), opts, NUMBER_PROMPT)
