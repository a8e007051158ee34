"""Word labels on a llama.cpp server (llama-cpp-python) by the labels' walk (issue 50).

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
from xlikert.core.errors import AnswerLabelError

LABELS = ("Strongly agree", "Agree", "Disagree", "Strongly disagree")
PROMPT = ("", "Do you agree that tea is better than coffee? Reply with Strongly agree, Agree, "
          "Disagree or Strongly disagree.")  # fmt: skip
#: The quantised kernels' noise on a mass of a few percent (the GGUF is Q4_1)
SLACK = 2e-3


def _options(**kw) -> CollectOptions:
    return CollectOptions(scale=(1, 2, 3, 4), answer_labels=LABELS, temperatures=(1.0,),
                          top_ps=(0.9, 1.0), **kw)  # fmt: skip


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
    lm = load_model("smollm2-135m-instruct", range(1, 8))
    t = LocalModel(lm, _options(answer_tol=1e-4))
    text = t.template.render(*PROMPT)
    assert r.data["prompt_text"][0] == text
    ref = {
        k: np.asarray(v)[0] for k, v in t.read_prompts([text], [t.template.encode(text)]).items()
    }
    err = float(ref["answer_error"]) + SLACK
    print(f"server: valid mass [{d['valid_mass_lower']:.5f}, {d['valid_mass_upper']:.5f}], pmf "
          f"widths {np.round(d['pmf_upper'] - d['pmf_lower'], 4)}, {int(d['answer_passes'])} "
          f"passes; transformers: valid mass {ref['valid_mass']:.5f}, pmf {np.round(ref['pmf'], 4)}")  # fmt: skip
    assert d["valid_mass_lower"] - err <= ref["valid_mass"] <= d["valid_mass_upper"] + err
    assert np.all(d["pmf_lower"] - err <= ref["pmf"]) and np.all(ref["pmf"] <= d["pmf_upper"] + err)
    assert np.all(d["pmf_lower"] <= d["pmf"]) and np.all(d["pmf"] <= d["pmf_upper"])
    assert float(d["answer_error"]) >= float(d["valid_mass_upper"] - d["valid_mass_lower"]) - 1e-12
    # temperature 1 measured (top-p 1), the rest of the grid not
    assert np.isnan(d["decoding_pmf"][0, 0]).all()
    np.testing.assert_allclose(d["decoding_pmf"][0, 1], d["pmf"], rtol=1e-12)


def test_a_server_whose_nodes_cannot_be_certified_is_refused_by_name(llamacpp_smol, smollm2_folder):
    # the same server named llama.cpp: its requests would not be checked token by token
    with pytest.raises(AnswerLabelError, match=r"labels' walk .*'llama\.cpp'"):
        _open(llamacpp_smol, smollm2_folder, server="llama.cpp")
