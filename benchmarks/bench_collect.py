"""Collection throughput: the plain loop a researcher would write vs xlikert, against the FLOP limit.

On Qwen2.5-Coder-0.5B-Instruct (built-in offline model) over the demo experiment's
CETSCALE prompts (68; ``--quick``: 17), model load excluded, warm (one prompt first;
that run also makes the prefix-cache check, which is made once per loaded model):

* plain loop: one prompt per forward pass, full logits at every position, softmax of
  the last row, gather the digit tokens (the paper's one-token rule);
* xlikert ``collect``, one-token rule (``split_space=False``, the plain loop's rule):
  batched, length sorted, left padded, the shared system prompt's KV cache,
  ``logits_to_keep``, the float64 numpy rules of ``xlikert.constraint`` (log-softmax,
  decoding grid, top-k) over the full vocabulary;
* xlikert ``collect``, split-space rule (the default): also the bare space token
  followed by a digit, exactly (one more token and one more logits row per prompt);
* vLLM (CPU build), xlikert's in-process vLLM backend on the same model and rule, run in
  the vLLM venv (``benchmarks/_vllm_child.py``); "not run" when the venv is missing.

Every row gets two numbers against the float32 GEMM rate measured in the same run
(an ``(M, hidden) x (hidden, intermediate)`` product, the model's MLP shape):

* **hardware utilisation** = executed FLOPs / time / matmul rate; executed FLOPs are
  read from the shapes of every forward call (``_flops.FlopCounter``: padding,
  recomputed prefixes and every kept logits row count); for vLLM from each request's
  prompt length and prefix-cache hits (one logits row per request);
* **fraction of the useful-FLOP bound** = useful FLOPs / time / matmul rate, i.e.
  prompts/s over the bound ``matmul rate / useful FLOPs per prompt``; useful FLOPs
  (``_flops.useful_flops``) are the least the row's answer rule needs: the shared
  prefix once, each prompt's own tokens once, one lm_head row per logits position read.
  The plain loop and the one-token rows share one useful count.

Timings: median of ``--repeat`` runs (each in the JSON). The machine may be shared;
the load average before and after is recorded.

The demo's peak memory is measured by ``bench_memory.py`` (``results/memory.json``);
the README cites it beside this table.

Usage::

    python benchmarks/bench_collect.py --quick   # 1 target x 17 items, 1 repeat
    python benchmarks/bench_collect.py           # 4 targets x 17 items, 3 repeats
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, format_table, machine, result_path, write_json
from _flops import (
    FlopCounter,
    full_pass_flops,
    lm_head_flops,
    matmul_rate,
    span_flops,
    useful_flops,
)
from _render import fmt, goal, pct, stamp, table
from _vllm import run_child

GOALS = {"speedup": 3.0, "fraction_of_useful_bound": 0.70}


def timed(fn, repeat: int, counter: FlopCounter | None = None) -> dict[str, Any]:
    """Run ``fn`` ``repeat`` times: seconds of each, and the executed FLOPs of the last."""
    seconds, result = [], None
    for _ in range(repeat):
        if counter is not None:
            counter.reset()
        t0 = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - t0)
    return {"seconds": seconds, "median_s": statistics.median(seconds), "result": result,
            "executed_flops": counter.flops if counter is not None else None}  # fmt: skip


def _engine_row(method: str, timing: dict, cfg, useful: float, gemm: float) -> dict[str, Any]:
    """A row from a vLLM child's timing: its requests' prompt tokens and prefix-cache hits."""
    n = timing["prompts"]
    executed = sum(
        span_flops(cfg, cached, total) + lm_head_flops(cfg) for total, cached in timing["requests"]
    )
    med = statistics.median(timing["seconds"])
    return {
        "method": method, "rule": "one token", "backend": "vllm",
        "prompts": n, "seconds": timing["seconds"], "median_s": med, "prompts_per_s": n / med,
        "executed_gflop_per_prompt": executed / n / 1e9,
        "useful_gflop_per_prompt": useful / 1e9,
        "executed_over_useful": executed / n / useful,
        "hardware_utilisation": executed / med / gemm,
        "fraction_of_useful_bound": useful * n / med / gemm,
        "requests": len(timing["requests"]),
        "requests_per_prompt": len(timing["requests"]) / n,
        "prompt_tokens": sum(t for t, _ in timing["requests"]),
        "prefix_cache_hit_tokens": sum(h for _, h in timing["requests"]),
    }  # fmt: skip


def vllm_rows(args, cfg, useful: float, gemm: float) -> list[dict[str, Any]]:
    """xlikert's vLLM backend and raw vLLM (one request per prompt), from one child run."""
    child = ["--model", args.model, "--repeat", str(args.repeat)]
    if args.quick:
        child += ["--targets", "1"]
    data = run_child("collect", child)
    ours = "vLLM (CPU build), xlikert backend='vllm'"
    raw = "vLLM (CPU build), raw: generate(max_tokens=1, logprobs=20), 1 request/prompt"
    if "not_run" in data or "error" in data:
        why = {k: data[k] for k in ("not_run", "error") if k in data}
        return [{"method": m, "rule": "one token", "backend": "vllm", **why} for m in (ours, raw)]
    info = {"vllm": data["vllm"], "torch_threads": data["torch_threads"],
            "load_s": data["load_s"], "engine": data["engine"], "env": data["env"],
            "child_wall_s": data["wall_s"]}  # fmt: skip
    row = _engine_row(ours, data["collect"], cfg, useful, gemm)
    row.update(valid_mass=data["collect"]["valid_mass"], **info)
    return [row, {**_engine_row(raw, data["raw"], cfg, useful, gemm), **info}]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="1 target (17 prompts), 1 repeat")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch-size", default="auto", help="xlikert batch size (default auto)")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per row (3; quick 1)")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM row")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 3)
    load_before = os.getloadavg()

    import torch

    from xlikert.collect import collect
    from xlikert.collect.local import LocalModel, load_model
    from xlikert.collect.tokens import answer_rule
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts()
    if args.quick:
        prompts = prompts.isel(target=[0])
    n = int(prompts.user.size)
    t0 = time.perf_counter()
    lm = load_model(args.model, range(1, 8), device=args.device, split_space=False)
    load_s = time.perf_counter() - t0
    valid, answers, _ = answer_rule(lm.tokenizer, range(1, 8), split_space=True)
    lm_split = dataclasses.replace(lm, valid=valid, answers=answers)
    model, tok, cfg = lm.model, lm.tokenizer, lm.model.config
    dev = str(lm.device)
    counter = FlopCounter(model)

    # ---- the plain loop
    digit_ids = list(lm.valid.ids)
    import xarray as xr

    system, user = (
        a.transpose("target", "item") for a in xr.broadcast(prompts.system, prompts.user)
    )
    pairs = list(zip(map(str, system.values.ravel()), map(str, user.values.ravel()), strict=True))

    def plain_loop(limit=None):
        out = []
        for s, u in pairs[:limit]:
            msgs = [{"role": "system", "content": s}, {"role": "user", "content": u}]
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids.to(dev)
            with torch.no_grad():
                logits = model(ids).logits
            p = torch.softmax(logits[0, -1].float(), -1)
            out.append(p[digit_ids].cpu().numpy())
        return out

    def xlikert(loaded, p=prompts, split=False):
        return collect(
            p, [{"name": "m", "source": args.model}], progress=False, split_space=split,
            batch_size=bs, loader=lambda spec, opts, probe: LocalModel(loaded, opts),
        )  # fmt: skip

    bs = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    one = prompts.isel(target=[0], item=[0])
    plain_loop(1)
    xlikert(lm, one)
    xlikert(lm_split, one, split=True)
    gemm_info = matmul_rate(dev, torch.float32, 256, cfg.hidden_size, cfg.intermediate_size)
    with counter:
        plain = timed(plain_loop, args.repeat, counter)
        one_tok = timed(lambda: xlikert(lm), args.repeat, counter)
        split = timed(lambda: xlikert(lm_split, split=True), args.repeat, counter)
    gemm_after = matmul_rate(dev, torch.float32, 256, cfg.hidden_size, cfg.intermediate_size)
    # the rate measured before and after the timed runs; the mean is the reference
    gemm = (gemm_info["flops_per_s"] + gemm_after["flops_per_s"]) / 2
    ds, ds_split = one_tok["result"], split["result"]

    # ---- FLOPs
    texts = [
        str(t) for t in ds.prompt_text.isel(model=0).transpose("target", "item").values.ravel()
    ]
    encoded = [lm.encode(t) for t in texts]
    groups: dict[str, list[list[int]]] = {}
    for (s, _), e in zip(pairs, encoded, strict=True):
        groups.setdefault(s, []).append(e)
    useful_one = useful_flops(cfg, list(groups.values())) / n
    useful_split = useful_flops(cfg, list(groups.values()), extra_tokens=1, rows=2) / n

    def row(method, rule_name, t, useful, executed):
        rate = n / t["median_s"]
        return {
            "method": method, "rule": rule_name, "prompts": n, "seconds": t["seconds"],
            "median_s": t["median_s"], "prompts_per_s": rate,
            "executed_gflop_per_prompt": executed / n / 1e9,
            "useful_gflop_per_prompt": useful / 1e9,
            "hardware_utilisation": executed / t["median_s"] / gemm,
            "fraction_of_useful_bound": rate * useful / gemm,
        }  # fmt: skip

    batch = ds.likert.attrs["models"]["m"].get("batch_size")
    rows = [
        row("plain loop (1 prompt/forward, full logits)", "one token", plain, useful_one,
            plain["executed_flops"]),
        row(f"xlikert `collect` (batch {batch})", "one token", one_tok, useful_one,
            one_tok["executed_flops"]),
        row(f"xlikert `collect` (batch {batch})", "split space (default)", split, useful_split,
            split["executed_flops"]),
    ]  # fmt: skip
    plain_s = plain["median_s"]
    for r in rows:
        r["speedup_vs_plain"] = plain_s / r["median_s"]
    plain_vm = np.array([o.sum() for o in plain["result"]])
    xl_vm = ds.valid_mass.isel(model=0).transpose("target", "item").values.ravel()
    split_added = (ds_split.valid_mass - ds.valid_mass).values.ravel()
    if not args.no_vllm:
        for vr in vllm_rows(args, cfg, useful_one, gemm):
            if "median_s" in vr:
                vr["speedup_vs_plain"] = plain_s / vr["median_s"]
            if "valid_mass" in vr:
                vr["max_abs_valid_mass_diff_vs_transformers"] = float(
                    np.max(np.abs(np.asarray(vr.pop("valid_mass")) - xl_vm))
                )
            rows.append(vr)

    res = {
        "benchmark": "collect",
        "quick": args.quick,
        "model": args.model,
        "prompts": n,
        "repeat": args.repeat,
        "device": dev,
        "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "load_seconds": round(load_s, 2),
        "matmul": {"before": gemm_info, "after": gemm_after, "gflops": gemm / 1e9},
        "matmul_gflops": gemm / 1e9,
        "rows": rows,
        "plain_loop_full_pass_gflop_per_prompt": full_pass_flops(cfg, encoded) / n / 1e9,
        "max_abs_valid_mass_diff_plain_vs_xlikert": float(np.max(np.abs(plain_vm - xl_vm))),
        "split_space_valid_mass_added_mean": float(split_added.mean()),
        "split_space_valid_mass_added_max": float(split_added.max()),
        "goals": GOALS,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "machine": machine(["torch", "transformers"]),
    }
    table = []
    for r in rows:
        if "prompts_per_s" not in r:
            table.append([r["method"], r["rule"], r.get("not_run") or r.get("error", "")[:60]]
                         + ["-"] * 5)  # fmt: skip
            continue
        table.append([r["method"], r["rule"], r["prompts_per_s"], r["executed_gflop_per_prompt"],
                      f"{r['hardware_utilisation']:.1%}", r["useful_gflop_per_prompt"],
                      f"{r['fraction_of_useful_bound']:.1%}", r["speedup_vs_plain"]])  # fmt: skip
    print(f"\n{args.model} on {dev}, {n} prompts, float32 matmul {gemm / 1e9:.1f} GFLOP/s "
          f"(before {gemm_info['flops_per_s'] / 1e9:.1f}, after "
          f"{gemm_after['flops_per_s'] / 1e9:.1f}); median of {args.repeat} run(s)")  # fmt: skip
    print(format_table(table, ["method", "rule", "prompts/s", "executed GFLOP/prompt",
                               "hardware util.", "useful GFLOP/prompt", "of useful bound",
                               "speed-up"], "llrrrrrr"))  # fmt: skip
    print(
        f"max |valid mass plain - xlikert| = {res['max_abs_valid_mass_diff_plain_vs_xlikert']:.2e}"
    )
    write_json(result_path("collect", args.quick, args.out), res)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Collection throughput"


