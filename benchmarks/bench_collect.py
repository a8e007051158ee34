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
  ``logits_to_keep``, the float64 numpy rules of ``xlikert.kernels.readout`` (log-softmax,
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
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    MODEL,
    RESULTS,
    ProbedRuns,
    format_table,
    goal_verdict,
    load_average,
    load_record,
    machine,
    probe_moved,
    result_path,
    run_fractions,
    timed,
    write_json,
)
from _flops import (
    FlopCounter,
    block_cache_flops,
    block_cache_hits,
    full_pass_flops,
    matmul_probe,
    matmul_rate,
    request_flops,
    useful_flops,
)
from _prompts import by_system, demo_prompts, prompt_pairs, target_major
from _render import fmt, goal, pct, spread, stamp, table, verdict
from _vllm import not_measured, run_child

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
    why = not_measured(data)
    if why:
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


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="1 target (17 prompts), 1 repeat")
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch-size", default="auto", help="xlikert batch size (default auto)")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per row (3; quick 1)")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM row")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.batch_size = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    return args


def load(args):
    """The model with the one-token rule (its load timed) and the same model with the
    split-space rule."""
    from xlikert.collect.answers.spellings import answer_rule
    from xlikert.collect.backends.transformers import load_model

    lm, load_s = timed(
        lambda: load_model(args.model, range(1, 8), device=args.device, split_space=False)
    )
    valid, answers, _ = answer_rule(lm.tokenizer, range(1, 8), split_space=True)
    return lm, dataclasses.replace(lm, valid=valid, answers=answers), load_s


def plain_loop(lm, pairs: list[tuple[str, str]], limit: int | None = None) -> list[np.ndarray]:
    """The loop a researcher would write: one prompt per forward pass, full logits at every
    position, softmax of the last row, the digit tokens gathered (the one-token rule)."""
    import torch

    model, tok, dev, digit_ids = lm.model, lm.tokenizer, str(lm.device), list(lm.valid.ids)
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


