"""Collection against a real vLLM (CPU build): a server on loopback, and the in-process engine.

The model is the offline SmolLM2-135M-Instruct, dequantised to float32 (the folder the
transformers backend loads), so vLLM and transformers run the same weights. The server
(``vllm_server``) and the in-process engine (``vllm_in_process``, which runs the jobs of
``tests/support/vllm_jobs.py``) are started once per session by ``conftest.py``.
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from xlikert.collect import collect, read_sequence
from xlikert.core.errors import CollectionError
from xlikert.design import load_experiment
from xlikert.kernels.readout import topk_intervals
from xlikert.testing.engines import ROOT, VLLM_ENV, engine_python


@pytest.fixture(scope="module")
def prompts() -> xr.Dataset:
    # 2 targets x 8 items: items 10 and 12 do not name the target (one prompt, two cells)
    return load_experiment("demo").build_prompts().isel(target=[0, 1], item=[*range(6), 9, 11])


@pytest.fixture(scope="module")
def local_one_token(prompts, smollm2_folder):
    """The transformers backend with the paper's one-token rule (what a server can read)."""
    spec = [{"name": "m", "source": "smollm2-135m-instruct"}]
    return collect(prompts, spec, progress=False, split_space=False)


def entry(server, folder, **kw):
    return [{"name": "m", "source": "openai:smol", "base_url": server.url,
             "tokenizer": str(folder), "concurrency": 4, **kw}]  # fmt: skip


@pytest.fixture(scope="module")
def front(vllm_server):
    """The server behind a TCP proxy (support.tcp_proxy), which a test can fail as a
    killed server fails, and restart on the same port, while the server runs on."""
    from support.tcp_proxy import TCPProxy

    proxy = TCPProxy(vllm_server.port)
    yield proxy
    proxy.kill()


@pytest.fixture(scope="module")
def exact(front, smollm2_folder, prompts, tmp_path_factory):
    out = tmp_path_factory.mktemp("exact") / "exact.nc"
    ds = collect(prompts, entry(front, smollm2_folder), out, progress=False, chunk_size=4)
    return out, ds


