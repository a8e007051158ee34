"""Collection throughput: the plain loop a researcher would write vs xlikert, against the FLOP limit.

On Qwen2.5-Coder-0.5B-Instruct (built-in offline model) over the demo experiment's
CETSCALE prompts (68; ``--quick``: 17), model load excluded, warm (one prompt first;
that warm-up also makes the prefix-cache check, which is made once per loaded model, so
the timed runs and their executed FLOPs do not include it; the JSON records where it
ran):

* plain loop: one prompt per forward pass, full logits at every position, softmax of
  the last row, gather the digit tokens (the paper's one-token rule);
* xlikert ``collect``, one-token rule (``split_space=False``, the plain loop's rule):
  batched, length sorted, left padded, the shared system prompt's KV cache,
  ``logits_to_keep``, the float64 numpy rules of ``xlikert.analysis.constraint`` (log-softmax,
  decoding grid, top-k) over the full vocabulary;
* xlikert ``collect``, split-space rule (the default): also the bare space token
  followed by a digit, exactly (one more token and one more logits row per prompt);
* vLLM (CPU build), xlikert's in-process vLLM backend on the same model and rule, run in
  the vLLM venv (``benchmarks/_vllm_child.py``); "not run" when the venv is missing.

Every row gets two numbers against the float32 GEMM rate measured right beside each
timed run (an ``(M, hidden) x (hidden, intermediate)`` product, the model's MLP shape;
probe, run, probe, run, probe, ...: each run is divided by the mean of the probes just
before and just after it; the vLLM rows use the probes just before and just after the
vLLM child: probes inside the child, recorded beside each of its runs, read low because
vLLM's engine process keeps the cores busy):

* **hardware utilisation** = executed FLOPs / time / matmul rate; executed FLOPs are
  read from the shapes of every forward call (``_flops.FlopCounter``: padding,
  recomputed prefixes and every kept logits row count); for vLLM from each request's
  prompt length and prefix-cache hits (one logits row per request);
* **fraction of the useful-FLOP bound** = useful FLOPs / time / matmul rate, i.e.
  prompts/s over the bound ``matmul rate / useful FLOPs per prompt``; useful FLOPs
  (``_flops.useful_flops``) are the least the row's answer rule needs: the shared
  prefix once, each prompt's own tokens once, one lm_head row per logits position read.
  The plain loop and the one-token rows share one useful count.

Timings: median of ``--repeat`` runs (each in the JSON), and the fraction of the bound
as median and min–max over the runs. The goal (>= 70% of the useful-FLOP bound) is met
only when the median run meets it, and is "inconclusive" when the probes beside the
runs moved more than the median's margin from the goal
(``_common.goal_verdict``). The machine may be shared; the load average before and
after is recorded.

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
from _common import (
    RESULTS,
    ProbedRuns,
    format_table,
    goal_verdict,
    machine,
    probe_moved,
    result_path,
    run_fractions,
    write_json,
)
from _flops import (
    FlopCounter,
    block_cache_flops,
    block_cache_hits,
    full_pass_flops,
    matmul_rate,
    request_flops,
    useful_flops,
)
from _render import fmt, goal, pct, spread, stamp, table, verdict
from _vllm import run_child

GOALS = {"speedup": 3.0, "fraction_of_useful_bound": 0.70}
#: Seconds of each matmul probe (one before the first timed run, one after every run).
PROBE_SECONDS = 1.0


def _engine_row(method: str, timing: dict, cfg, useful: float, gemm: tuple[float, float]
                ) -> dict[str, Any]:  # fmt: skip
    """A row from a vLLM child's timing: its requests' prompt tokens and prefix-cache hits."""
    n = timing["prompts"]
    executed = request_flops(cfg, timing["requests"])
    med = statistics.median(timing["seconds"])
    # The parent's probes just before and just after the child: the child's own probes
    # (kept for the record) run beside vLLM's engine process, whose threads keep the cores
    # busy, and read a fraction of the rate the engine's kernels get (rows above 100%).
    runs = len(timing["seconds"])
    probes = {"probe_before": [gemm[0]] * runs, "probe_after": [gemm[1]] * runs,
              "probe": "parent, before and after the vLLM child",
              "child_probe_before": timing.get("probe_before"),
              "child_probe_after": timing.get("probe_after")}  # fmt: skip
    return {
        "method": method, "rule": "one token", "backend": "vllm",
        "prompts": n, "seconds": timing["seconds"], "median_s": med, "prompts_per_s": n / med,
        "executed_gflop_per_prompt": executed / n / 1e9,
        "useful_gflop_per_prompt": useful / 1e9,
        "executed_over_useful": executed / n / useful,
        **_fractions(timing["seconds"], probes["probe_before"], probes["probe_after"],
                     executed, useful * n),
        **probes,
        "requests": len(timing["requests"]),
        "requests_per_prompt": len(timing["requests"]) / n,
        "prompt_tokens": sum(t for t, _ in timing["requests"]),
        "prefix_cache_hit_tokens": sum(h for _, h in timing["requests"]),
    }  # fmt: skip


def _fractions(seconds, before, after, executed: float, useful: float) -> dict[str, Any]:
    """Hardware utilisation and fraction of the useful-FLOP bound: median and each run's.

    ``executed`` and ``useful`` are the FLOPs of one run (all its prompts).
    """
    util = run_fractions(executed, seconds, before, after)
    frac = run_fractions(useful, seconds, before, after)
    return {"hardware_utilisation": statistics.median(util), "hardware_utilisation_runs": util,
            "fraction_of_useful_bound": statistics.median(frac),
            "fraction_of_useful_bound_runs": frac}  # fmt: skip


def vllm_rows(args, cfg, useful: float, runs: ProbedRuns) -> list[dict[str, Any]]:
    """xlikert's vLLM backend and raw vLLM (one request per prompt), from one child run.

    The parent's probe runs just before and just after the child (``runs``); the child
    also probes the same float32 matmul beside each of its timed runs, for the record.
    """
    shape = f"256,{cfg.hidden_size},{cfg.intermediate_size}"
    child = ["--model", args.model, "--repeat", str(args.repeat), "--probe", shape,
             "--probe-seconds", str(PROBE_SECONDS)]  # fmt: skip
    if args.quick:
        child += ["--targets", "1"]
    child_run = runs.run(lambda: run_child("collect", child), 1)  # probe, child, probe
    data = child_run["result"]
    gemm = (child_run["probe_before"][0], child_run["probe_after"][0])
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


def block_projection(cfg, encoded, useful: float, row: dict[str, Any],
                     blocks=(16, 32)) -> dict[str, Any]:  # fmt: skip
    """vLLM's block prefix cache projected on the same token ids (not measured).

    For each block size, the cached tokens and executed FLOPs of one request per
    prompt sent one after another (:func:`_flops.block_cache_hits`), beside the
    raw-vLLM ``row``'s measured cache hits at the run's block size, which check
    the projection. ``useful`` is FLOPs per prompt.
    """
    n = len(encoded)
    out: dict[str, Any] = {
        "run_block": row["engine"].get("block_size"),
        "measured_cached_tokens": row["prefix_cache_hit_tokens"],
        "blocks": {},
    }
    for b in blocks:
        executed = block_cache_flops(cfg, encoded, b) / n
        out["blocks"][str(b)] = {
            "cached_tokens": sum(block_cache_hits(encoded, b)),
            "executed_gflop_per_prompt": executed / 1e9,
            "executed_over_useful": executed / useful,
        }
    return out


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
    from xlikert.collect.backends.transformers import LocalModel, load_model
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
    # the warm-up made the prefix-cache check (once per loaded model): outside the timed runs
    checked_in_warm_up = sorted(lm.cache_checked)
    gemm_info = matmul_rate(dev, torch.float32, 256, cfg.hidden_size, cfg.intermediate_size,
                            seconds=PROBE_SECONDS)  # fmt: skip

    def probe() -> float:
        return matmul_rate(dev, torch.float32, 256, cfg.hidden_size, cfg.intermediate_size,
                           seconds=PROBE_SECONDS)["flops_per_s"]  # fmt: skip

    runs = ProbedRuns(probe)
    with counter:
        plain = runs.run(plain_loop, args.repeat, counter.reset)
        plain["executed_flops"] = counter.flops
        one_tok = runs.run(lambda: xlikert(lm), args.repeat, counter.reset)
        one_tok["executed_flops"] = counter.flops
        split = runs.run(lambda: xlikert(lm_split, split=True), args.repeat, counter.reset)
        split["executed_flops"] = counter.flops
    checked_in_timed_runs = sorted(lm.cache_checked - set(checked_in_warm_up))
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
        return {
            "method": method, "rule": rule_name, "prompts": n, "seconds": t["seconds"],
            "median_s": t["median_s"], "prompts_per_s": n / t["median_s"],
            "executed_gflop_per_prompt": executed / n / 1e9,
            "useful_gflop_per_prompt": useful / 1e9,
            **_fractions(t["seconds"], t["probe_before"], t["probe_after"], executed, useful * n),
            "probe_before": t["probe_before"], "probe_after": t["probe_after"], "probe": "parent",
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
        for vr in vllm_rows(args, cfg, useful_one, runs):
            if "median_s" in vr:
                vr["speedup_vs_plain"] = plain_s / vr["median_s"]
            if "valid_mass" in vr:
                vr["max_abs_valid_mass_diff_vs_transformers"] = float(
                    np.max(np.abs(np.asarray(vr.pop("valid_mass")) - xl_vm))
                )
            if vr["method"].startswith("vLLM (CPU build), raw") and "prompts_per_s" in vr:
                vr["block_projection"] = block_projection(cfg, encoded, useful_one, vr)
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
        "matmul": {
            "before": gemm_info,
            "probe_seconds": PROBE_SECONDS,
            "probes_gflops": [x / 1e9 for x in runs.probes],
            "gflops": statistics.median(runs.probes) / 1e9,
        },
        "matmul_gflops": statistics.median(runs.probes) / 1e9,
        "prefix_cache_check": {"warm_up": checked_in_warm_up, "timed_runs": checked_in_timed_runs},
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
                         + ["-"] * 6)  # fmt: skip
            continue
        table.append([r["method"], r["rule"], r["prompts_per_s"], r["executed_gflop_per_prompt"],
                      f"{r['hardware_utilisation']:.1%}", r["useful_gflop_per_prompt"],
                      spread(r["fraction_of_useful_bound_runs"]), r["speedup_vs_plain"],
                      bound_verdict(r, GOALS["fraction_of_useful_bound"])
                      if r["method"].startswith("xlikert") else ""])  # fmt: skip
    print(f"\n{args.model} on {dev}, {n} prompts, float32 matmul probes beside the runs "
          f"{min(runs.probes) / 1e9:.1f}-{max(runs.probes) / 1e9:.1f} GFLOP/s; median "
          f"(min-max) of {args.repeat} run(s)")  # fmt: skip
    print(format_table(table, ["method", "rule", "prompts/s", "executed GFLOP/prompt",
                               "hardware util.", "useful GFLOP/prompt", "of useful bound",
                               "speed-up", f">= {GOALS['fraction_of_useful_bound']:.0%} of bound"],
                       "llrrrrrrl"))  # fmt: skip
    print(
        f"max |valid mass plain - xlikert| = {res['max_abs_valid_mass_diff_plain_vs_xlikert']:.2e}"
    )
    write_json(result_path("collect", args.quick, args.out), res)
    return 0


def bound_verdict(r: dict[str, Any], goal_fraction: float) -> str:
    """:func:`_common.goal_verdict` of a row; rows written before per-run probes use their
    one fraction and the run's two probes (``matmul`` before and after, when given)."""
    fractions = r.get("fraction_of_useful_bound_runs") or [r["fraction_of_useful_bound"]]
    probes = [*r.get("probe_before", []), *r.get("probe_after", [])] or r.get("_probes", [1.0])
    return goal_verdict(fractions, probes, goal_fraction)


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Collection throughput"


