"""The Ray executor against the in-process run, on a local cluster of two one-CPU nodes.

Usage::

    python benchmarks/bench_cluster.py            # 240 prompts, units of 4
    python benchmarks/bench_cluster.py --quick    # 60 prompts

A CPU-bound random Llama (hidden 512, 6 layers; the test suite's character tokenizer),
one torch thread per process, collected four ways on the same prompts:

* ``in_process``: ``collect()`` in this process (one thread), the model loaded here;
* ``ray_1``: the Ray executor with one replica (one CPU);
* ``ray_2``: two replicas, one per node;
* ``ray_2_kill``: two replicas, one killed (SIGKILL) when the first unit is saved: its
  unit goes back to the queue and a new replica starts in its place.

The cluster's start-up (two ``ray start`` processes until both nodes are alive) is
reported apart, as are, per Ray run, the connection, the time to the first replica
loaded and the units' phase (from handing out the first unit to saving the last). The
executor's overhead is the Ray run's units phase plus its first load against the
in-process run's load plus units; scaling is ``ray_1``'s units phase over ``ray_2``'s;
the driver's saving rate (units per second the driver saves) bounds how many replicas
one driver keeps busy: ``replicas_at_saturation`` = unit time at one replica / save time
per unit. ``overhead_dispatch_1_replica`` is measured within the one-replica run (the
same load throughout): its units phase against the seconds the replica spent scoring
the units (each timed by the replica), i.e. the time the replica waited on the driver. The machine's load average is recorded before and after each run: on a
shared machine the timings carry the other processes' noise. Writes
``results/cluster.json``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import load_average, machine, result_path, write_json
from _render import fmt, table

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

TITLE = "Collection on a Ray cluster"


def cpu_model(path: Path) -> Path:
    """A random Llama large enough that a unit's forward passes take CPU time."""
    import torch
    from support.tiny import build_tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=512, intermediate_size=1536,
                      num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                      max_position_embeddings=1024, tie_word_embeddings=False, pad_token_id=0,
                      bos_token_id=2, eos_token_id=3)  # fmt: skip
    LlamaForCausalLM(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def prompts(n_copies: int):
    """``n_copies`` x 3 targets x 5 items of the tiny prompts, each copy its own prompt."""
    import xarray as xr
    from support.tiny import tiny_prompts

    base = tiny_prompts(3, 5)
    copies = [base.assign(user=base.user + f" ({k})") for k in range(n_copies)]
    return xr.concat(copies, dim="copy").assign_coords(copy=[str(k) for k in range(n_copies)])


def run(kind: str, model: list[dict], p, out: Path, address: str | None) -> dict[str, Any]:
    """One collection; its wall time, the executor's timing, the load average."""
    from xlikert.collect import RayExecutor, collect

    before = load_average()
    kw: dict[str, Any] = {"progress": False, "batch_size": 4, "chunk_size": 4, "top_k": 3}
    ex, killed = None, []
    if kind != "in_process":
        ex = RayExecutor(address, replicas=1 if kind == "ray_1" else 2)
    if kind == "ray_2_kill":

        def kill(done: int, total: int) -> None:
            busy = [r for r in ex.live_replicas() if r.get("busy") and r.get("pid")]
            if not killed and busy:
                killed.append((busy[0]["pid"], time.perf_counter()))
                os.kill(busy[0]["pid"], signal.SIGKILL)

        kw["on_unit"] = kill
    t0 = time.perf_counter()
    collect(p, model, out, executor=ex or "in_process", **kw)
    wall = time.perf_counter() - t0
    row = {"kind": kind, "wall_s": round(wall, 3), "load_before": before,
           "load_after": load_average()}  # fmt: skip
    if ex is not None:
        row["timing"] = dict(ex.timing)
        row["replicas"] = [{k: r[k] for k in ("replica", "units", "ended")}
                           for r in ex.record()["replicas"]]  # fmt: skip
    if killed:
        row["after_kill_s"] = round(time.perf_counter() - killed[0][1], 3)
    return row


def measure(quick: bool) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from support.ray_cluster import LocalCluster

    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    model = [{"name": "cpu", "source": str(cpu_model(tmp / "model"))}]
    p = prompts(4 if quick else 16)
    cells = int(p.user.size)
    t0 = time.perf_counter()
    from xlikert.collect.backends.transformers import open as open_model
    from xlikert.collect.options import CollectOptions

    m = open_model(model[0], CollectOptions(scale=tuple(range(1, 8)), top_k=3))
    load_s = time.perf_counter() - t0
    m.close()
    rows = [run("in_process", model, p, tmp / "in.nc", None)]
    cluster = LocalCluster(nodes=2, cpus=1)
    try:
        for kind in ("ray_1", "ray_2", "ray_2_kill"):
            rows.append(run(kind, model, p, tmp / f"{kind}.nc", cluster.address))
    finally:
        cluster.stop()
    return summary(rows, cells, load_s, cluster.startup_s, chunk=4)


def summary(rows: list[dict], cells: int, load_s: float, startup_s: float,
            chunk: int) -> dict[str, Any]:  # fmt: skip
    by = {r["kind"]: r for r in rows}
    units = -(-cells // chunk)
    r1, r2 = by["ray_1"]["timing"], by["ray_2"]["timing"]
    # the run less its model's load: in process, the load measured apart; on Ray, the
    # connection and the time to the first replica loaded (a process started, torch
    # imported, the model loaded: the cluster's counterpart of the load)
    in_run = by["in_process"]["wall_s"] - load_s
    ray_run = by["ray_1"]["wall_s"] - r1["connect"] - r1["first_load"]
    ray_units_1 = r1["units"] - r1["first_load"]
    save_per_unit = r1["save"] / max(r1["saves"], 1)
    unit_time = ray_units_1 / units
    # within the one-replica run (the same load for both): the units phase against the
    # seconds the replica spent scoring them, as it timed each unit itself
    dispatch = ray_units_1 / r1["scored"] - 1.0 if r1.get("scored") else None
    return {
        "cells": cells, "units": units, "cluster_startup_s": round(startup_s, 3),
        "model_load_s": round(load_s, 3), "runs": rows,
        "overhead_1_replica": round(ray_run / in_run - 1.0, 3),
        "overhead_wall_1_replica": round(by["ray_1"]["wall_s"] / by["in_process"]["wall_s"] - 1, 3),
        "overhead_dispatch_1_replica": None if dispatch is None else round(dispatch, 3),
        "batches_1_replica": r1.get("batches"),
        "scaling_1_to_2": round(ray_units_1 / (r2["units"] - r2["first_load"]), 3),
        "save_s_per_unit": round(save_per_unit, 6),
        "units_per_s_driver_saves": round(1.0 / save_per_unit, 1) if save_per_unit else None,
        "unit_s_one_replica": round(unit_time, 4),
        "replicas_at_saturation": round(unit_time / save_per_unit, 1) if save_per_unit else None,
        "dead_replica_recovery_s": by["ray_2_kill"].get("after_kill_s"),
        "machine": machine(["torch", "transformers", "ray"]),
    }  # fmt: skip


def render(d: dict[str, Any]) -> list[str]:
    """The table of the benchmarks page from the JSON ``d``."""
    rows = [[r["kind"], fmt(r["wall_s"]), fmt((r.get("timing") or {}).get("first_load")),
             fmt((r.get("timing") or {}).get("units")),
             " / ".join(fmt(x) for x in r["load_before"][:1] + r["load_after"][:1])]
            for r in d["runs"]]  # fmt: skip
    lines = table(["run", "wall s", "first replica loaded s", "units done s",
                   "load avg before / after"], rows)  # fmt: skip
    lines += [
        "",
        f"{d['cells']} prompts in {d['units']} units; cluster start-up {fmt(d['cluster_startup_s'])} s "
        f"(apart); overhead at one replica {fmt(100 * d['overhead_1_replica'])}% (the runs less "
        f"the model's load; {fmt(100 * d['overhead_wall_1_replica'])}% of the whole wall time, the "
        f"replica's start and load included; within the run, its units phase against the "
        f"replica's own scoring seconds: {fmt(100 * (d.get('overhead_dispatch_1_replica') or 0))}%, "
        f"{fmt(d.get('batches_1_replica'))} batches for {d['units']} units); "
        f"scaling 1 -> 2 replicas {fmt(d['scaling_1_to_2'])}x; the driver saves "
        f"{fmt(d['units_per_s_driver_saves'])} units/s ({fmt(d['save_s_per_unit'])} s each), "
        f"so about {fmt(d['replicas_at_saturation'])} replicas of this unit time keep it busy; "
        f"a killed replica's run ended {fmt(d['dead_replica_recovery_s'])} s after the kill. "
        "Shared machine: see the load averages.",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    d = measure(args.quick)
    print("\n".join(render(d)))
    write_json(result_path("cluster", args.quick, args.out), d)


if __name__ == "__main__":
    main()
