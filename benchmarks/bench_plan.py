"""``xlikert plan``'s projected time against the measured time of the run, on this machine.

Usage::

    python benchmarks/bench_plan.py            # demo, 4 targets x 17 items, 3 rounds, probe 17
    python benchmarks/bench_plan.py --quick    # 2 targets x 17 items, 1 round

The built-in ``demo`` experiment's prompts read by SmolLM2-135M-Instruct (the offline
zoo, transformers on the CPU), in rounds, each a plan then a run close in time (the
machine's load as alike as it can be for both):

* ``plan``: :func:`~xlikert.collect.cost_plan` with ``probe`` prompts (the model loaded,
  a warm-up, then ``probe`` prompts spread over the study timed as the run scores a
  unit): its ``seconds`` = ``tokens_max`` at the probe's throughput;
* ``run``: the same study collected; its *measured* time is what the projection models,
  the scoring seconds the run's closing summary reports (every unit's, the model's
  load and the file's writing not included), and, apart, the run's whole wall time.

The accuracy is ``|projected - measured| / measured`` per round (the goal: at most 0.3);
the plan's passes and prompt tokens are compared with the run's too. The load average
is recorded before and after each step: on a shared machine the timings carry the
other processes' noise. Writes ``results/plan.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from _common import QUICK_MODEL, load_average, machine, result_path, write_json
from _render import fmt, table

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

TITLE = "The projected time of `xlikert plan` against the run"

KW = {"top_k": 5, "chunk_size": 17}


def study(quick: bool):
    """The demo's prompts (all 4 targets, or 2 with ``quick``) and SmolLM2's entry."""
    from xlikert.design import load_experiment

    exp = load_experiment("demo")
    prompts = exp.build_prompts()
    if quick:
        prompts = prompts.isel(target=[0, 1])
    return prompts, [{"name": "SmolLM2-135M-Instruct", "source": QUICK_MODEL}]


def plan_step(prompts, models, probe: int) -> dict[str, Any]:
    from xlikert.collect import cost_plan

    before = load_average()
    t0 = time.perf_counter()
    df = cost_plan(prompts, models, probe=probe, **KW)
    row = df.iloc[0]
    return {"wall_s": round(time.perf_counter() - t0, 3), "load_before": before,
            "load_after": load_average(), "seconds": float(row["seconds"]),
            "tokens_per_second": float(row["tokens_per_second"]),
            **{k: int(row[k]) for k in ("to_compute", "passes", "prompt_tokens", "tokens_max")}}  # fmt: skip


def run_step(prompts, models) -> dict[str, Any]:
    """The study collected in memory; the closing summary's counts and seconds."""
    from xlikert.collect.options import CollectOptions
    from xlikert.collect.run.checked import check_run
    from xlikert.collect.run.runner import Plan, run_keys
    from xlikert.collect.run.session import Session

    before = load_average()
    t0 = time.perf_counter()
    run = check_run(prompts, models, None, options=CollectOptions(), overrides=KW, shard=None,
                    reuse=())  # fmt: skip
    plan = Plan(run)
    session = Session(run, plan, run_keys(run, plan), progress=False)
    session.run(None, [])
    row = session.cost.table().iloc[0]
    return {"wall_s": round(time.perf_counter() - t0, 3), "load_before": before,
            "load_after": load_average(), "seconds": float(row["spent_seconds"]),
            "cells": int(row["spent_cells"]), "passes": int(row["spent_passes"]),
            "prompt_tokens": int(row["spent_prompt_tokens"])}  # fmt: skip


def measure(quick: bool, rounds: int, probe: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # one replica's thread, in the probe and the run alike
    prompts, models = study(quick)
    out = []
    for k in range(rounds):
        p = plan_step(prompts, models, probe)
        r = run_step(prompts, models)
        err = abs(p["seconds"] - r["seconds"]) / r["seconds"]
        out.append({"round": k, "plan": p, "run": r, "rel_error": round(err, 4),
                    "rel_error_wall": round(abs(p["seconds"] - r["wall_s"]) / r["wall_s"], 4),
                    "counts_equal": all(p[c] == r[c] for c in ("passes", "prompt_tokens"))
                    and p["to_compute"] == r["cells"]})  # fmt: skip
    errors = [x["rel_error"] for x in out]
    return {"model": models[0]["source"], "experiment": "demo", "cells": int(prompts.user.size),
            "probe_prompts": probe, "threads": 1, "rounds": out,
            "rel_error_max": max(errors), "rel_error_median": sorted(errors)[len(errors) // 2],
            "within_30pct": all(e <= 0.3 for e in errors),
            "counts_equal": all(x["counts_equal"] for x in out),
            "machine": machine(["torch", "transformers"])}  # fmt: skip


def render(d: dict[str, Any]) -> list[str]:
    """The table of the benchmarks page from the JSON ``d``."""
    rows = [[str(x["round"]), fmt(x["plan"]["tokens_per_second"]), fmt(x["plan"]["seconds"]),
             fmt(x["run"]["seconds"]), fmt(x["run"]["wall_s"]), fmt(100 * x["rel_error"]),
             "yes" if x["counts_equal"] else "no",
             f"{fmt(x['plan']['load_before'][0])} / {fmt(x['run']['load_after'][0])}"]
            for x in d["rounds"]]  # fmt: skip
    lines = table(["round", "probe tokens/s", "projected s", "measured s (scoring)",
                   "run wall s", "error %", "passes, tokens equal", "load avg before / after"],
                  rows)  # fmt: skip
    lines += [
        "",
        f"{d['model']} on the demo's {d['cells']} prompts (one torch thread), the plan's probe "
        f"over {d['probe_prompts']} prompts spread over the study: the projected scoring time "
        f"is within {fmt(100 * d['rel_error_max'])}% of the measured (median "
        f"{fmt(100 * d['rel_error_median'])}%; the goal: 30%). The run's wall time adds the "
        "model's load, the keys and the file. Shared machine: see the load averages.",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--probe", type=int, default=17)  # one unit (chunk_size)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    d = measure(args.quick, args.rounds or (1 if args.quick else 3), args.probe)
    print("\n".join(render(d)))
    write_json(result_path("plan", args.quick, args.out), d)


if __name__ == "__main__":
    main()
