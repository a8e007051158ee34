"""Sequential administration through the in-process vLLM engine (CPU build, prefix caching on)
against the transformers backend: the same history tree, the same PMFs."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from xlikert.collect.context import administer, battery_from_prompts
from xlikert.collect.options import CollectOptions
from xlikert.design import load_experiment
from xlikert.testing.engines import engine_python

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

SCRIPT = """
import sys
import numpy as np
import xlikert.collect.backends.vllm as backend
from xlikert.collect.context import administer, battery_from_prompts
from xlikert.collect.options import CollectOptions
from xlikert.design import load_experiment

def main():
    prompts = load_experiment("demo").build_prompts().sel(target="USA").isel(item=[0, 1, 2])
    spec = {"name": "m", "source": "smollm2-135m-instruct", "backend": "vllm",
            "enforce_eager": True, "max_model_len": 2048, "gpu_memory_utilization": 0.25}
    model = backend.open(spec, CollectOptions(scale=range(1, 8)))
    assert model.provenance()["engine"]["enable_prefix_caching"] is True
    res = administer(model, battery_from_prompts(prompts))
    np.savez(sys.argv[1], paths=res.tree.paths, pmf=res.tree.pmf,
             valid_mass=res.tree.valid_mass, passes=res.passes)
    model.close()

if __name__ == "__main__":
    main()
"""


def test_in_process_vllm_reads_the_same_history_tree(tmp_path):
    script = tmp_path / "seq_vllm.py"
    script.write_text(SCRIPT)
    out = tmp_path / "tree.npz"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    res = subprocess.run(
        [str(engine_python("vllm")), str(script), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = np.load(out)
    import xlikert.collect.backends.transformers as backend

    prompts = load_experiment("demo").build_prompts().sel(target="USA").isel(item=[0, 1, 2])
    local = backend.open(
        {"name": "m", "source": "smollm2-135m-instruct"}, CollectOptions(scale=range(1, 8))
    )
    ref = administer(local, battery_from_prompts(prompts))
    assert int(got["passes"]) == ref.passes == 57
    # the same histories (their order follows the probabilities, which may tie differently)
    where = {tuple(p): n for n, p in enumerate(ref.tree.paths)}
    order = [where[tuple(p)] for p in got["paths"]]
    assert sorted(order) == list(range(57))
    np.testing.assert_allclose(got["pmf"], ref.tree.pmf[order], atol=1e-4, rtol=0)
    np.testing.assert_allclose(got["valid_mass"], ref.tree.valid_mass[order], atol=1e-4, rtol=0)
