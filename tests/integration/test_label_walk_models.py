"""The certified walk over the labels' spellings on the offline models (issue 50).

* exactness: the walk to ``answer_tol = 0`` equals the reading that lists and
  teacher-forces every spelling (the rule as it was read before the walk) within 1e-6:
  不对 / 对 on Qwen2.5-Coder-0.5B, "Bill Clinton" / "Bob Dole" on SmolLM2-135M (costly);
* it runs (costly): "Strongly disagree" ... "Strongly agree", spelled in tens of
  thousands of ways and refused before the walk, on Qwen, SmolLM2 and Gemma 3 270M, each
  cell within its stored bound of a tighter reading; the mass the canonical spellings
  miss is printed.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from xlikert.collect.answers.spellings import answer_rule
from xlikert.collect.backends.transformers import LocalModel, load_model
from xlikert.collect.options import CollectOptions

EN7 = ("Strongly disagree", "Disagree", "Somewhat disagree", "Neither agree nor disagree",
       "Somewhat agree", "Agree", "Strongly agree")  # fmt: skip
ITEM = "Purchasing foreign-made products is un-American."
FOLDERS = {"qwen2.5-coder-0.5b-instruct": "qwen_folder", "smollm2-135m-instruct": "smollm2_folder",
           "gemma-3-270m": "gemma_folder"}  # fmt: skip


def _read(lm, labels: tuple[str, ...], system: str, user: str, **opts):
    """One prompt's readout with these labels, by the walk."""
    m = LocalModel(lm, CollectOptions(scale=tuple(range(1, len(labels) + 1)),
                                      answer_labels=labels, **opts))  # fmt: skip
    text = m.template.render(system, user)
    return m, text, m.read_prompts([text], [m.template.encode(text)])


def _listed(m: LocalModel, text: str, labels: tuple[str, ...]):
    """The same prompt read by listing and teacher-forcing every spelling (no walk)."""
    valid, answers, _ = answer_rule(
        m.tokenizer, list(range(1, len(labels) + 1)), labels=dict(enumerate(labels, 1))
    )
    m._use_answers(valid, replace(answers, trie=None))
    return m.read_prompts([text], [m.template.encode(text)])


def _equal_to_listing(lm, labels, system, user):
    m, text, walked = _read(lm, labels, system, user, answer_tol=0.0, answer_max_passes=10**6)
    listed = _listed(m, text, labels)
    assert int(walked["answer_tol_met"][0]) == 1 and float(walked["answer_error"][0]) == 0.0
    for key in ("pmf", "valid_mass"):
        np.testing.assert_allclose(walked[key], listed[key], atol=1e-6, rtol=0, err_msg=key)
    # the grid divides the logits by T = 0.1: the float32 noise between a row read from
    # its parent's cache and a teacher-forced batch grows tenfold (SmolLM2: 1.2e-6)
    for key in ("decoding_pmf", "decoding_valid_mass"):
        np.testing.assert_allclose(walked[key], listed[key], atol=1e-5, rtol=0, err_msg=key)
    return walked


@pytest.mark.usefixtures("qwen_folder")
def test_qwen_chinese_labels_walk_equals_the_listing():
    lm = load_model("qwen2.5-coder-0.5b-instruct", range(1, 8))
    out = _equal_to_listing(lm, ("不对", "对"), "请对下面的说法表态。只回答以下之一：不对、对。",
                            "我喜欢喝茶。")  # fmt: skip
    assert float(out["valid_mass"][0]) > 0.01


@pytest.mark.costly  # 207 s on 2 cores: every node of positive mass, and every spelling listed
@pytest.mark.usefixtures("smollm2_folder")
def test_smollm2_candidates_walk_equals_the_listing():
    lm = load_model("smollm2-135m-instruct", range(1, 8))
    out = _equal_to_listing(lm, ("Bill Clinton", "Bob Dole"),
                            "Answer with ONLY one name: Bill Clinton or Bob Dole.",
                            "Whom did you vote for in 1996?")  # fmt: skip
    assert float(out["valid_mass"][0]) > 0.01


@pytest.mark.costly
@pytest.mark.parametrize("model", list(FOLDERS))
def test_seven_english_labels_run_within_their_bounds(model, request):
    request.getfixturevalue(FOLDERS[model])
    lm = load_model(model, range(1, 8))
    system = "You are a respondent in a survey. Respond with ONLY one of: " + ", ".join(EN7)
    start = time.perf_counter()
    _, _, tight = _read(lm, EN7, system, ITEM, answer_tol=1e-8, answer_max_passes=4096)
    took = {1e-8: time.perf_counter() - start}
    for tol in (1e-2, 1e-4):
        start = time.perf_counter()
        _, _, out = _read(lm, EN7, system, ITEM, answer_tol=tol)
        took[tol] = time.perf_counter() - start
        assert int(out["answer_tol_met"][0]) == 1 and float(out["answer_error"][0]) <= tol
        # the tighter reading lies within this one's bounds (its own width added)
        slack = float(tight["answer_error"][0]) + 1e-9
        assert out["valid_mass_lower"][0] <= tight["valid_mass"][0] + slack
        assert tight["valid_mass"][0] <= out["valid_mass_upper"][0] + slack
        lo, hi = out["pmf_lower"][0], out["pmf_upper"][0]
        assert np.all(lo <= tight["pmf_upper"][0] + 1e-9) and np.all(
            tight["pmf_lower"][0] <= hi + 1e-9
        )
    missed = float(tight["valid_mass"][0] - tight["canonical_valid_mass"][0])
    print(f"{model}: valid mass {float(tight['valid_mass'][0]):.6f}, canonical spellings "
          f"{float(tight['canonical_valid_mass'][0]):.6f}, missed {missed:.6f}, "
          f"{int(tight['answer_passes'][0])} passes; seconds by answer_tol "
          f"{ {f'{t:g}': round(s, 1) for t, s in took.items()} }")  # fmt: skip