def _probes_text(d: dict[str, Any]) -> str:
    mm = d["matmul"]
    shape = f"{'×'.join(map(str, mm['before']['shape']))}, {mm['before']['threads']} threads"
    if "probes_gflops" in mm:
        pr = mm["probes_gflops"]
        return (f"float32 matmul ({shape}) probed for {fmt(mm['probe_seconds'])} s before the "
                f"first timed run and after every run, each run divided by the mean of the "
                f"probes beside it: {len(pr)} probes, {fmt(min(pr))}–{fmt(max(pr))} GFLOP/s "
                f"(moved {pct(probe_moved(pr))}); the vLLM rows use the probes just before and "
                "just after the vLLM child")  # fmt: skip
    return (f"float32 matmul ({shape}) measured before the timed runs "
            f"({fmt(mm['before']['flops_per_s'] / 1e9)} GFLOP/s) and after them "
            f"({fmt(mm['after']['flops_per_s'] / 1e9)}); every run divided by their mean, "
            f"{fmt(d['matmul_gflops'])} GFLOP/s (written before per-run probes)")  # fmt: skip


def _row_probes(d: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    """The row, with the run's two probes where it has none of its own (older JSON)."""
    if "probe_before" in r:
        return r
    mm = d["matmul"]
    return {**r, "_probes": [mm["before"]["flops_per_s"], mm["after"]["flops_per_s"]]}


def _prefix_check_text(d: dict[str, Any]) -> str:
    pc = d.get("prefix_cache_check")
    if pc is None:
        return ("The prefix-cache check (once per loaded model) ran in the warm-up call, "
                "before the timed runs: it is not in their time or executed FLOPs.")  # fmt: skip
    where = []
    if pc["warm_up"]:
        where.append(f"in the warm-up call ({', '.join(pc['warm_up'])}), outside the timed runs "
                     "and their executed FLOPs")  # fmt: skip
    if pc["timed_runs"]:
        where.append(f"in the first timed run ({', '.join(pc['timed_runs'])}), counted in its "
                     "time and executed FLOPs")  # fmt: skip
    return ("The cache check (a cached pass against an uncached one, once per loaded model) "
            "ran " + ("; ".join(where) or "nowhere (caching off)") + ".")  # fmt: skip


def render(d: dict[str, Any]) -> list[str]:
    g = d.get("goals", {})
    la, lb = d.get("load_average_before"), d.get("load_average_after")
    fb, sp = g.get("fraction_of_useful_bound", 0.7), g.get("speedup", 3.0)
    out = [
        f"{d['model']} on {d['device']} ({d.get('dtype', '?')}), {d['prompts']} prompts, "
        "median of the runs per row (each in the JSON); "
        + _probes_text(d)
        + (
            f"; 1-minute load average {la[0]:.1f} before, {lb[0]:.1f} after (a shared machine: "
            "timings have noise)"
            if la and lb
            else ""
        )
        + ".",
        "",
        "Hardware utilisation = executed FLOPs / time / matmul rate; executed FLOPs come from "
        "the shapes of every forward call in a timed run (padding, recomputed prefixes and "
        "every kept logits row count; vLLM: each request's prompt tokens not served from "
        "its prefix cache, plus one logits row). Fraction of the useful-FLOP bound = useful "
        "FLOPs / time / matmul rate, as the median and (min–max) over the runs; useful FLOPs: "
        "the shared system prefix once, each prompt's own tokens once, one lm_head row per "
        "logits position the answer rule reads (the same count for every one-token row). "
        "Matmuls count 2 FLOPs per weight, attention causally. " + _prefix_check_text(d),
        "",
        f"Goal ≥ {pct(fb)} of the bound: *meets* only when the median run does; "
        "*inconclusive (probe moved X%)* when the probes beside the runs moved more than the "
        "median's margin from the goal, so that the machine, not the code, could decide it.",
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
            mark = (f"≥ {pct(fb)} of bound: {verdict(bound_verdict(_row_probes(d, r), fb))}; "
                    f"speed-up ≥ {fmt(sp)}×: {goal(r['speedup_vs_plain'] >= sp)}")  # fmt: skip
        fractions = r.get("fraction_of_useful_bound_runs") or [r["fraction_of_useful_bound"]]
        util = r.get("hardware_utilisation_runs") or [r["hardware_utilisation"]]
        rows.append([r["method"], r["rule"], fmt(len(r["seconds"])), fmt(r["prompts_per_s"]),
                     fmt(r["executed_gflop_per_prompt"]), spread(util),
                     fmt(r["useful_gflop_per_prompt"]), spread(fractions),
                     fmt(r["speedup_vs_plain"]), mark])  # fmt: skip
    over = [
        r["method"]
        for r in d["rows"]
        if max(r.get("hardware_utilisation_runs") or [r.get("hardware_utilisation") or 0]) > 1
    ]
    if over:
        out += [
            f"Above 100% hardware utilisation ({'; '.join(over)}): these kernels ran faster "
            "than the probe's float32 matmul (torch, the shape above), so the probe is a "
            "reference rate measured beside the runs, not the machine's peak.",
            "",
        ]
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
            if "block_projection" in r:
                out += [_projection_text(r["block_projection"]), ""]
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


def _projection_text(p: dict[str, Any]) -> str:
    """The block prefix cache projected on the same token ids, checked at the run's block."""
    run = p["blocks"].get(str(p["run_block"]))
    check = (
        f"At the run's block size ({p['run_block']}) the projection caches "
        f"{run['cached_tokens']:,} tokens, against {p['measured_cached_tokens']:,} measured"
        + (" (equal)" if run["cached_tokens"] == p["measured_cached_tokens"] else "")
        + ". "
        if run
        else ""
    )
    others = "; ".join(
        f"block {b}: {v['cached_tokens']:,} cached tokens, {fmt(v['executed_gflop_per_prompt'])} "
        f"GFLOP/prompt executed, {v['executed_over_useful']:.2f}× the useful FLOPs"
        for b, v in p["blocks"].items()
    )
    return (
        "Executed over useful FLOPs depends on vLLM's cache block: it caches whole blocks "
        "of a shared prefix and recomputes the rest. Projected on the same token ids "
        "(one request per prompt, sent one after another; `_flops.block_cache_hits`; a "
        f"projection, not a measurement): {others}. {check}The CPU build's attention kernel "
        "takes blocks of multiples of 32 tokens; 16 is vLLM's default on GPUs."
    )


def _vllm_n10_seconds(sampling: dict[str, Any]) -> tuple[float, float] | None:
    """Exact through vLLM and vLLM ``n=10`` sampling (s, all prompts) from ``sampling.json``."""
    try:
        exact = sampling["vllm"]["exact_s"]
        runs = sampling["samplers"]["vllm_n"]["runs"]
        (n10,) = [r["total_s"] for r in runs if r["n"] == 10 and not r.get("extrapolated")]
    except (KeyError, TypeError, ValueError):
        return None
    return exact, n10


def readme_vllm(d: dict[str, Any] | None) -> str:
    """The top-level README's sentence on the in-process vLLM backend's speed."""
    if d is None:
        return (
            "Its speed against raw vLLM: not recorded yet (`python benchmarks/bench_collect.py`)."
        )
    rows = {r["method"]: r for r in d["rows"] if "prompts_per_s" in r}
    ours = next((r for m, r in rows.items() if m.endswith("backend='vllm'")), None)
    raw = next((r for m, r in rows.items() if "raw:" in m), None)
    if ours is None or raw is None:
        return ("Its speed against raw vLLM: not measured in `benchmarks/results/collect.json` "
                "(the vLLM rows did not run).")  # fmt: skip
    out = (
        f"Measured on the CPU build ({d['model']}, {ours['prompts']} demo prompts, "
        f"`benchmarks/results/collect.json`, {str(d.get('timestamp', ''))[:10]}): "
        f"{pct(ours['prompts_per_s'] / raw['prompts_per_s'])} of the prompts/s of raw vLLM "
        "(`generate` with `max_tokens=1, logprobs=20`, one request per prompt, in the same run)"
    )
    path = RESULTS / "sampling.json"
    both = _vllm_n10_seconds(json.loads(path.read_text())) if path.exists() else None
    if both is not None:
        exact, n10 = both
        out += (f"; and {fmt(n10 / exact)}× faster than sampling N = 10 answers per item with "
                f"vLLM `n=10` (`sampling.json`: {fmt(exact)} s against {fmt(n10)} s)")  # fmt: skip
    return out + "."


#: The top-level README's blocks this script's JSON fills: name to (JSON file, sentence).
README_BLOCKS = {"vllm-speed": ("collect.json", readme_vllm)}


if __name__ == "__main__":
    raise SystemExit(main())
