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

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

torch = pytest.importorskip("torch")


def _import(name: str, path: Path):
    """A benchmark script or module loaded as ``name``, with ``benchmarks/`` importable
    while it loads (the scripts import their sibling modules)."""
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


@pytest.fixture(scope="module")
def flops():
    return _import("_flops", BENCH / "_flops.py")


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
    name = flops.cache_keyword(model)  # cache, or past_key_values in older transformers
    with flops.FlopCounter(model) as fc, torch.no_grad():
        out = model(input_ids=ids, use_cache=True)  # every position's logits
        model(input_ids=ids[:, :2], **{name: getattr(out, name)}, logits_to_keep=1)
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


def test_block_cache_projection_caches_whole_shared_blocks(flops):
    """vLLM's prefix cache as projected: whole blocks of the longest prefix shared with
    any earlier prompt, never the prompt's last token."""
    rows = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7], [1, 2, 3, 4, 5, 6], [8, 2]]
    assert flops.block_cache_hits(rows, block=4) == [0, 4, 4, 0]
    assert flops.block_cache_hits(rows, block=2) == [0, 4, 4, 0]
    # an identical prompt still computes its last token
    assert flops.block_cache_hits(rows, block=1) == [0, 5, 5, 0]

    class Cfg:  # the shape fields span_flops reads
        hidden_size, intermediate_size, num_hidden_layers, vocab_size = 8, 16, 2, 11
        num_attention_heads, num_key_value_heads, head_dim = 2, 2, 4

    want = sum(
        flops.span_flops(Cfg, h, len(r)) + flops.lm_head_flops(Cfg)
        for r, h in zip(rows, [0, 4, 4, 0], strict=True)
    )
    assert flops.block_cache_flops(Cfg, rows, block=4) == pytest.approx(want)


@pytest.fixture(scope="module")
def bench_gpu():
    return _import("bench_gpu_for_test", BENCH / "bench_gpu.py")


def test_bench_gpu_reads_the_datasheet_peak_from_the_device_name(bench_gpu):
    peak = bench_gpu.datasheet_peak
    assert peak("NVIDIA H100 80GB HBM3")["flops_per_s"] == pytest.approx(989.4e12)
    assert peak("NVIDIA H100 PCIe")["device"] == "H100 PCIe"
    assert peak("NVIDIA H200 NVL")["device"] == "H200 NVL"
    assert peak("NVIDIA L40S")["device"] == "L40S" and peak("NVIDIA L4")["device"] == "L4"
    assert peak(None) is None and peak("Intel(R) Xeon(R) Processor") is None