def test_server_exact_mode_equals_local_backend(exact, local_one_token):
    _, ds = exact
    info = ds.likert.attrs["models"]["m"]
    assert info["mode"] == "exact" and "exact_unavailable" not in info  # auto picked exact
    assert info["served_owned_by"] == "vllm"
    # two requests per prompt (the top-k listing, the answer ids), plus one prompt-cache
    # reset per unit of 4 prompts at most: the server path does not grow
    # Identical prompts are computed once (2 items do not name the target: 14 of 16 cells)
    n = int(ds.attrs["cells_computed"])
    assert (n, n + ds.attrs["cells_copied"]) == (14, int(ds.valid_mass.size))
    assert 2 * n <= info["http_requests_last_session"] <= 2 * n + -(-n // 4)
    for v in ("pmf", "valid_mass", "topk_logprob"):
        np.testing.assert_allclose(ds[v], local_one_token[v], atol=1e-4, rtol=0, err_msg=v)
    # the same tokens in the same order, but for near ties (which another CPU may swap)
    lp = local_one_token.topk_logprob
    gap = np.minimum(
        (lp.shift(rank=1) - lp).fillna(np.inf), (lp - lp.shift(rank=-1)).fillna(np.inf)
    )
    same = ds.topk_token == local_one_token.topk_token
    assert bool(same.where(gap > 2e-4, True).all()) and float(same.mean()) > 0.95
    assert "pmf_lower" not in ds
    # the temperature-1 column of the grid, where the nucleus lies in the listed tokens
    t1 = ds.decoding_pmf.sel(temperature=1.0)
    known = t1.notnull()
    assert bool(known.sel(top_p=1.0).all())
    ref = local_one_token.decoding_pmf.sel(temperature=1.0)
    np.testing.assert_allclose(t1.where(known), ref.where(known), atol=1e-4)


def test_topk_intervals_hold_although_vllm_lists_the_sampled_token_first(
    vllm_server, smollm2_folder, prompts, exact
):
    _, truth = exact
    for k in (5, 20):
        ds = collect(
            prompts, entry(vllm_server, smollm2_folder, mode="topk"), progress=False, top_k=k
        )
        info = ds.likert.attrs["models"]["m"]
        assert info["mode"] == "topk" and info["exact_unavailable"] == "mode='topk' requested"
        eps = 1e-6  # float32 log-probabilities
        assert bool((ds.pmf_lower - eps <= truth.pmf).all()), k
        assert bool((truth.pmf <= ds.pmf_upper + eps).all()), k
        assert bool((ds.valid_mass_lower - eps <= truth.valid_mass).all()), k
        assert bool((truth.valid_mass <= ds.valid_mass_upper + eps).all()), k
        assert float((ds.pmf_upper - ds.pmf_lower).max()) > 1e-3  # really bounded
    # The behaviour the rule guards against happens on this server: with top_logprobs=k,
    # the sampled token is listed first and the true k-th token is cut, so the rule that
    # trusts the smallest listed probability (out_of_order=0) misses some cells.
    vocab_ids = {r["id"]: r["score"] for r in truth.likert.attrs["models"]["m"]["valid_tokens"]}
    misses = 0
    for target in truth.target.values:
        for item in truth.item.values:
            msgs = json.loads(
                str(truth.prompt_text.sel(model="m", target=target, item=item).values)
            )
            body = {"model": "smol", "messages": msgs, "max_tokens": 1, "logprobs": True,
                    "top_logprobs": 5, "temperature": 1.0, "seed": 0,
                    "return_tokens_as_token_ids": True}  # fmt: skip
            listed = vllm_server.post("/v1/chat/completions", body)["choices"][0]["logprobs"]
            entries = {int(e["token"].split(":")[1]): e["logprob"]
                       for e in listed["content"][0]["top_logprobs"]}  # fmt: skip
            ids = list(entries)
            p = np.exp([entries[i] for i in ids])
            sc = np.array([vocab_ids[i] - 1 if i in vocab_ids else -1 for i in ids])
            unlisted = np.bincount([y - 1 for i, y in vocab_ids.items() if i not in entries],
                                   minlength=7)  # fmt: skip
            b = topk_intervals(p, sc, 7, unlisted, out_of_order=0)
            exact_pmf = truth.pmf.sel(model="m", target=target, item=item).values
            misses += bool(
                ((exact_pmf < b["pmf_lower"] - 1e-6) | (exact_pmf > b["pmf_upper"] + 1e-6)).any()
            )
    assert misses > 0


def test_killed_server_resumes_to_the_same_file(front, smollm2_folder, prompts, exact, tmp_path):
    """The server fails as a killed one does (its port closed, open connections reset):
    the proxy in front of it is killed (``front``), so the session's server is not
    restarted; the client cannot tell the difference."""
    clean, _ = exact
    out = tmp_path / "killed.nc"
    partial = tmp_path / "killed.nc.partial"
    server = front

    def kill_after_two(done, total):
        if done == 2:
            server.kill()

    with pytest.raises(CollectionError, match="cannot reach server"):
        collect(prompts, entry(server, smollm2_folder, max_retries=1, backoff=0.1), out,
                progress=False, chunk_size=4, on_unit=kill_after_two)  # fmt: skip
    assert len(list(partial.glob("m*-u*.npz"))) == 2 and not out.exists()
    server.start()  # same port: the same run configuration
    collect(prompts, entry(server, smollm2_folder), out, progress=False, chunk_size=4)
    assert not partial.exists()
    from xlikert.core.io import decode_attrs, open_results

    a, b = decode_attrs(open_results(clean)), decode_attrs(open_results(out))
    for ds in (a, b):
        for key in ("date_created", "history", "collection_seconds_last_session"):
            ds.attrs.pop(key)
        for info in ds.attrs["models"].values():  # request counts are per session, by name
            for k in [k for k in info if k.endswith("_last_session")]:
                info.pop(k)
    xr.testing.assert_identical(a, b)


def test_in_process_vllm_backend_equals_transformers_backend(vllm_in_process, prompts, tmp_path):
    out, multi = tmp_path / "vllm.nc", tmp_path / "vllm-0-10.nc"
    persona, persona_toml = tmp_path / "vllm-persona.nc", ROOT / "examples" / "persona.toml"
    res = vllm_in_process.run("demo", out, multi, persona, persona_toml)
    assert res.ok, res.error
    from xlikert.core.io import open_results

    v = open_results(out)
    spec = [{"name": "m", "source": "smollm2-135m-instruct"}]
    loc = collect(prompts, spec, progress=False, temperatures=(0.5, 1.0), top_ps=(0.9, 1.0))
    info = v.likert.attrs["models"]["m"]
    assert info["backend"] == "vllm (in process)" and info["dtype"] == "float32"
    assert info["answers"].startswith("one token or split space")  # exact, from token ids
    # one engine pass per answer context, read by xlikert's logits processor in the engine
    assert info["engine"]["logits_processors"] == [
        "xlikert.collect.backends.vllm.readout:ExactReadout"
    ]
    assert info["readout"].startswith("one request per (prompt, answer context)")
    assert info["decoding_rule"] == v.attrs["decoding_tie_rule"]  # xlikert's rule, as local
    assert info["collection_protocol"] == info["readout"]
    assert v.attrs["collection_protocol"].startswith(info["readout"])
    assert v.decoding_pmf.attrs["description"] == v.attrs["decoding_tie_rule"]
    assert (v.prompt_text == loc.prompt_text).all()
    for var in ("pmf", "valid_mass", "topk_logprob", "decoding_pmf", "decoding_valid_mass"):
        assert (np.isnan(v[var].values) == np.isnan(loc[var].values)).all(), var
        np.testing.assert_allclose(v[var], loc[var], atol=1e-4, rtol=0, err_msg=var)
    assert float((v.topk_token == loc.topk_token).mean()) == 1.0
    np.testing.assert_allclose(
        v.decoding_pmf.sel(temperature=1.0, top_p=1.0), v.pmf, atol=1e-12, err_msg="T=1, p=1"
    )
    # multi-token answers with a stop check, from teacher-forced contexts on both engines
    vm = open_results(multi)
    lm = collect(prompts.isel(item=slice(0, 1)), spec,
                 progress=False, scale=range(0, 11), temperatures=(1.0,), top_ps=(0.9, 1.0))  # fmt: skip
    assert vm.likert.attrs["models"]["m"]["answers"].startswith("multi-token")
    assert len(vm.likert.attrs["models"]["m"]["answer_spellings"]) > 11
    for var in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass"):
        np.testing.assert_allclose(vm[var], lm[var], atol=1e-4, rtol=0, err_msg=f"0-10 {var}")
    # the Mini-IPIP (1..5) under three personas (a free factor)
    vp = open_results(persona)
    lp = collect(load_experiment(persona_toml).build_prompts().isel(item=slice(0, 2)), spec,
                 progress=False, temperatures=(0.7, 1.0), top_ps=(0.9, 1.0))  # fmt: skip
    assert vp.pmf.dims == ("model", "persona", "item", "score")
    assert vp.score.values.tolist() == [1, 2, 3, 4, 5] and vp.sizes["persona"] == 3
    for var in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass", "topk_logprob"):
        np.testing.assert_allclose(vp[var], lp[var], atol=1e-4, rtol=0, err_msg=f"1-5 {var}")


UNGUARDED = """
import sys
from xlikert.collect import collect
from xlikert.design import load_experiment

prompts = load_experiment("demo").build_prompts().isel(target=[0], item=[0])
spec = {"name": "m", "source": "smollm2-135m-instruct", "backend": "vllm",
        "enforce_eager": True, "max_model_len": 1024, "gpu_memory_utilization": 0.25}
collect(prompts, [spec], sys.argv[1], progress=False)
"""


def test_script_without_main_guard_is_told_what_to_add(smollm2_folder, tmp_path):
    """vLLM spawns its engine core, which imports the script again: both the child and the
    parent say to put the collection under the main guard (not to lower memory settings).
    (``smollm2_folder``: the model is dequantised before, not by the script.)"""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    env = {**os.environ, **VLLM_ENV}
    res = subprocess.run([str(engine_python("vllm")), str(script), str(tmp_path / "out.nc")],
                         env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert res.returncode != 0
    child = "collection started again inside a process that vLLM spawned"
    assert child in res.stderr and f"{script} again" in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("xlikert.core.errors.CollectionError: model 'm': vLLM could not start")
    assert f"import your script {script} again" in last
    assert 'if __name__ == "__main__":' in last and "gpu_memory_utilization" not in last
    assert not (tmp_path / "out.nc").exists()


def test_in_process_vllm_reasoning_mode(vllm_in_process, tmp_path):
    """vLLM samples the traces (one seeded request each: the same traces again from the same
    seeds); the answer after each trace equals the transformers backend's read of the same
    token ids; pmf is their mean."""
    a, b, ids_file = tmp_path / "a.nc", tmp_path / "b.nc", tmp_path / "ids.json"
    res = vllm_in_process.run("reasoning", a, b, ids_file)
    assert res.ok, res.error
    from xlikert.collect.backends.transformers import LocalModel, load_model
    from xlikert.collect.options import CollectOptions
    from xlikert.collect.reasoning import check_reasoning
    from xlikert.core.io import open_results

    va, vb = open_results(a), open_results(b)
    np.testing.assert_array_equal(va.trace_text, vb.trace_text)  # reproducible from the seeds
    np.testing.assert_array_equal(va.trace_pmf, vb.trace_pmf)
    info = va.likert.attrs["models"]["m"]
    assert info["reasoning"]["traces"] == 3 and info["reasoning_sampler"].startswith("vLLM")
    assert info["end_of_turn_rule"].startswith("a trace ends at any eos_token_id")
    assert info["reasoning_format"]["framing"] == "cot"
    lm = load_model("smollm2-135m-instruct", range(1, 8))
    opts = CollectOptions(scale=tuple(range(1, 8)), temperatures=(1.0,), top_ps=(1.0,))
    local = LocalModel(lm, opts, check_reasoning({"name": "m", "reasoning": {"traces": 3}}))
    closing = local.format.closing_ids(lm.tokenizer)
    traces = json.loads(ids_file.read_text())  # per prompt (unit order), per trace
    cells = va.isel(model=0).stack(cell=("target", "item"))
    assert len(traces) == cells.sizes["cell"]
    for j in range(cells.sizes["cell"]):
        cell = cells.isel(cell=j)
        prompt = lm.encode(str(cell.prompt_text.values))
        marker = [lm.tokenizer.decode(t).endswith("Answer:") for t in traces[j]]
        suffixes = [t + closing[m] for t, m in zip(traces[j], marker, strict=True)]
        for k, suffix in enumerate(suffixes):  # the file holds the very ids that were read
            seq = read_sequence(va, model="m", target=str(cell.target.values),
                                item=str(cell.item.values), trace=k)  # fmt: skip
            assert seq.ids.tolist() == prompt + suffix and seq.trace.tolist() == traces[j][k]
        read = local._read(prompt, None, suffixes)
        np.testing.assert_allclose(cell.trace_pmf.values, read["pmf"], atol=1e-4)
        np.testing.assert_allclose(cell.trace_valid_mass.values, read["valid_mass"], rtol=1e-3)
        np.testing.assert_allclose(cell.pmf.values, read["pmf"].mean(0), atol=1e-4)


def test_in_process_vllm_reads_each_format_levels_labels(vllm_in_process, tmp_path):
    """The built-in ``formats`` experiment (original, reversed, letters) on one live engine:
    each level's answer tokens travel with its requests; equal to the transformers backend."""
    out = tmp_path / "formats.nc"
    res = vllm_in_process.run("formats", out)
    assert res.ok, res.error
    from xlikert.core.io import open_results

    v = open_results(out)
    prompts = load_experiment("formats").build_prompts().sel(target=["USA"], item=["1", "2", "3"])
    loc = collect(prompts, [{"name": "m", "source": "smollm2-135m-instruct"}], progress=False,
                  temperatures=(1.0,), top_ps=(0.9, 1.0))  # fmt: skip
    assert list(v.answer_label.sel(format="letters").values) == list("ABCDEFG")
    labels = v.likert.attrs["models"]["m"]["valid_tokens_by_labels"]
    assert sorted(labels) == ["1 2 3 4 5 6 7", "7 6 5 4 3 2 1", "A B C D E F G"]
    for var in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass"):
        assert (np.isnan(v[var].values) == np.isnan(loc[var].values)).all(), var
        np.testing.assert_allclose(v[var], loc[var], atol=1e-4, rtol=0, err_msg=var)


# The nominal vote answered with names ("Clinton", "Dole") is 154 answer contexts, each a
# request: about 50 s on the engine, so the default run reads the other three items (their
# own scales, letters, "Don't know" and "Refused"), and multi-token answers on this engine
# are read by the demo job's 0..10 scale; the whole questionnaire is a costly test.
@pytest.mark.parametrize(
    "items",
    [
        ("self", "tv", "trust"),
        pytest.param(("self", "tv", "trust", "vote"), marks=pytest.mark.costly),
    ],
    ids=["three-items", "with-names"],
)
def test_in_process_vllm_reads_each_items_options(vllm_in_process, tmp_path, items):
    """A questionnaire (support/survey.py: 1..7 with "Don't know", 0..7, 1..4 in letters with
    two options, a nominal vote answered with names) on the live engine: each item's
    answers, one token or several, travel with its requests; equal to the transformers
    backend, the non-substantive masses included."""
    from support.survey import survey_experiment

    from xlikert.core.io import open_results

    prompts = survey_experiment(tmp_path).build_prompts().sel(party=["Democrat"], item=list(items))
    saved, out = tmp_path / "prompts.nc", tmp_path / "survey.nc"
    prompts.to_netcdf(saved)
    res = vllm_in_process.run("survey", saved, out)
    assert res.ok, res.error
    v = open_results(out)
    loc = collect(prompts, [{"name": "m", "source": "smollm2-135m-instruct"}], progress=False,
                  temperatures=(1.0,), top_ps=(0.9, 1.0))  # fmt: skip
    assert v.nonsubstantive_mass.dims == ("model", "party", "item", "option")
    labels = v.likert.attrs["models"]["m"]["valid_tokens_by_labels"]
    assert ("vote" not in items) or any("Clinton" in k for k in labels)
    assert len(labels) == len(items)  # each item's own answers
    for var in ("pmf", "valid_mass", "nonsubstantive_mass", "decoding_pmf", "decoding_valid_mass"):
        assert (np.isnan(v[var].values) == np.isnan(loc[var].values)).all(), var
        np.testing.assert_allclose(v[var], loc[var], atol=1e-4, rtol=0, err_msg=var)
    assert float(v.nonsubstantive_mass.sel(item="self").min()) > 0