def xlikert(args, loaded, prompts, split: bool = False):
    """xlikert's ``collect`` on the loaded model (``split``: the split-space rule)."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel

    return collect(
        prompts, [{"name": "m", "source": args.model}], progress=False, split_space=split,
        batch_size=args.batch_size, loader=lambda spec, opts, probe: LocalModel(loaded, opts),
    )  # fmt: skip


def time_runs(args, lm, lm_split, prompts, pairs) -> dict[str, Any]:
    """Warm-up, then the plain loop's and both rules' timed runs, each between matmul probes,
    their executed FLOPs counted; where the prefix-cache check ran."""
    import torch

    one = prompts.isel(target=[0], item=[0])
    plain_loop(lm, pairs, 1)
    xlikert(args, lm, one)
    xlikert(args, lm_split, one, split=True)
    # the warm-up made the prefix-cache check (once per loaded model): outside the timed runs
    warm_up = sorted(lm.cache_checked)
    cfg, dev = lm.model.config, str(lm.device)
    shape = (256, cfg.hidden_size, cfg.intermediate_size)
    gemm = matmul_rate(dev, torch.float32, *shape, seconds=PROBE_SECONDS)
    runs = ProbedRuns(matmul_probe(dev, torch.float32, *shape, seconds=PROBE_SECONDS))
    counter = FlopCounter(lm.model)
    timings = {}
    with counter:
        for key, fn in (("plain", lambda: plain_loop(lm, pairs)),
                        ("one_token", lambda: xlikert(args, lm, prompts)),
                        ("split", lambda: xlikert(args, lm_split, prompts, split=True))):  # fmt: skip
            timings[key] = runs.run(fn, args.repeat, counter.reset)
            timings[key]["executed_flops"] = counter.flops
    checked = {"warm_up": warm_up, "timed_runs": sorted(lm.cache_checked - set(warm_up))}
    return {**timings, "runs": runs, "gemm": gemm, "prefix_cache_check": checked}


def _row(method, rule_name, t, useful, executed, n) -> dict[str, Any]:
    """A transformers row from its ProbedRuns timing ``t``; FLOPs of one run (``useful``
    per prompt)."""
    return {
        "method": method, "rule": rule_name, "prompts": n, "seconds": t["seconds"],
        "median_s": t["median_s"], "prompts_per_s": n / t["median_s"],
        "executed_gflop_per_prompt": executed / n / 1e9,
        "useful_gflop_per_prompt": useful / 1e9,
        **_fractions(t["seconds"], t["probe_before"], t["probe_after"], executed, useful * n),
        "probe_before": t["probe_before"], "probe_after": t["probe_after"], "probe": "parent",
    }  # fmt: skip


def transformers_rows(timed_runs: dict[str, Any], useful: dict[str, float], n: int) -> list:
    """The plain loop's and xlikert's rows (both rules), with their speed-up."""
    plain, one_tok, split = (timed_runs[k] for k in ("plain", "one_token", "split"))
    batch = one_tok["result"].likert.attrs["models"]["m"].get("batch_size")
    rows = [
        _row("plain loop (1 prompt/forward, full logits)", "one token", plain, useful["one"],
             plain["executed_flops"], n),
        _row(f"xlikert `collect` (batch {batch})", "one token", one_tok, useful["one"],
             one_tok["executed_flops"], n),
        _row(f"xlikert `collect` (batch {batch})", "split space (default)", split,
             useful["split"], split["executed_flops"], n),
    ]  # fmt: skip
    for r in rows:
        r["speedup_vs_plain"] = plain["median_s"] / r["median_s"]
    return rows


def engine_rows(args, cfg, useful_one, runs, encoded, xl_vm, plain_s) -> list[dict[str, Any]]:
    """The vLLM rows (:func:`vllm_rows`), with their speed-up, agreement with the
    transformers backend and, for raw vLLM, the block prefix cache projected."""
    rows = []
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
    return rows


def record(args, lm, load_s, n, timings, rows, encoded, load_before) -> dict[str, Any]:
    """The JSON record of the run."""
    ds, ds_split = timings["one_token"]["result"], timings["split"]["result"]
    plain_vm = np.array([o.sum() for o in timings["plain"]["result"]])
    xl_vm = target_major(ds.valid_mass)
    split_added = (ds_split.valid_mass - ds.valid_mass).values.ravel()
    probes = timings["runs"].probes
    cfg = lm.model.config
    return {
        "benchmark": "collect",
        "quick": args.quick,
        "model": args.model,
        "prompts": n,
        "repeat": args.repeat,
        "device": str(lm.device),
        "dtype": str(next(lm.model.parameters()).dtype).replace("torch.", ""),
        "load_seconds": round(load_s, 2),
        "matmul": {
            "before": timings["gemm"],
            "probe_seconds": PROBE_SECONDS,
            "probes_gflops": [x / 1e9 for x in probes],
            "gflops": statistics.median(probes) / 1e9,
        },
        "matmul_gflops": statistics.median(probes) / 1e9,
        "prefix_cache_check": timings["prefix_cache_check"],
        "rows": rows,
        "plain_loop_full_pass_gflop_per_prompt": full_pass_flops(cfg, encoded) / n / 1e9,
        "max_abs_valid_mass_diff_plain_vs_xlikert": float(np.max(np.abs(plain_vm - xl_vm))),
        "split_space_valid_mass_added_mean": float(split_added.mean()),
        "split_space_valid_mass_added_max": float(split_added.max()),
        "goals": GOALS,
        **load_record(load_before),
        "machine": machine(["torch", "transformers"]),
    }


def print_summary(res: dict[str, Any], probes: list[float]) -> None:
    table = []
    for r in res["rows"]:
        if "prompts_per_s" not in r:
            table.append([r["method"], r["rule"], r.get("not_run") or r.get("error", "")[:60]]
                         + ["-"] * 6)  # fmt: skip
            continue
        table.append([r["method"], r["rule"], r["prompts_per_s"], r["executed_gflop_per_prompt"],
                      f"{r['hardware_utilisation']:.1%}", r["useful_gflop_per_prompt"],
                      spread(r["fraction_of_useful_bound_runs"]), r["speedup_vs_plain"],
                      bound_verdict(r, GOALS["fraction_of_useful_bound"])
                      if r["method"].startswith("xlikert") else ""])  # fmt: skip
    print(f"\n{res['model']} on {res['device']}, {res['prompts']} prompts, float32 matmul probes "
          f"beside the runs {min(probes) / 1e9:.1f}-{max(probes) / 1e9:.1f} GFLOP/s; median "
          f"(min-max) of {res['repeat']} run(s)")  # fmt: skip
    print(format_table(table, ["method", "rule", "prompts/s", "executed GFLOP/prompt",
                               "hardware util.", "useful GFLOP/prompt", "of useful bound",
                               "speed-up", f">= {GOALS['fraction_of_useful_bound']:.0%} of bound"],
                       "llrrrrrrl"))  # fmt: skip
    print(
        f"max |valid mass plain - xlikert| = {res['max_abs_valid_mass_diff_plain_vs_xlikert']:.2e}"
    )


def main() -> int:
    args = parse_args()
    load_before = load_average()
    prompts = demo_prompts(1 if args.quick else None)
    n = int(prompts.user.size)
    lm, lm_split, load_s = load(args)
    pairs = prompt_pairs(prompts)
    timings = time_runs(args, lm, lm_split, prompts, pairs)
    # ---- FLOPs: each prompt's token ids as collect rendered them, grouped by system prompt
    ds = timings["one_token"]["result"]
    texts = target_major(ds.prompt_text)
    encoded = [lm.encode(str(t)) for t in texts]
    cfg, groups = lm.model.config, by_system(pairs, encoded)
    useful = {"one": useful_flops(cfg, groups) / n,
              "split": useful_flops(cfg, groups, extra_tokens=1, rows=2) / n}  # fmt: skip
    rows = transformers_rows(timings, useful, n)
    if not args.no_vllm:
        xl_vm = target_major(ds.valid_mass)
        plain_s = timings["plain"]["median_s"]
        rows += engine_rows(args, cfg, useful["one"], timings["runs"], encoded, xl_vm, plain_s)
    res = record(args, lm, load_s, n, timings, rows, encoded, load_before)
    print_summary(res, timings["runs"].probes)
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


def _intro(d: dict[str, Any]) -> list[str]:
    """What was measured and how: the probes, the FLOP counts, the goal."""
    la, lb = d.get("load_average_before"), d.get("load_average_after")
    fb = d.get("goals", {}).get("fraction_of_useful_bound", 0.7)
    return [
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


def _table(d: dict[str, Any]) -> list[str]:
    """One row per method, its goals marked; a note on rows above 100% utilisation first."""
    g = d.get("goals", {})
    fb, sp = g.get("fraction_of_useful_bound", 0.7), g.get("speedup", 3.0)
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
    out: list[str] = []
    if over:
        out = [
            f"Above 100% hardware utilisation ({'; '.join(over)}): these kernels ran faster "
            "than the probe's float32 matmul (torch, the shape above), so the probe is a "
            "reference rate measured beside the runs, not the machine's peak.",
            "",
        ]
    out += table(["method", "answer rule", "runs", "prompts/s", "executed GFLOP/prompt",
                  "hardware utilisation", "useful GFLOP/prompt", "fraction of useful-FLOP bound",
                  "speed-up vs plain loop", "goal"], rows)  # fmt: skip
    return out


def _notes(d: dict[str, Any]) -> list[str]:
    """Every timed run, the answer rules' agreement and the vLLM rows' engines."""
    out = [
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
    return out


def _memory_note() -> list[str]:
    """The demo's peak memory, cited from ``results/memory.json``."""
    out: list[str] = []
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


def render(d: dict[str, Any]) -> list[str]:
    return [*_intro(d), *_table(d), *_notes(d), *_memory_note()]


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
