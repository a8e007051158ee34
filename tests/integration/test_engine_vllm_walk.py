"""The labels' walk on the in-process vLLM engine equals the transformers backend's (issue 50).

Four English labels on SmolLM2-135M ("Strongly agree" ... "Strongly disagree", spelled in
thousands of ways: only the walk reads them), one prompt, ``answer_tol = 1e-3``: the live
engine of ``tests/support/vllm_jobs.py`` (its job ``walk``) and the transformers backend on
the same float32 weights read the same nodes (the same passes) and give the same masses
and bounds within float noise; each backend's point lies within the other's bounds. The
same labels asked as a battery in one conversation (sequential administration, job
``sequential_walk``) give the transformers backend's answer-history tree and item
marginals, each history's walk entering the tree by its certified lower ends.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.vllm_jobs import (
    WALK,
    walk_battery,
    walk_elicitation_options,
    walk_levels,
    walk_options,
)

pytest.importorskip("torch")
pytest.importorskip("transformers")

from xlikert.collect.backends.transformers import LocalModel, load_model


def test_in_process_vllm_walks_the_labels_as_transformers(vllm_in_process, tmp_path):
    out = tmp_path / "walk.json"
    res = vllm_in_process.run("walk", out)
    assert res.ok, res.error
    v = {
        k: np.asarray(x) if isinstance(x, list) else x
        for k, x in json.loads(out.read_text()).items()
    }
    assert v["rule"].startswith("multi-token (certified walk")
    m = LocalModel(load_model("smollm2-135m-instruct", range(1, 8)), walk_options())
    texts = [m.template.render(WALK["system"], u) for u in WALK["users"]]
    assert [m.template.encode(x) for x in texts] == v["ids"].tolist()
    t = m.read_prompts(texts, v["ids"].tolist())  # both backends read the two walks together
    assert not m.answers.sequences  # the spellings are too many to list: the walk reads them
    # the same rounds of the same nodes, each backend's tolerance met
    np.testing.assert_array_equal(v["answer_passes"], t["answer_passes"])
    assert int(v["answer_passes"].sum()) == v["walk_passes"]
    assert (v["answer_tol_met"] == 1).all() and (t["answer_tol_met"] == 1).all()
    keys = ("pmf", "valid_mass", "pmf_lower", "pmf_upper", "valid_mass_lower",
            "valid_mass_upper", "canonical_pmf", "canonical_valid_mass", "decoding_pmf")  # fmt: skip
    diff = {k: float(np.nanmax(np.abs(v[k] - t[k]))) for k in keys}
    print("max |vLLM - transformers|:", {k: f"{d:.2g}" for k, d in diff.items()})
    for k in keys:  # float32 rows of two engines: noise of 1e-7 on a mass of 1e-2
        np.testing.assert_allclose(v[k], t[k], atol=1e-5, rtol=0, err_msg=k)
    np.testing.assert_allclose(v["answer_error"], t["answer_error"], atol=1e-6, rtol=0)
    noise = 1e-5  # the PMF's float noise between the engines (3.3e-6 seen)
    for a, b in ((v, t), (t, v)):  # each point within the other's certified bounds
        assert np.all(b["pmf_lower"] - noise <= a["pmf"]) and np.all(
            a["pmf"] <= b["pmf_upper"] + noise
        )
        assert np.all(b["valid_mass_lower"] - noise <= a["valid_mass"]) and np.all(
            a["valid_mass"] <= b["valid_mass_upper"] + noise
        )


def test_in_process_vllm_administers_walked_labels_as_transformers(vllm_in_process, tmp_path):
    """Sequential administration over the walked labels (two items: five histories, each
    read by the walk): the same tree, the same marginals within float noise, each within
    the other's certified bounds; reasoning mode over them is still refused, by name."""
    from xlikert.collect.context import administer

    out = tmp_path / "sequential_walk.json"
    res = vllm_in_process.run("sequential_walk", out)
    assert res.ok, res.error
    v = {k: np.asarray(x) if isinstance(x, list) else x
         for k, x in json.loads(out.read_text()).items()}  # fmt: skip
    m = LocalModel(load_model("smollm2-135m-instruct", range(1, 8)), walk_options())
    assert m.walks_listing()  # only the walk reads these labels
    with pytest.warns(RuntimeWarning, match="answers' own readings"):  # the walks' widths
        r = administer(m, walk_battery())
    t, tree = r.marginals(), r.tree
    S = len(WALK["labels"])
    assert len(tree.paths) == v["paths"].shape[0] == 1 + S  # every history read
    np.testing.assert_array_equal(v["paths"], np.asarray(tree.paths))
    assert v["passes"] == r.passes and v["walk_passes"] == m.walk_passes > r.passes
    assert v["tol_met"] == r.tol_met
    eps = np.asarray(tree.answer_error)
    assert (eps > 0).all() and (eps <= WALK["answer_tol"]).all()  # bounded, within tol
    for k, got in (("pmf", tree.pmf), ("valid_mass", tree.valid_mass), ("answer_error", eps)):
        np.testing.assert_allclose(v[f"tree_{k}"], got, atol=1e-5, rtol=0, err_msg=k)
    diff = {k: float(np.nanmax(np.abs(v[k] - t[k]))) for k in t}
    print("max |vLLM - transformers| (sequential):", {k: f"{d:.2g}" for k, d in diff.items()})
    for k in t:  # float32 rows of two engines
        np.testing.assert_allclose(v[k], t[k], atol=1e-5, rtol=0, err_msg=k)
    noise = 1e-5
    assert (t["error"] > 0).all()  # the readings' widths entered the items' bounds
    for a, b in ((v, t), (t, v)):  # each item's PMF within the other's certified bounds
        assert np.all(b["pmf_lower"] - noise <= a["pmf"]) and np.all(
            a["pmf"] <= b["pmf_upper"] + noise
        )
    said = v["reasoning_error"]
    assert said is not None and "reasoning mode on vLLM" in said
    assert "max_answer_positions" in said and "sequential" not in said


