"""Collection against real llama.cpp servers (llama-cpp-python[server], built from its sdist).

The servers run the offline GGUF files themselves (quantised), so their numbers are
compared with the same server's own values, not with the dequantised local backend.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("transformers")

from support.tiny import tiny_prompts

from xlikert.collect import collect
from xlikert.core.errors import CollectionError
from xlikert.design import load_experiment
from xlikert.testing.engines import llamacpp_server, smollm2_gguf


def entry(srv, served, tokenizer=None, **kw):
    out = {"name": "m", "source": f"openai:{served}", "base_url": srv.url, "backoff": 0.05, **kw}
    if tokenizer is not None:
        out["tokenizer"] = str(tokenizer)
    return [out]


def test_topk_intervals_contain_the_servers_full_vocabulary_values(llamacpp_smol, smollm2_folder):
    prompts = load_experiment("demo").build_prompts().sel(target=["USA"]).isel(item=slice(0, 6))
    tok = smollm2_folder
    full = collect(
        prompts, entry(llamacpp_smol, "smol", tok, concurrency=1), progress=False, top_k=49152
    )
    info = full.likert.attrs["models"]["m"]
    assert info["mode"] == "topk" and info["server_kind"] == "llama-cpp-python"
    assert info["exact_unavailable"].startswith("the server ignored logprob_token_ids")
    assert "reset before every request" in info["prompt_cache"]
    # every token listed: the intervals shrink to the server's round-off, and still hold
    assert float((full.pmf_upper - full.pmf_lower).max()) < 1e-3
    assert bool(((full.pmf_lower <= full.pmf) & (full.pmf <= full.pmf_upper)).all())
    for k in (5, 20):
        ds = collect(
            prompts, entry(llamacpp_smol, "smol", tok, concurrency=4), progress=False, top_k=k
        )
        assert bool((ds.pmf_lower <= full.pmf).all() and (full.pmf <= ds.pmf_upper).all()), k
        assert bool((ds.valid_mass_lower <= full.valid_mass).all()), k
        assert bool((full.valid_mass <= ds.valid_mass_upper).all()), k
        assert float((ds.pmf_upper - ds.pmf_lower).max()) > 1e-2  # really only bounded
        # the listed top tokens are the server's own, most probable first
        np.testing.assert_array_equal(ds.topk_token, full.topk_token.isel(rank=slice(0, k)))


def test_a_cell_does_not_depend_on_the_request_before_it(llamacpp_qwen, qwen_folder):
    """llama-cpp-python reuses the previous request's token prefix, and its numbers move
    with it; with the reset xlikert sends, a cell gets the same values after any predecessor."""
    prompts = tiny_prompts(3, 1, systems=3)  # a system prompt per target, of other lengths
    prompts["system"] = ("target", ["Rate 1-7.", "Réponds par un chiffre de 1 à 7.", "Digit?"])
    tok = qwen_folder

    def usa_after(first: str, **kw):
        p = prompts.sel(target=[first, "USA"]) if first else prompts.sel(target=["USA"])
        ds = collect(p, entry(llamacpp_qwen, "qwen", tok, concurrency=1, **kw), progress=False,
                     top_k=20, chunk_size=64)  # fmt: skip
        return ds.sel(target="USA").topk_logprob.values

    ref = usa_after("")
    for first in ("France", "Chad"):
        np.testing.assert_array_equal(usa_after(first), ref)
    # without the reset the same cells move with their predecessor (the server's behaviour)
    raw = [usa_after(first, server="other") for first in ("", "France", "Chad")]
    assert any(not np.array_equal(raw[0], r) for r in raw[1:])


def test_messages_on_a_misconfigured_server(tmp_path, monkeypatch):
    from xlikert.collect.backends.openai import transport

    # a server started without --logits_all answers logprob requests with HTTP 500
    srv = llamacpp_server(smollm2_gguf(), "smol", tmp_path / "nolp.log", logits_all=False)
    sleeps = []
    real_sleep = time.sleep
    monkeypatch.setattr(transport.time, "sleep", lambda s: sleeps.append(s) or real_sleep(s))
    out = tmp_path / "r.nc"
    try:
        with pytest.raises(CollectionError, match=r"HTTP 500.*logits_all"):
            collect(tiny_prompts(1, 1), entry(srv, "smol"), out, progress=False)
        assert len(sleeps) <= 1  # the same 500 twice is the server's answer: no more retries
        assert not out.exists() and not (tmp_path / "r.nc.partial").exists()
        # a base_url without /v1
        bare = [{**entry(srv, "smol")[0], "base_url": srv.url.removesuffix("/v1")}]
        with pytest.raises(
            CollectionError, match=r"no /v1.*did you mean http://127\.0\.0\.1:\d+/v1"
        ):
            collect(tiny_prompts(1, 1), bare, out, progress=False)
        assert not (tmp_path / "r.nc.partial").exists()
    finally:
        srv.kill()


def test_provenance_says_why_exact_mode_is_unavailable(llamacpp_smol):
    ds = collect(
        tiny_prompts(1, 2), entry(llamacpp_smol, "smol", concurrency=2), progress=False, top_k=5
    )
    why = ds.likert.attrs["models"]["m"]["exact_unavailable"]
    assert why.startswith("no tokenizer") and "requested" not in why