def _bench_gpu_quick(out: Path, *extra: str) -> dict:
    """``bench_gpu.py --quick`` in a child process; its JSON."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run(
        [sys.executable, str(BENCH / "bench_gpu.py"), "--quick", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=900, env=env, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text())


def test_bench_gpu_runs_on_the_cpu_with_a_tiny_config(tmp_path, bench_gpu):
    """``bench_gpu.py --quick --no-vllm`` end to end: its transformers rows are ``collect()``'s
    numbers on the same random model, and the README renders the rows. (Its vLLM row starts
    an engine of its own: :func:`test_bench_gpu_vllm_row_runs_xlikerts_vllm_backend`.)"""
    from xlikert.collect import collect

    d = _bench_gpu_quick(tmp_path / "gpu.json", "--no-vllm")
    assert d["tiny"] and d["device"] == "cpu" and d["matmul_tflops"] > 0
    assert d["datasheet_bf16"] == {"device": "unknown", "flops_per_s": None}
    rows = [r for r in d["rows"] if r["backend"] == "transformers"]
    assert [r["batch_size"] for r in rows] == [8, 64]
    # 68 cells, 56 distinct prompts (4 items do not name the target: one prompt for 4
    # cells), computed once each; the batches the backend formed, not the setting
    for r in rows:
        assert sum(r["batches_formed"]) == 56 and max(r["batches_formed"]) <= r["batch_size"]
    assert len(rows[1]["batches_formed"]) == 2  # units of 64 and 4 cells, one pass each
    for r in rows:
        assert r["model"] == "tiny" and r["prompts"] == 56 and r["vocab"] == 2048
        assert r["pmf_sums_to_one_and_mass_in_range"]
        # padding and the per-unit prefix are executed, never less than the useful count
        assert r["executed_gflop_per_prompt"] >= r["useful_gflop_per_prompt"] > 0
        assert 0 < r["mfu_useful_measured"] <= r["mfu_executed_measured"]
        assert "mfu_executed_datasheet" not in r  # no peak known for a CPU
        assert 0 < r["rules_s"] <= r["readout_s"] < r["median_s"]
    # the same random model saved and collected by the public path, with no loader:
    # the benchmark's numbers are xlikert's
    prompts = bench_gpu.demo_prompts(1)
    tok = bench_gpu.word_tokenizer(prompts, 2048)
    folder = tmp_path / "tiny"
    cfg = bench_gpu.write_folder(folder, "tiny", tok, 2048)
    bench_gpu.random_model(cfg, "cpu", seed=0).save_pretrained(folder)
    for r in rows:
        ds = collect(prompts, [{"name": "tiny", "source": str(folder), "dtype": "bfloat16"}],
                     device="cpu", batch_size=r["batch_size"], chunk_size=r["chunk_size"],
                     progress=False)  # fmt: skip
        np.testing.assert_array_equal(np.asarray(r["pmf"]), ds["pmf"].values.reshape(-1, 7))
        np.testing.assert_array_equal(np.asarray(r["valid_mass"]), ds["valid_mass"].values.ravel())
    # the README renderer (beside the script) reads these fields
    text = "\n".join(bench_gpu.render(d))
    assert "| tiny | transformers |" in text and "unknown for this device" in text
    for r in rows:
        assert f"| {bench_gpu.formed(r['batches_formed'])} |" in text
    missing = bench_gpu.render({"not_run": "not run: no GPU lent to this task"})
    assert missing[0].startswith("**not run: no GPU lent to this task**")


@pytest.mark.costly
def test_bench_gpu_vllm_row_runs_xlikerts_vllm_backend(tmp_path, bench_gpu):
    """The vLLM row of ``bench_gpu.py --quick``: ``collect()`` with backend "vllm" on
    load_format="dummy" weights, on an engine of its own (costly: ``pytest -m costly``)."""
    from xlikert.testing.engines import ENGINES

    d = _bench_gpu_quick(tmp_path / "gpu.json")
    (vrow,) = [r for r in d["rows"] if r["backend"] == "vllm"]
    if not (ENGINES / "vllm" / "bin" / "python").exists():
        assert vrow["not_run"].startswith("not run: vLLM not installed")
    else:
        assert "error" not in vrow and "not_run" not in vrow, vrow
        assert vrow["load_format"] == "dummy" and vrow["prompts"] == 56
        assert vrow["pmf_sums_to_one_and_mass_in_range"] and vrow["prompts_per_s"] > 0
        assert "logits processor" in vrow["readout"]
        text = "\n".join(bench_gpu.render(d))
        assert ("| tiny | vllm |" in text) and "| unknown |" in text


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
    bench = _import(f"{script.stem}_render_test", script)
    assert isinstance(bench.TITLE, str) and bench.TITLE
    found = [p for p in (BENCH / "results" / f"{name}.json", BENCH / "results" / f"{name}-quick.json")
             if p.exists()]  # fmt: skip
    if not found:
        # only a benchmark the lead has not run yet (the test suite's time) may lack its
        # JSON, and then its README text must say so rather than show a typed number
        assert name == "suite", f"no committed results JSON for {name}"
        assert "not recorded yet" in "\n".join(bench.render(None))
        assert "not recorded yet" in bench.readme_suite(None)
    for path in found:
        lines = bench.render(json.loads(path.read_text()))
        assert lines and all(isinstance(line, str) for line in lines), path


@pytest.fixture(scope="module")
def common():
    return _import("_common_for_test", BENCH / "_common.py")


def test_goal_verdict_reads_the_median_and_the_probes_beside_the_runs(common):
    verdict = common.goal_verdict
    steady = [100.0, 101.0, 100.5, 100.0]
    assert verdict([0.75, 0.80, 0.78], steady, 0.70) == "meets"
    assert verdict([0.50, 0.55, 0.52], steady, 0.70) == "misses"
    # one fast run does not carry the row: the median decides
    assert verdict([0.90, 0.60, 0.62], steady, 0.70) == "misses"
    # a 20% probe swing against a 3% margin: the machine could turn the verdict over
    assert verdict([0.72, 0.73, 0.71], [100.0, 120.0, 110.0], 0.70) == (
        "inconclusive (probe moved 20%)"
    )
    # the same swing against a wide margin decides nothing
    assert verdict([0.30, 0.31], [100.0, 120.0], 0.70) == "misses"
    with pytest.raises(ValueError):
        verdict([], steady, 0.7)


def test_probed_runs_put_a_probe_on_each_side_of_every_run(common):
    rates = iter([10.0, 20.0, 30.0, 40.0, 50.0])
    calls = []
    runs = common.ProbedRuns(lambda: next(rates))
    t = runs.run(lambda: calls.append(len(runs.probes)), 2)
    u = runs.run(lambda: calls.append(len(runs.probes)), 2)
    assert calls == [1, 2, 3, 4]  # probe, run, probe, run, ...
    assert (t["probe_before"], t["probe_after"]) == ([10.0, 20.0], [20.0, 30.0])
    assert (u["probe_before"], u["probe_after"]) == ([30.0, 40.0], [40.0, 50.0])
    assert runs.probes == [10.0, 20.0, 30.0, 40.0, 50.0]
    fr = common.run_fractions(60.0, [1.0, 2.0], t["probe_before"], t["probe_after"])
    assert fr == pytest.approx([60.0 / 15.0, 30.0 / 25.0])


def test_time_calls_resets_before_each_timed_call_and_keeps_the_last_result(common):
    calls = []
    seconds, last = common.time_calls(
        lambda: calls.append("run") or len(calls), 3, warm=True, reset=lambda: calls.append("reset")
    )
    assert calls == ["run", "reset", "run", "reset", "run", "reset", "run"]  # warm-up untimed
    assert len(seconds) == 3 and all(s >= 0 for s in seconds) and last == 7
    assert common.timed(lambda: "x")[0] == "x"


def test_json_line_child_reads_the_last_line_or_reports_the_failure(common):
    ok = "print('log line'); print('{\"a\": 1}')"
    assert common.json_line_child([sys.executable, "-c", ok])[0] == {"a": 1}
    record, res = common.json_line_child([sys.executable, "-c", "raise SystemExit('broken')"])
    assert record is None and "broken" in res.stderr


@pytest.fixture(scope="module")
def prompts_helpers():
    return _import("_prompts_for_test", BENCH / "_prompts.py")


def test_prompt_order_is_the_results_order(prompts_helpers):
    """The benchmarks compare per-prompt numbers across engines: the (system, user) pairs,
    the groups by system prompt and a results variable's cells share one order."""
    import xarray as xr

    prompts = xr.Dataset(
        {"system": ("target", ["S1", "S2"]),
         "user": (("item", "target"), [["a1", "a2"], ["b1", "b2"], ["c1", "c2"]])},
        coords={"target": ["t1", "t2"], "item": ["1", "2", "3"]},
    )  # fmt: skip
    pairs = prompts_helpers.prompt_pairs(prompts)
    assert pairs == [("S1", "a1"), ("S1", "b1"), ("S1", "c1"), ("S2", "a2"), ("S2", "b2"),
                     ("S2", "c2")]  # fmt: skip
    assert prompts_helpers.by_system(pairs, [[i] for i in range(6)]) == [[[0], [1], [2]],
                                                                        [[3], [4], [5]]]  # fmt: skip
    cells = xr.DataArray(
        [[[11, 12], [21, 22], [31, 32]], [[0, 0], [0, 0], [0, 0]]],
        dims=("model", "item", "target"),
    )  # the first model's cells, item-major as stored
    assert prompts_helpers.target_major(cells).tolist() == [11, 21, 31, 12, 22, 32]


