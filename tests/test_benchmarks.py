"""The benchmarks' own machinery: the FLOP count, and the GPU benchmark's code path on the CPU.

No timing is asserted here (speed goals live in ``benchmarks/``); these tests only
keep the code the benchmarks run from rotting: the GPU benchmark runs end to end in
its tiny CPU mode and its JSON renders into the README table.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

torch = pytest.importorskip("torch")


def _import(name: str, path: Path):
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def flops():
    sys.path.insert(0, str(BENCH))
    try:
        yield _import("_flops", BENCH / "_flops.py")
    finally:
        sys.path.remove(str(BENCH))


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def test_flop_counter_reads_every_call_shape(flops):
    model = _tiny_llama()
    cfg = model.config
    # parameters one token touches: every Linear of the decoder layers
    linear = sum(
        m.weight.numel() for m in model.model.layers.modules() if isinstance(m, torch.nn.Linear)
    )
    assert flops.body_params(cfg) == linear
    ids = torch.randint(0, 97, (3, 5))
    with flops.FlopCounter(model) as fc, torch.no_grad():
        out = model(input_ids=ids, use_cache=True)  # every position's logits
        model(input_ids=ids[:, :2], past_key_values=out.past_key_values, logits_to_keep=1)
    head = 2 * 32 * 97
    keys = 4 * 2 * 4 * 8  # 4 x layers x heads x head_dim per key
    first = 3 * (2 * linear * 5 + keys * (1 + 2 + 3 + 4 + 5) + 5 * head)
    second = 3 * (2 * linear * 2 + keys * (6 + 7) + 1 * head)
    assert fc.calls == 2 and fc.tokens == 3 * 7
    assert fc.flops == pytest.approx(first + second, rel=1e-12)
    # useful: the shared prefix once, each row's own tokens, one lm_head row each
    rows = [[1, 2, 3, 4], [1, 2, 3, 9, 9]]
    want = flops.span_flops(cfg, 0, 3) + flops.span_flops(cfg, 3, 4) + flops.span_flops(cfg, 3, 5)
    assert flops.useful_flops(cfg, [rows]) == pytest.approx(want + 2 * head)


def test_bench_gpu_runs_on_the_cpu_with_a_tiny_config(tmp_path):
    out = tmp_path / "gpu.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run(
        [sys.executable, str(BENCH / "bench_gpu.py"), "--tiny", "--device", "cpu", "--out",
         str(out)],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    d = json.loads(out.read_text())
    assert d["tiny"] and d["device"] == "cpu" and d["matmul_tflops"] > 0
    assert [r["batch_size"] for r in d["rows"]] == [8, 64]
    for r in d["rows"]:
        assert r["model"] == "tiny" and r["prompts"] == 68
        assert r["readout_finite_and_in_range"]
        # padding and the per-unit prefix are executed, never less than the useful count
        assert r["executed_gflop_per_prompt"] >= r["useful_gflop_per_prompt"] > 0
        assert 0 < r["mfu_useful"] <= r["mfu_executed"]
    assert d["rows"][-1]["numpy_readout"]["prompts_per_s"] > 0
    groups = d["prompt_lengths"]["groups"]
    assert sum(len(g["lengths"]) for g in groups) == 68
    # the README renderer (beside the script) reads these fields
    sys.path.insert(0, str(BENCH))
    try:
        bench_gpu = _import("bench_gpu_for_test", BENCH / "bench_gpu.py")
    finally:
        sys.path.remove(str(BENCH))
    text = "\n".join(bench_gpu.render(d))
    assert "| tiny |" in text and "MFU executed" in text
    missing = bench_gpu.render({"not_run": "not run: no GPU lent to this task"})
    assert missing[0].startswith("**not run: no GPU lent to this task**")


SCRIPTS = sorted(BENCH.glob("bench_*.py"))
#: Blocks ``import pytest`` (and the tests folder) in the child: a benchmark must stand alone.
NO_PYTEST = (
    "import os, runpy, sys; sys.modules['pytest'] = None; "
    "sys.argv = [sys.argv[1], '--help']; sys.path.insert(0, os.path.dirname(sys.argv[0])); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_benchmark_stands_alone_without_pytest(script):
    res = subprocess.run(
        [sys.executable, "-c", NO_PYTEST, str(script)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "usage:" in res.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_each_benchmark_renders_its_committed_json(script):
    """Each table's renderer lives beside its script and reads the JSON that script wrote."""
    name = script.stem.removeprefix("bench_")
    sys.path.insert(0, str(BENCH))
    try:
        bench = _import(f"{script.stem}_render_test", script)
    finally:
        sys.path.remove(str(BENCH))
    assert isinstance(bench.TITLE, str) and bench.TITLE
    found = [p for p in (BENCH / "results" / f"{name}.json", BENCH / "results" / f"{name}-quick.json")
             if p.exists()]  # fmt: skip
    assert found, f"no committed results JSON for {name}"
    for path in found:
        lines = bench.render(json.loads(path.read_text()))
        assert lines and all(isinstance(line, str) for line in lines), path
