"""Every elicitation level through the in-process vLLM engine (CPU build, prefix caching on)
against the transformers backend: SmolLM2 on the session's shared engine
(:mod:`support.vllm_jobs`), Qwen2.5-Coder-0.5B on an engine of its own (marked costly),
both on one
CETSCALE item, 17 (target USA), with ``first_token``, ``prefix``, ``greedy`` and ``own_words``
(a pruned reply tree) and ``stated``. The same replies, the same answers, the same PMFs within float
noise, the same prefixes read by the reply tree and the same certified bounds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.vllm_jobs import ELICITATION, elicitation_prompts

from xlikert.collect import collect
from xlikert.core.io import open_results

#: The numbers the two engines read (float32 logits, other kernels): equal within this.
ATOL = 1e-4


@pytest.fixture(scope="module")
def through_vllm(vllm_in_process, tmp_path_factory):
    """The folder of the jobs' result files (``smol.nc``; ``qwen.nc`` when asked for)."""
    return tmp_path_factory.mktemp("elicitation-vllm")


# Qwen needs an engine of its own (a minute or more to start on 2 cores): a costly test,
# left out of the default run (`pytest -m costly` runs it; passed 2026-11-27, |pmf| 9.3e-7)
@pytest.mark.parametrize("which", ["smol", pytest.param("qwen", marks=pytest.mark.costly)])
def test_every_level_through_vllm_equals_transformers(which, through_vllm, vllm_in_process):
    path = through_vllm / f"{which}.nc"
    job = {"smol": "elicitation", "qwen": "elicitation_qwen"}[which]
    res = vllm_in_process.run(job, path)
    assert res.ok, res.error
    v = open_results(path)
    source = {"smol": "smollm2-135m-instruct", "qwen": "qwen2.5-coder-0.5b-instruct"}[which]
    t = collect(elicitation_prompts(), [{"name": "m", "source": source}], progress=False,
                **ELICITATION)  # fmt: skip
    assert v.likert.attrs["models"]["m"]["backend"] == "vllm (in process)"
    assert v.attrs["own_words_round"] == t.attrs["own_words_round"]
    # the greedy replies: token for token, and the answers they write
    for var in ("reply_token_ids", "reply_text", "reply_end", "stated_status", "stated_numbers"):
        np.testing.assert_array_equal(v[var].values, t[var].values, err_msg=var)
    for var in ("reply_answered", "reply_answer", "reply_answer_position", "elicitation_passes",
                "elicitation_tol_met"):  # fmt: skip
        np.testing.assert_array_equal(v[var].values, t[var].values, err_msg=var)
    for var in ("pmf", "valid_mass", "no_answer_mass", "elicitation_error"):
        np.testing.assert_allclose(v[var].values, t[var].values, atol=ATOL, rtol=0,
                                   equal_nan=True, err_msg=var)  # fmt: skip
    # every level read something (the greedy in-text PMF only where the reply answers)
    for level in ("first_token", "prefix", "own_words"):
        assert np.isfinite(v.pmf.sel(elicitation=level).values).all(), level
    own = v.sel(elicitation="own_words")
    assert (own.elicitation_passes >= 1).all() and (own.no_answer_mass >= 0).all()
    met = own.elicitation_tol_met == 1
    assert bool(((own.elicitation_error <= ELICITATION["own_words_tol"]) | ~met).all())
    d = float(np.nanmax(np.abs(v.pmf.values - t.pmf.values)))
    print(f"\n{which}: vLLM against transformers, every level: |pmf| max {d:.1e}; greedy "
          f"reply {str(v.reply_text.sel(elicitation='greedy').values.ravel()[0])!r}, own_words "
          f"passes {int(own.elicitation_passes.max())}")  # fmt: skip