@pytest.fixture(scope="module")
def vllm_helpers():
    return _import("_vllm_for_test", BENCH / "_vllm.py")


def test_vllm_child_runner_reads_its_json_or_says_why_not(tmp_path, vllm_helpers):
    out = tmp_path / "out.json"
    write = f"import json; json.dump({{'x': 2}}, open({str(out)!r}, 'w'))"
    env = {**os.environ}
    assert vllm_helpers.run_json_child([sys.executable, "-c", write], out, env, 60) == {"x": 2}
    out.unlink()
    fail = "import sys; sys.stderr.write('noise\\nValueError: bad engine\\n'); sys.exit(3)"
    rec = vllm_helpers.run_json_child([sys.executable, "-c", fail], out, env, 60)
    assert rec["error"].startswith("vLLM child failed (return code 3): ValueError: bad engine")
    assert vllm_helpers.not_measured(rec) == rec and vllm_helpers.not_measured({"x": 1}) == {}


@pytest.fixture(scope="module")
def render_helpers():
    return _import("_render_for_test", BENCH / "_render.py")


#: The pages whose measured figures must all come from generated blocks: the READMEs,
#: the benchmarks page and every page that holds a block (what the README held before
#: the docs site). docs/serving.md and docs/reasoning.md still state measurements typed
#: by hand (the docs issue's second phase moves them into blocks).
CHECKED_PAGES = ("README.md", "benchmarks/README.md", "docs/benchmarks.md",
                 "docs/getting-started.md", "docs/collection.md", "docs/development.md")  # fmt: skip