def render(d: dict[str, Any]) -> list[str]:
    g = d.get("goals", {})
    mm = d["matmul"]
    la, lb = d.get("load_average_before"), d.get("load_average_after")
    out = [
        f"{d['model']} on {d['device']} ({d.get('dtype', '?')}), {d['prompts']} prompts, "
        "median of the runs per row (each in the JSON); float32 matmul "
        f"({'×'.join(map(str, mm['before']['shape']))}, {mm['before']['threads']} threads) "
        f"measured in the same run: {fmt(d['matmul_gflops'])} GFLOP/s (before the timed runs "
        f"{fmt(mm['before']['flops_per_s'] / 1e9)}, after {fmt(mm['after']['flops_per_s'] / 1e9)})"
        + (
            f"; 1-minute load average {la[0]:.1f} before, {lb[0]:.1f} after (a shared machine: "
            "timings have noise)"
            if la and lb
            else ""
        )
        + ".",
        "",
        "Hardware utilisation = executed FLOPs / time / matmul rate; executed FLOPs come from "
        "the shapes of every forward call (padding, recomputed prefixes, the prefix-cache check "
        "and every kept logits row count; vLLM: each request's prompt tokens not served from "
        "its prefix cache, plus one logits row). Fraction of the useful-FLOP bound = useful "
        "FLOPs / time / matmul rate; useful FLOPs: the shared system prefix once, each prompt's "
        "own tokens once, one lm_head row per logits position the answer rule reads (the same "
        "count for every one-token row). Matmuls count 2 FLOPs per weight, attention causally.",
        "",
    ]
    rows = []
    for r in d["rows"]:
        if "prompts_per_s" not in r:
            why = r.get("not_run") or ("error: " + r.get("error", "")[:200])
            rows.append([r["method"], r["rule"], "–", why, "–", "–", "–", "–", "–", ""])
            continue
        mark = ""
        if r["method"].startswith("xlikert"):
            fb, sp = g.get("fraction_of_useful_bound", 0.7), g.get("speedup", 3.0)
            mark = (f"≥ {pct(fb)} of bound: {goal(r['fraction_of_useful_bound'] >= fb)}; "
                    f"speed-up ≥ {fmt(sp)}×: {goal(r['speedup_vs_plain'] >= sp)}")  # fmt: skip
        rows.append([r["method"], r["rule"], fmt(len(r["seconds"])), fmt(r["prompts_per_s"]),
                     fmt(r["executed_gflop_per_prompt"]), pct(r["hardware_utilisation"]),
                     fmt(r["useful_gflop_per_prompt"]), pct(r["fraction_of_useful_bound"]),
                     fmt(r["speedup_vs_plain"]), mark])  # fmt: skip
    out += table(["method", "answer rule", "runs", "prompts/s", "executed GFLOP/prompt",
                  "hardware utilisation", "useful GFLOP/prompt", "fraction of useful-FLOP bound",
                  "speed-up vs plain loop", "goal"], rows)  # fmt: skip
    out += [
        "Every timed run, in order (s): "
        + "; ".join(
            f"{r['method']}, {r['rule']}: " + ", ".join(fmt(x) for x in r["seconds"])
            for r in d["rows"]
            if r.get("seconds")
        )
        + ". Runs of one row that differ by more than their noise mean the machine's load "
        "changed during the benchmark; the rows are then not comparable with each other.",
        "",
    ]
    out += [
        "The one-token rows read the paper's rule, as the plain loop does; the default "
        "split-space rule also counts a bare space token followed by a digit, exactly (one "
        "more token and logits row per prompt); on this model it adds "
        f"{d['split_space_valid_mass_added_mean']:.1e} valid mass on average (max "
        f"{d['split_space_valid_mass_added_max']:.1e}). Plain loop vs xlikert: valid masses "
        f"agree within {d['max_abs_valid_mass_diff_plain_vs_xlikert']:.1e}.",
        "",
    ]
    for r in d["rows"]:
        if r.get("backend") == "vllm" and "prompts_per_s" in r:
            agree = r.get("max_abs_valid_mass_diff_vs_transformers")
            out += [
                f"{r['method']}: vLLM {r['vllm']} (CPU build, {r['engine'].get('dtype')}, "
                f"torch threads {r['torch_threads']}"
                + "".join(f", {k}={v}" for k, v in r["env"].items())
                + f") in its venv: {r['requests']} requests for {r['prompts']} prompts; "
                f"{r['prefix_cache_hit_tokens']:,} of {r['prompt_tokens']:,} prompt tokens "
                "served from its prefix cache (vLLM's `num_cached_tokens`)"
                + (
                    f"; valid masses within {agree:.1e} of the transformers backend's."
                    if agree is not None
                    else "."
                ),
                "",
            ]
    mem_path = RESULTS / "memory.json"
    if mem_path.exists():
        m = json.loads(mem_path.read_text())
        runs = "; ".join(f"{r['run']}: {fmt(r['peak_gb'])} GB" for r in m["runs"])
        out += [f"Peak RSS of `{m['measured_command']}` (3 models × 68 prompts), from "
                f"`results/memory.json` ({stamp(m, mem_path)}, `bench_memory.py`): {runs}; "
                "see *Peak memory of the demo*.", ""]  # fmt: skip
    else:
        out += ["Peak RSS of the demo: `results/memory.json` not written yet "
                "(`python benchmarks/bench_memory.py`).", ""]  # fmt: skip
    out += ["GPU: see *Collection on a GPU* (`bench_gpu.py`).", ""]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
