"""Sequential administration through the in-process vLLM engine (CPU build, prefix caching
on), on the session's shared engine (:mod:`support.vllm_jobs`), against the transformers
backend: the same histories read, the same PMFs, through the ordinary runner."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from xlikert.collect import collect
from xlikert.core.io import open_results
from xlikert.design import load_experiment


def test_in_process_vllm_reads_the_same_conversations(vllm_in_process, tmp_path):
    out = tmp_path / "sequential.nc"
    res = vllm_in_process.run("sequential", out)
    assert res.ok, res.error
    v = open_results(out)
    assert v.likert.attrs["models"]["m"]["engine"]["enable_prefix_caching"] is True
    prompts = load_experiment("demo").build_prompts().sel(target=["USA"]).isel(item=[0, 1])
    prompts = prompts.expand_dims(administration=["sequential"])
    loc = collect(prompts, [{"name": "m", "source": "smollm2-135m-instruct"}], progress=False,
                  temperatures=(1.0,), top_ps=(0.9, 1.0))  # fmt: skip
    assert (v.context_passes == 8).all() and (v.context_error == 0).all()
    for var in ("pmf", "valid_mass", "decoding_pmf", "context_joint"):
        np.testing.assert_allclose(v[var], loc[var], atol=1e-4, rtol=0, err_msg=var)
    # the same histories read (their order follows the probabilities, which may tie
    # differently): each history's PMF, matched by its answers
    for k in range(2):  # item 2 is read after each of the 7 answers to item 1
        a = v.isel(model=0, administration=0, target=0, item=k)
        b = loc.isel(model=0, administration=0, target=0, item=k)
        n = int(np.isfinite(b.history_probability).sum())  # the histories read come first
        assert n == 7**k and int(np.isfinite(a.history_probability).sum()) == n
        rows = {str(h): i for i, h in enumerate(b.history_answers.values[:n])}
        order = [rows[str(h)] for h in a.history_answers.values[:n]]
        assert sorted(order) == list(range(n))
        np.testing.assert_allclose(a.history_pmf.values[:n],
                                   b.history_pmf.values[order], atol=1e-4, rtol=0)  # fmt: skip