def test_readme_timings_come_from_generated_blocks(render_helpers):
    """No time, size, rate, percentage or speed-up is typed in the READMEs or the checked
    pages of the docs: each sits in a block that ``benchmarks/run_all`` writes from a
    results JSON."""
    unsourced = render_helpers.unsourced_numbers
    for page in CHECKED_PAGES:
        assert unsourced((ROOT / page).read_text()) == [], page
    # the check finds a typed figure, and accepts the same figure inside a block
    typed = "Timed here: `pytest` took 6 min 27 s, peak RSS 2.7 GB, 95% of raw, 6.3× faster.\n"
    assert [f.split(":")[0] for f in unsourced(typed)] == ["6 min", "27 s", "2.7 GB", "95%", "6.3×"]
    assert unsourced(f"<!-- t:start -->\n{typed}<!-- t:end -->\n") == []


def test_readme_blocks_are_what_run_all_writes_from_the_json(render_helpers):
    """The generated blocks (in the README or the pages of docs/) equal what ``run_all
    --readme-only`` writes now from the committed JSON, and each stands in one page: a
    hand edit inside a block, or JSON re-measured without regenerating the pages, fails
    here."""
    run_all = _import("run_all_for_test", BENCH / "run_all")
    want = {name: body for name, (_, body) in run_all.readme_blocks().items()}
    assert set(want) == {"suite-time", "suite-fresh-time", "demo-time", "vllm-speed"}
    have: dict[str, list[str]] = {}
    for page in run_all.block_pages():
        for name, body in render_helpers.blocks(page.read_text()).items():
            have.setdefault(name, []).append(body)
    assert {k: have.get(k) for k in want} == {k: [v] for k, v in want.items()}


def test_bench_suite_reads_pytests_closing_line():
    suite = _import("bench_suite_for_test", BENCH / "bench_suite.py")
    out = "tests/a.py ....\n= 731 passed, 14 skipped, 3 warnings in 387.12s (0:06:27) =\n"
    assert suite.summary_counts(out) == {"passed": 731, "skipped": 14}
    assert suite.summary_counts("= 2 failed, 5 passed, 1 error in 3.20s =") == {
        "failed": 2, "passed": 5, "errors": 1,
    }  # fmt: skip
    assert suite.summary_counts("no summary") == {}
    d = {"date": "2026-11-25", "measured_command": "python -m pytest -n 2", "wall_s": 600.0,
         "counts": {"passed": 3}, "returncode": 0, "machine": {"cpu_count": 2},
         "what": "engines already built"}  # fmt: skip
    text = suite.readme_suite(d)
    assert "10.0 min" in text and "3 passed" in text and "engines already built" in text
    closing = "....\n= 1743 passed, 12 skipped, 2 warnings in 617.12s (0:10:17) =\n"
    assert suite.pytest_seconds(closing) == 617.12 and suite.pytest_seconds("none") is None
    fresh = {"date": "2026-11-26", "commit": "6a32397" + "0" * 33, "measured_command": ".ci/run",
             "ci_wall_s": 1500.0, "pytest_wall_s": 617.12, "counts": {"passed": 1743},
             "returncode": 0, "machine": {"cpu_count": 2}, "what": "a git clone"}  # fmt: skip
    text = suite.readme_fresh(fresh)
    assert "25.0 min in all" in text and "pytest 10.3 min" in text and "6a32397000" in text
    assert "not recorded yet" in suite.readme_fresh(None)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_benchmarks_use_public_api_only():
    """No benchmark reads another object's private attribute (xlikert's, a library's) or
    overrides a private method of an xlikert class: they measure what users can call."""
    import ast

    xlikert_private = set()  # private methods and attributes of xlikert's classes
    for path in (ROOT / "xlikert").rglob("*.py"):
        for cls in ast.walk(ast.parse(path.read_text())):
            if isinstance(cls, ast.ClassDef):
                for node in ast.walk(cls):
                    if isinstance(node, ast.FunctionDef) and _private(node.name):
                        xlikert_private.add(node.name)
                    if isinstance(node, ast.Attribute) and _private(node.attr):
                        xlikert_private.add(node.attr)
    found = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            own = isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("self", "cls")
            if isinstance(node, ast.Attribute) and _private(node.attr) and not own:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.ClassDef):
                found += [
                    f"{path.name}:{item.lineno}: overrides {item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef) and item.name in xlikert_private
                ]
    assert found == []


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="Linux /proc only")
def test_bench_analysis_peak_memory_is_the_childs_own_not_its_parents():
    """A child's ``ru_maxrss`` starts at its parent's peak (kept across execve); the large
    design's children report their own high-water mark."""
    import resource

    held = np.ones(300 * 2**20 // 8)  # this process: 300 MB more resident than the child
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10 > 300
    code = (
        f"import sys, resource; sys.path.insert(0, {str(BENCH)!r}); "
        "from bench_analysis import peak_rss_mb; "
        "print(peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, inherited = map(float, out.stdout.split())
    assert own < 200 < 300 < inherited, (own, inherited)  # numpy imported: ~30-60 MB
    del held