def test_in_process_vllm_elicits_walked_labels_as_transformers(vllm_in_process, tmp_path):
    """The levels prefix (the labels' walk after the prefix), greedy (the reply parsed by
    the labels' trie) and own_words (the walk below each reply prefix that starts a label)
    over the walked labels: the transformers backend's records within float noise."""
    out = tmp_path / "elicitation_walk.json"
    res = vllm_in_process.run("elicitation_walk", out)
    assert res.ok, res.error
    v = json.loads(out.read_text())
    m = LocalModel(load_model("smollm2-135m-instruct", range(1, 8)), walk_elicitation_options())
    assert m.walks_listing()
    t = walk_levels(m)
    for level, rec in t.items():
        assert sorted(v[level]) == sorted(rec), level
        for k, x in rec.items():
            a, b = np.asarray(v[level][k]), np.asarray(x)
            if b.dtype.kind == "f":  # float32 rows of two engines (own_words: as its own test)
                atol = 1e-4 if level == "own_words" else 1e-5
                np.testing.assert_allclose(a, b, atol=atol, rtol=0, equal_nan=True,
                                           err_msg=f"{level} {k}")  # fmt: skip
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"{level} {k}")
    pre = t["prefix"]  # the walk read the prefix's answers, certified to answer_tol
    assert 0 < pre["answer_error"][0] <= WALK["answer_tol"] and pre["answer_passes"][0] > 0
    assert np.isfinite(t["own_words"]["pmf"]).all() and t["own_words"]["elicitation_passes"][0] > 0
    print(
        "elicitation over walked labels: greedy reply",
        v["greedy"]["reply_text"],
        "prefix pmf",
        np.round(v["prefix"]["pmf"], 4),
    )


def test_vllm_server_walk_bounds_hold_the_transformers_reading(vllm_server, smollm2_folder):
    """The same labels on vLLM's server (the same float32 weights): each node a token-id
    ``/completions`` request listing its 64 most probable tokens by id; the stored bounds
    hold the transformers backend's walk to a tighter tolerance."""
    from xlikert.collect.backends.openai import OpenAIModel, parse_openai_spec

    spec = parse_openai_spec({"name": "m", "source": "openai:smol", "base_url": vllm_server.url,
                              "tokenizer": str(smollm2_folder), "walk_logprobs": 64})  # fmt: skip
    opts = walk_options().replace(answer_max_passes=64)
    m = OpenAIModel.open(spec, opts, (WALK["system"], WALK["users"][0]))
    try:  # the unlisted mass keeps answer_tol out of reach: the bound reached, said
        with pytest.warns(RuntimeWarning, match=r"did not meet answer_tol=0.001 .*walk_logprobs"):
            r = m.score([(WALK["system"], WALK["users"][0])])
    finally:
        m.close()
    d = {k: np.asarray(v)[0] for k, v in r.data.items()}
    assert r.mode == "topk" and 0 < int(d["answer_passes"]) <= 64
    t = LocalModel(load_model("smollm2-135m-instruct", range(1, 8)),
                   walk_options().replace(answer_tol=1e-5))  # fmt: skip
    text = t.template.render(WALK["system"], WALK["users"][0])
    ref = {
        k: np.asarray(v)[0] for k, v in t.read_prompts([text], [t.template.encode(text)]).items()
    }
    print(f"vLLM server: valid mass [{d['valid_mass_lower']:.6f}, {d['valid_mass_upper']:.6f}], "
          f"pmf widths {np.round(d['pmf_upper'] - d['pmf_lower'], 4)}, {int(d['answer_passes'])} "
          f"passes; transformers: valid mass {ref['valid_mass']:.6f}")  # fmt: skip
    err = float(ref["answer_error"]) + 1e-5  # float noise between the engines
    assert d["valid_mass_lower"] - err <= ref["valid_mass"] <= d["valid_mass_upper"] + err
    assert np.all(d["pmf_lower"] - err <= ref["pmf"]) and np.all(ref["pmf"] <= d["pmf_upper"] + err)
