"""The numeral rule on the real engines (issue 40, item 2): numbers in any script.

A scale shown in full-width digits, read by the in-process vLLM
backend (exact: SmolLM2 spells these digits as two byte tokens, so the multi-token
rule reads them, teacher forced in the engine), by the vLLM server (exact mode, the
same rule teacher forced over HTTP) and by the llama.cpp server (top-k:
Qwen2.5-Coder holds the full-width digits as tokens of their own), each compared with
the transformers backend's reading of the same prompts under the same rule. One
item, one or two cells; the engines are the session's (``conftest.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from xlikert.collect import collect
from xlikert.core.io import open_results
from xlikert.design import load_experiment

EXPERIMENT = """
[experiment]
name = "numerals"
instrument = "cetscale"
system = '''You are a consumer in a market research study.
Response format: {{anchors}}.
Respond with ONLY one of {{answer_labels}}.'''
{scale}
[factors.target]
levels = ["China"]

[factors.format]
kind = "format"

[factors.format.levels]
{levels}

[[models]]
name = "m"
source = "{source}"
"""
FULLWIDTH = 'fullwidth = { labels = "１ ２ ３ ４ ５ ６ ７" }'
#: SmolLM2 spells each full-width digit in two byte tokens: its cells read the scale 1..3
#: (every answer context is an engine request; 1..7 took twice the time, the same checks)
SHORT = '[scale]\nmin = 1\nmax = 3\nanchors = { 1 = "Strongly disagree", 3 = "Strongly agree" }\n'
FULLWIDTH_SHORT = 'fullwidth = { labels = "１ ２ ３" }'


def _experiment(tmp_path, source: str, *levels: str, scale: str = ""):
    path = tmp_path / "numerals.toml"
    text = EXPERIMENT.format(levels="\n".join(levels), source=source, scale=scale)
    path.write_text(text, encoding="utf-8")
    return path


def _transformers_reading(path):
    """The transformers backend's reading of the experiment's first item under the same
    rule (the reference of every engine here)."""
    exp = load_experiment(path)
    return collect(exp.build_prompts().isel(item=[0]), exp.models, progress=False,
                   temperatures=(1.0,), top_ps=(0.9, 1.0))  # fmt: skip


def test_in_process_vllm_reads_numbers_in_any_script(vllm_in_process, tmp_path):
    """Exact mode, one cell: its PMF, valid mass and mass per script equal the transformers
    backend's under the same rule (SmolLM2 spells every full-width digit as two byte tokens,
    so the cell is read by the multi-token rule with its stop check; with the Arabic-Indic
    format as a second cell this passed too, 2026-11-27, at twice the time)."""
    path = _experiment(tmp_path, "smollm2-135m-instruct", FULLWIDTH_SHORT, scale=SHORT)
    out, shown = tmp_path / "numerals.nc", tmp_path / "shown.nc"
    res = vllm_in_process.run("numerals", path, out, shown)
    assert res.ok, res.error
    v = open_results(out)
    loc = _transformers_reading(path)
    assert v.likert.attrs["models"]["m"]["backend"] == "vllm (in process)"
    assert "１" in str(v.prompt_text.sel(format="fullwidth").values.ravel()[0])
    sm = v.script_mass.isel(model=0, item=0, target=0)
    read = [str(s) for s in sm.script.values if not np.isnan(sm.sel(script=s)).all()]
    assert set(read) == {"ascii", "fullwidth"}  # the tokenizer's own, and the one shown
    assert float(sm.sel(format="fullwidth", script="fullwidth")) > 0
    for var in ("pmf", "valid_mass", "script_mass", "decoding_pmf", "decoding_valid_mass"):
        assert (np.isnan(v[var].values) == np.isnan(loc[var].values)).all(), var
        np.testing.assert_allclose(v[var], loc[var], atol=1e-4, rtol=0, err_msg=var)
    np.testing.assert_allclose(sm.sum("script"), v.valid_mass.isel(model=0, item=0, target=0),
                               atol=1e-12)  # fmt: skip
    # numerals="shown": the full-width digits alone, a cell of its own key
    only = open_results(shown).isel(model=0, item=0, target=0)
    np.testing.assert_allclose(only.valid_mass.squeeze(), sm.sel(script="fullwidth").squeeze(),
                               rtol=1e-9)  # fmt: skip
    assert np.isnan(float(only.script_mass.sel(script="ascii").squeeze()))
    assert str(only.cell_key.values) != str(v.cell_key.isel(model=0, item=0, target=0).values)


def test_vllm_server_reads_fullwidth_by_the_multi_token_rule(vllm_server, smollm2_folder,
                                                              tmp_path):  # fmt: skip
    """The vLLM server in exact mode (the mode the openai backend picks there), one cell:
    SmolLM2 spells every full-width digit as two byte tokens, so the server reads the
    multi-token rule teacher forced (``/tokenize``, then one ``/completions`` request with
    ``logprob_token_ids`` per answer context); its PMF, valid mass and mass per script equal
    the transformers backend's within the tolerance of the vLLM server's other comparison
    (atol 1e-4, test_engine_vllm.py). In top-k mode the labels' walk bounds them; a server
    of unknown kind in top-k mode cannot read them: refused by name."""
    from xlikert.collect.backends.openai.contexts import MULTI_TOKEN_PROTOCOL
    from xlikert.core.errors import CollectionError

    path = _experiment(tmp_path, "smollm2-135m-instruct", FULLWIDTH_SHORT, scale=SHORT)
    prompts = load_experiment(path).build_prompts().isel(item=[0])
    # a request per answer context, 16 in flight, batched by the server (on the scale 1..7:
    # 55 requests, 8.7 s against 11.2 s with 4 in flight, the same numbers to the bit)
    entry = [{"name": "m", "source": "openai:smol", "base_url": vllm_server.url,
              "tokenizer": str(smollm2_folder), "concurrency": 16}]  # fmt: skip
    ds = collect(prompts, entry, progress=False, temperatures=(1.0,), top_ps=(0.9, 1.0))
    loc = _transformers_reading(path)
    info = ds.likert.attrs["models"]["m"]
    assert info["mode"] == "exact" and info["served_owned_by"] == "vllm"
    assert info["answers"].startswith("multi-token")
    assert info["collection_protocol"].endswith(MULTI_TOKEN_PROTOCOL)
    assert any(len(r["ids"]) == 2 and r["tokens"][0] == "\\xef\\xbc"
               for r in info["answer_spellings"])  # fmt: skip
    sm = ds.script_mass.isel(model=0, item=0, target=0)
    read = [str(s) for s in sm.script.values if not np.isnan(sm.sel(script=s)).all()]
    assert set(read) == {"ascii", "fullwidth"}
    assert float(sm.sel(script="fullwidth").min()) > 0
    for var in ("pmf", "valid_mass", "script_mass", "topk_logprob"):
        assert (np.isnan(ds[var].values) == np.isnan(loc[var].values)).all(), var
        np.testing.assert_allclose(ds[var], loc[var], atol=1e-4, rtol=0, err_msg=var)
    one = {"temperature": 1.0, "top_p": 1.0}  # the full distribution: measured, the PMF
    np.testing.assert_allclose(ds.decoding_pmf.sel(one), loc.decoding_pmf.sel(one), atol=1e-4)
    assert bool(ds.decoding_pmf.sel(top_p=0.9).isnull().all())  # not measured on a server
    np.testing.assert_allclose(sm.sum("script"), ds.valid_mass.isel(model=0, item=0, target=0),
                               atol=1e-12)  # fmt: skip
    # top-k mode (asked for): the labels' walk from the listings, whose bounds hold the exact
    # reading (the same server; its float32 log-probabilities)
    with pytest.warns(RuntimeWarning, match=r"did not meet answer_tol=1e-06 .*walk_logprobs"):
        walked = collect(prompts, [{**entry[0], "mode": "topk", "walk_logprobs": 20}],
                         progress=False, temperatures=(1.0,), top_ps=(0.9, 1.0))  # fmt: skip
    assert "certified walk" in walked.likert.attrs["models"]["m"]["answers"]
    for var in ("pmf", "valid_mass"):
        assert bool((walked[f"{var}_lower"] - 1e-6 <= ds[var]).all()), var
        assert bool((ds[var] <= walked[f"{var}_upper"] + 1e-6).all()), var
    with pytest.raises(CollectionError, match=r"need several tokens.*this one is 'other'"):
        collect(prompts, [{**entry[0], "mode": "topk", "server": "other"}], progress=False)


def test_llamacpp_server_reads_fullwidth_as_the_numbers_shown(llamacpp_qwen, qwen_folder,
                                                               tmp_path):  # fmt: skip
    """Top-k mode on Qwen's GGUF, one cell: the listed full-width and ASCII digits are read
    as the numbers they are. With the top 1,000 tokens listed the intervals close on the
    server's values (within 1e-3), which equal the transformers backend's under the same one-token
    rule (the zoo's float32 weights are this GGUF dequantised; the server computes on the
    quantised ones: measured 0.9788 vs 0.9804 valid mass, PMFs within 0.011). Without a
    tokenizer, the top 20 tokens read by their text bound the same values; under
    ``numerals="shown"`` the top 20 bound the full-width mass alone."""
    path = _experiment(tmp_path, "qwen2.5-coder-0.5b-instruct", FULLWIDTH)
    prompts = load_experiment(path).build_prompts().isel(item=[0])
    local = collect(prompts, load_experiment(path).models, progress=False, split_space=False)
    entry = [{"name": "m", "source": "openai:qwen", "base_url": llamacpp_qwen.url,
              "tokenizer": str(qwen_folder), "backoff": 0.05}]  # fmt: skip
    whole = collect(prompts, entry, progress=False, top_k=1000)  # the vocabulary: 151,936
    info = whole.likert.attrs["models"]["m"]
    assert info["mode"] == "topk" and info["server_kind"] == "llama-cpp-python"
    assert {"ascii", "fullwidth"} <= {r.get("script") for r in info["valid_tokens"]}
    listed = [str(t) for t in whole.topk_token.values.ravel()[:20]]
    assert {"１", "1"} <= set(listed), listed  # the shown digit and the ASCII one, both listed
    assert float((whole.pmf_upper - whole.pmf_lower).max()) < 1e-3
    # under the shown labels alone the valid mass was 0.03-0.05 (issue 40)
    assert float(whole.valid_mass_lower.min()) > 0.9
    np.testing.assert_allclose(whole.valid_mass, local.valid_mass, atol=0.01)
    np.testing.assert_allclose(whole.pmf, local.pmf, atol=0.02)
    # numerals="shown": only the full-width digits count, which the transformers backend
    # stores as the cell's full-width script mass (measured about 0.08 of the 0.98)
    shown = collect(prompts, entry, progress=False, top_k=20, numerals="shown")
    own = local.script_mass.sel(script="fullwidth")
    assert float(own.max()) < 0.5 and float(shown.valid_mass_upper.max()) < 0.5
    assert bool((shown.valid_mass_lower - 0.01 <= own).all())
    assert bool((own <= shown.valid_mass_upper + 0.01).all())
    # without a tokenizer the listed tokens are read by their text: "１" and "1" are 1
    bare = [{k: v for k, v in entry[0].items() if k != "tokenizer"}]
    text = collect(prompts, bare, progress=False, top_k=20)
    assert text.likert.attrs["models"]["m"]["exact_unavailable"].startswith("no tokenizer")
    assert float(text.valid_mass_lower.min()) > 0.9
    eps = 1e-6  # the same server, the same log-probabilities
    assert bool(
        (text.pmf_lower - eps <= whole.pmf).all() and (whole.pmf <= text.pmf_upper + eps).all()
    )
    assert bool((text.valid_mass_lower - eps <= whole.valid_mass).all())
    # each script's mass in top-k mode: its interval closes with the top 1,000 on the
    # transformers backend's script mass, and the top 20 read by text bound it
    for c in ("ascii", "fullwidth"):
        mass = whole.script_mass.sel(script=c)
        width = whole.script_mass_upper.sel(script=c) - whole.script_mass_lower.sel(script=c)
        assert float(width.max()) < 1e-3, c
        np.testing.assert_allclose(mass, local.script_mass.sel(script=c), atol=0.01)
        assert bool((text.script_mass_lower.sel(script=c) - eps <= mass).all()), c
        assert bool((mass <= text.script_mass_upper.sel(script=c) + eps).all()), c
