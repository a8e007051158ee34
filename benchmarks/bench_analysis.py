"""Speed and memory of the analysis layer: numba kernels vs their numpy twins.

Designs
-------
paper    5 models x 4 targets, 17 items, 1..7 (goal: < 50 ms warm)
framing  3 x 4 x 6, 17 items, 1..7              (goal: < 200 ms warm)
large    4 factors x 10 levels, 50 items, 1..7, every order up to 4-way
         (goal: < 60 s and < 4 GB peak on 2 cores)

For each design the pipeline (composite + decompose with all effects and
summaries + summary_table) runs warm with ``kernels="numba"`` and
``kernels="numpy"`` side by side in one process; ``xl.consensus(tol=1e-4)`` is
timed too where it is implemented. The large design runs in subprocesses so
that each engine's peak memory is its own (:func:`peak_rss_mb`: the process's own
high-water mark, not ``ru_maxrss``, which a child starts at its parent's peak); it
also runs on a
copy chunked along ``f0`` with Dask threads and with a ``dask.distributed``
``LocalCluster(processes=True, n_workers=2, threads_per_worker=1)`` (peak RSS
of the client and of each worker), for eager vs Dask.

Scaling: the same pipeline on 4 factors x L levels (17 items) for several L,
numba vs numpy, and a log-log least-squares fit of time against the number of
conditions L^4: the growth exponent (1 = linear in the design size).

Usage::

    python benchmarks/bench_analysis.py            # full, a few minutes
    python benchmarks/bench_analysis.py --quick    # < 1 minute, smaller designs

Writes ``benchmarks/results/analysis.json`` (``analysis-quick.json`` in quick mode).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    json_line_child,
    loglog_fit,
    machine,
    print_table,
    result_path,
    timeit,
    write_json,
)
from _render import fmt, goal, ms, table

DESIGNS: dict[str, dict[str, Any]] = {
    "paper": {"factors": None, "n_items": 17, "goal_s": 0.050},
    "framing": {
        "factors": {"model": 3, "target": 4, "framing": 6},
        "n_items": 17,
        "goal_s": 0.200,
    },
}
LARGE = {"factors": {f"f{i}": 10 for i in range(4)}, "n_items": 50, "goal_s": 60.0, "goal_gb": 4.0}
LARGE_QUICK = {
    "factors": {f"f{i}": 5 for i in range(4)},
    "n_items": 20,
    "goal_s": 60.0,
    "goal_gb": 4.0,
}
#: Levels per factor (4 factors, 17 items) for the growth-exponent fit.
SCALING_LEVELS = (2, 3, 4, 5, 6, 8)
SCALING_LEVELS_QUICK = (2, 3, 4, 5)
SCALING_ITEMS = 17
#: Chunks along f0 for the Dask runs of the large design.
DASK_CHUNK_F0 = 5


def _pipeline(pmf, engine: str):
    import xlikert as xl

    s = xl.composite(pmf, kernels=engine)
    dec = xl.decompose(s, kernels=engine, progress=False)
    return xl.summary_table(dec)


def _peak_tracemalloc(fn) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def bench_small(name: str, spec: dict[str, Any], repeat: int) -> dict[str, Any]:
    import xlikert as xl

    pmf = xl.datasets.synthetic_pmf(spec["factors"], n_items=spec["n_items"], seed=1)
    row: dict[str, Any] = {
        "design": name,
        "sizes": {k: int(v) for k, v in pmf.sizes.items()},
        "goal_s": spec["goal_s"],
    }
    for engine in ("numba", "numpy"):
        row[engine] = timeit(lambda e=engine: _pipeline(pmf, e), repeat)
        row[engine]["peak_mb_tracemalloc"] = _peak_tracemalloc(lambda e=engine: _pipeline(pmf, e))
    row["ratio_numpy_over_numba"] = row["numpy"]["median_s"] / row["numba"]["median_s"]
    row["ratio_xlikert_over_numpy"] = 1.0 / row["ratio_numpy_over_numba"]
    try:
        cons = timeit(lambda: xl.consensus(pmf, tol=1e-4), repeat)
        n_cond = int(np.prod([pmf.sizes[d] for d in pmf.dims[:-2]]))
        cons["per_condition_ms"] = 1e3 * cons["median_s"] / n_cond
        row["consensus_tol_1e-4"] = cons
        row["total_with_consensus_s"] = row["numba"]["median_s"] + cons["median_s"]
    except NotImplementedError as err:
        row["consensus_tol_1e-4"] = {"skipped": f"NotImplementedError: {err}"}
        row["total_with_consensus_s"] = None
    return row


def bench_scaling(levels: tuple[int, ...], repeat: int) -> dict[str, Any]:
    """Pipeline time and peak memory vs number of conditions; log-log growth exponent."""
    import xlikert as xl

    rows = []
    for n_lev in levels:
        pmf = xl.datasets.synthetic_pmf(
            {f"f{i}": n_lev for i in range(4)}, n_items=SCALING_ITEMS, seed=3
        )
        row: dict[str, Any] = {"levels": n_lev, "conditions": n_lev**4, "items": SCALING_ITEMS}
        for engine in ("numba", "numpy"):
            reps = repeat if n_lev**4 <= 1300 else 1
            t = timeit(lambda e=engine, pmf=pmf: _pipeline(pmf, e), reps, warm=n_lev == levels[0])
            row[f"{engine}_s"] = t["median_s"]
            row[f"{engine}_peak_mb"] = _peak_tracemalloc(
                lambda e=engine, pmf=pmf: _pipeline(pmf, e)
            )
        row["ratio_numpy_over_numba"] = row["numpy_s"] / row["numba_s"]
        row["ratio_xlikert_over_numpy"] = row["numba_s"] / row["numpy_s"]
        rows.append(row)
    fits: dict[str, Any] = {}
    for engine in ("numba", "numpy"):
        x = [r["conditions"] for r in rows]
        fits[engine] = {
            "time_all_sizes": loglog_fit(x, [r[f"{engine}_s"] for r in rows]),
            "time_largest_half": loglog_fit(
                x[len(x) // 2 :], [r[f"{engine}_s"] for r in rows][len(x) // 2 :]
            ),
            "peak_memory_all_sizes": loglog_fit(x, [r[f"{engine}_peak_mb"] for r in rows]),
        }
    return {
        "design": f"4 factors x L levels, {SCALING_ITEMS} items, 1..7, every order",
        "timing": "median of repeats (1 repeat above 1300 conditions), warm",
        "memory": "peak of tracemalloc (numpy buffers included)",
        "rows": rows,
        "fit": fits,
    }


def _warm_worker() -> float:
    """Load the numba kernels (from the on-disk cache) in a worker process; its peak (MB)."""
    import xlikert as xl

    xl.decompose(xl.datasets.synthetic_pmf({f"f{i}": 2 for i in range(4)}, n_items=2))
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """This process's own peak resident set size so far (MB).

    On Linux the high-water mark of its memory (``VmHWM`` of ``/proc/self/status``),
    which starts afresh with the process's program. Not ``ru_maxrss``: usage is kept
    across ``execve`` (getrusage(2)), so a child started by a process that held 1 GB
    reads at least 1 GB there whatever it uses. Elsewhere ``ru_maxrss`` (kB; bytes on
    macOS), with that caveat.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def _probe_gufunc_pickling(client) -> str:
    """Call one of xlikert's kernels on a worker process, as dask ships it.

    A numba gufunc pickled by value crashes in a fresh process (numba/numba#4314);
    ``xlikert.kernels.get_kernel`` returns a handle that pickles by name instead.
    """
    from xlikert import kernels

    kernel = kernels.get_kernel("convolve_items", "numba")
    client.submit(kernel, np.full((2, 3), 1 / 3), np.zeros(5), pure=False).result()
    return "native: xlikert kernels run on process workers as shipped (by-name handles)"


def _timed_pipeline(pmf, engine: str, lazy: bool = False) -> dict[str, Any]:
    """The pipeline once (``lazy``: ``decompose`` computed from Dask), timed in two parts."""
    import xlikert as xl

    t0 = time.perf_counter()
    s = xl.composite(pmf, kernels=engine)
    t1 = time.perf_counter()
    dec = xl.decompose(s, kernels=engine, progress=False)
    if lazy:
        dec = dec.compute()
    tab = xl.summary_table(dec)
    t2 = time.perf_counter()
    return {"n_terms": len(dec.children) - 1, "n_rows": len(tab), "composite_s": t1 - t0,
            "total_s": t2 - t0}  # fmt: skip


def _run_dask(pmf, args, extra: dict[str, Any]) -> dict[str, Any]:
    """The pipeline on a copy chunked along ``f0``, with Dask threads."""
    import dask

    extra["scheduler"] = f"threads, {args.workers} workers"
    with dask.config.set(scheduler="threads", num_workers=args.workers):
        return _timed_pipeline(pmf, args.engine, lazy=True)


def _run_distributed(pmf, args, extra: dict[str, Any]) -> dict[str, Any]:
    """The pipeline on a copy chunked along ``f0``, on a process ``LocalCluster``; the
    cluster's start is not timed, each worker's peak RSS is recorded."""
    import dask
    from dask.distributed import Client, LocalCluster

    extra["scheduler"] = (
        f"dask.distributed LocalCluster(processes=True, n_workers={args.workers}, "
        "threads_per_worker=1)"
    )
    tc = time.perf_counter()
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=50,
        ) as cluster,
        Client(cluster) as client,
    ):
        extra["gufunc_pickling"] = _probe_gufunc_pickling(client)
        client.wait_for_workers(args.workers, timeout=60)
        client.run(_warm_worker)
        extra["cluster_start_s"] = time.perf_counter() - tc
        timing = _timed_pipeline(pmf, args.engine, lazy=True)
        workers = client.run(peak_rss_mb)
    extra["worker_peak_rss_mb"] = sorted(workers.values())
    return timing


def _child(args: argparse.Namespace) -> None:
    """Run one large-design job in this (fresh) process and print a JSON line."""
    import xlikert as xl

    spec = LARGE_QUICK if args.quick else LARGE
    pmf = xl.datasets.synthetic_pmf(spec["factors"], n_items=spec["n_items"], seed=2)
    _warm_worker()  # warm the kernels (cache load)
    base = peak_rss_mb()
    extra: dict[str, Any] = {}
    if args.mode == "eager":
        timing = _timed_pipeline(pmf, args.engine)
    else:
        chunk = max(1, pmf.sizes["f0"] // DASK_CHUNK_F0)
        extra["chunks"] = {"f0": chunk}
        run = _run_dask if args.mode == "dask" else _run_distributed
        timing = run(pmf.chunk({"f0": chunk}), args, extra)
    peak = peak_rss_mb()
    row = {
        "engine": args.engine,
        "mode": args.mode,
        "sizes": {k: int(v) for k, v in pmf.sizes.items()},
        **timing,
        "peak_rss_mb": peak,
        "baseline_rss_mb": base,
        **extra,
    }
    if "worker_peak_rss_mb" in row:
        row["total_peak_rss_mb"] = peak + sum(row["worker_peak_rss_mb"])
    print(json.dumps(row))


def bench_large(quick: bool, engines: list[str], workers: int) -> list[dict[str, Any]]:
    rows = []
    jobs = [(e, "eager") for e in engines] + [("numba", "dask"), ("numba", "distributed")]
    for engine, mode in jobs:
        cmd = [sys.executable, __file__, "--child", "--engine", engine, "--mode", mode]
        cmd += ["--workers", str(workers)] + (["--quick"] if quick else [])
        row, res = json_line_child(cmd)
        rows.append(row or {"engine": engine, "mode": mode, "error": res.stderr[-2000:]})
    return rows


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="smaller designs, fewer repeats (< 1 min)")
    p.add_argument("--repeat", type=int, default=None, help="timed repeats per small design")
    p.add_argument("--workers", type=int, default=2, help="Dask threads / worker processes")
    p.add_argument(
        "--no-numpy-large", action="store_true", help="skip the numpy twin on the large design"
    )
    p.add_argument("--no-scaling", action="store_true", help="skip the growth-exponent series")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine", default="numba", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="eager", help=argparse.SUPPRESS)
    return p.parse_args()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The small designs, the growth series and the large design's jobs: the record."""
    repeat = args.repeat or (5 if args.quick else 20)
    result: dict[str, Any] = {
        "benchmark": "analysis: composite + decompose (every order) + summary_table",
        "machine": machine(),
        "quick": args.quick,
        "baseline": "plain-numpy twin (kernels='numpy'), same process",
        "small": [],
        "large": [],
    }
    for name, spec in DESIGNS.items():
        result["small"].append(bench_small(name, spec, repeat))
    if not args.no_scaling:
        levels = SCALING_LEVELS_QUICK if args.quick else SCALING_LEVELS
        result["scaling"] = bench_scaling(levels, 2 if args.quick else 3)
    engines = ["numba"] if args.no_numpy_large else ["numba", "numpy"]
    result["large"] = bench_large(args.quick, engines, args.workers)
    spec = LARGE_QUICK if args.quick else LARGE
    result["large_goal"] = {"goal_s": spec["goal_s"], "goal_gb": spec["goal_gb"]}
    return result


def large_ratios(result: dict[str, Any]) -> dict[str, float]:
    """Time ratios of the large design's jobs: numpy/numba eager, Dask and distributed/eager."""
    ok = {r["engine"] + "-" + r["mode"]: r for r in result["large"] if "error" not in r}
    out: dict[str, float] = {}
    if "numba-eager" in ok and "numpy-eager" in ok:
        ratio = ok["numpy-eager"]["total_s"] / ok["numba-eager"]["total_s"]
        out["large_ratio_numpy_over_numba"] = ratio
        out["large_ratio_xlikert_over_numpy"] = 1.0 / ratio
    if "numba-eager" in ok:
        for mode in ("dask", "distributed"):
            if f"numba-{mode}" in ok:
                r = ok[f"numba-{mode}"]["total_s"] / ok["numba-eager"]["total_s"]
                out[f"large_ratio_{mode}_over_eager"] = r
    return out


def print_small(result: dict[str, Any]) -> None:
    print("small designs (warm; median; peak = tracemalloc)")
    rows = []
    for row in result["small"]:
        cons = row["consensus_tol_1e-4"]
        ctext = (
            "skipped"
            if "skipped" in cons
            else f"{1e3 * cons['median_s']:.1f} ms ({cons['per_condition_ms']:.2f} ms/cond)"
        )
        rows.append([row["design"], 1e3 * row["numba"]["median_s"],
                     1e3 * row["numpy"]["median_s"], row["ratio_numpy_over_numba"],
                     1e3 * row["goal_s"], row["numba"]["peak_mb_tracemalloc"], ctext])  # fmt: skip
    print_table(
        rows,
        ["design", "numba ms", "numpy ms", "numpy/numba", "goal ms", "peak MB", "consensus 1e-4"],
        "lrrrrrl",
    )


def print_scaling(sc: dict[str, Any]) -> None:
    print(f"\nscaling: {sc['design']}")
    print_table(
        [[r["conditions"], 1e3 * r["numba_s"], 1e3 * r["numpy_s"], r["ratio_numpy_over_numba"],
          r["numba_peak_mb"], r["numpy_peak_mb"]] for r in sc["rows"]],
        ["conditions", "numba ms", "numpy ms", "numpy/numba", "numba MB", "numpy MB"],
    )  # fmt: skip
    for engine, fit in sc["fit"].items():
        print(
            f"growth exponent ({engine}): time ~ n^{fit['time_all_sizes']['exponent']:.2f} "
            f"(all sizes), n^{fit['time_largest_half']['exponent']:.2f} (largest half); "
            f"peak memory ~ n^{fit['peak_memory_all_sizes']['exponent']:.2f}"
        )


def print_large(result: dict[str, Any], quick: bool) -> None:
    label = "(quick: 4 x 5 levels, 20 items)" if quick else "(4 x 10 levels, 50 items)"
    print(f"\nlarge design {label}, every order")
    rows = []
    for row in result["large"]:
        if "error" in row:
            print(f"{row['engine']} {row['mode']}: ERROR {row['error'][-500:]}")
            continue
        rows.append([row["engine"], row["mode"], row["total_s"], row["composite_s"],
                     row["peak_rss_mb"],
                     ", ".join(f"{w:.0f}" for w in row.get("worker_peak_rss_mb", [])) or "-"])  # fmt: skip
    print_table(
        rows,
        ["engine", "mode", "total s", "composite s", "peak RSS MB", "worker peak MB"],
        "llrrrr",
    )
    if "large_ratio_numpy_over_numba" in result:
        print(f"numpy/numba ratio (large, eager): {result['large_ratio_numpy_over_numba']:.2f}")
    for mode in ("dask", "distributed"):
        if f"large_ratio_{mode}_over_eager" in result:
            r = result[f"large_ratio_{mode}_over_eager"]
            print(f"{mode}/eager time ratio (large, numba): {r:.2f}")


def main() -> None:
    args = parse_args()
    if args.child:
        _child(args)
        return
    t_start = time.perf_counter()
    result = run(args)
    result.update(large_ratios(result))
    print_small(result)
    if "scaling" in result:
        print_scaling(result["scaling"])
    print_large(result, args.quick)
    result["wall_s"] = time.perf_counter() - t_start
    write_json(result_path("analysis", args.quick, args.out), result)


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Analysis scaling"


def _render_small(d: dict[str, Any]) -> list[str]:
    """The small designs' table."""
    out = [
        "Pipeline = `composite` + `decompose` (every order, all summaries) + `summary_table`, "
        "warm, median of repeats; numpy = the plain-numpy twin (`kernels='numpy'`) in the same "
        "process; xlikert/numpy = time ratio (below 1: numba faster). Peak = tracemalloc.",
        "",
    ]
    rows = []
    for r in d["small"]:
        c = r.get("consensus_tol_1e-4", {})
        cons = (
            "–"
            if "skipped" in c
            else f"{ms(c.get('median_s'))} ({fmt(c.get('per_condition_ms'))}/cond.)"
        )
        total = r.get("total_with_consensus_s") or r["numba"]["median_s"]
        rows.append(
            [
                r["design"],
                " × ".join(f"{k} {v}" for k, v in r["sizes"].items() if k != "score"),
                ms(r["numba"]["median_s"]),
                ms(r["numpy"]["median_s"]),
                fmt(r["numba"]["median_s"] / r["numpy"]["median_s"]),
                fmt(r["numba"]["peak_mb_tracemalloc"]),
                cons,
                f"{ms(total)} vs < {ms(r['goal_s'])}: {goal(total < r['goal_s'])}",
            ]
        )  # fmt: skip
    out += table(
        ["design", "sizes", "xlikert ms", "numpy ms", "xlikert/numpy", "peak MB",
         "Consensus tol 1e-4 ms", "total incl. Consensus vs goal (ms)"],
        rows,
    )  # fmt: skip
    return out


def _render_scaling(sc: dict[str, Any]) -> list[str]:
    """The growth series' table and its fitted exponents."""
    out = [f"Growth with the number of conditions ({sc['design']}):", ""]
    out += table(
        ["conditions", "xlikert ms", "numpy ms", "xlikert/numpy", "xlikert peak MB", "numpy peak MB"],
        [[fmt(r["conditions"]), ms(r["numba_s"]), ms(r["numpy_s"]),
          fmt(r["ratio_xlikert_over_numpy"]), fmt(r["numba_peak_mb"]), fmt(r["numpy_peak_mb"])]
         for r in sc["rows"]],
    )  # fmt: skip
    for eng, f in sc["fit"].items():
        label = "xlikert (numba)" if eng == "numba" else "numpy twin"
        out.append(
            f"- {label}: time ∝ n^{f['time_all_sizes']['exponent']:.2f} over all sizes "
            f"(R² {f['time_all_sizes']['r2']:.3f}), n^{f['time_largest_half']['exponent']:.2f} "
            f"over the largest half; peak memory ∝ n^{f['peak_memory_all_sizes']['exponent']:.2f}."
        )
    out.append("")
    return out


def _render_large(large: list[dict[str, Any]], g: dict[str, Any]) -> list[str]:
    """The large design's table: eager, Dask threads and the process cluster."""
    sizes = next((r["sizes"] for r in large if "sizes" in r), {})
    out = [
        "Large design ("
        + " × ".join(f"{k} {v}" for k, v in sizes.items())
        + f", every order; goal < {fmt(g.get('goal_s'))} s and < {fmt(g.get('goal_gb'))} GB), "
        "each run in a fresh process; peak = max RSS (client; plus each worker process "
        "for the LocalCluster):",
        "",
    ]
    rows = []
    base = next((r for r in large if r.get("engine") == "numba" and r.get("mode") == "eager"), None)
    for r in large:
        if "error" in r:
            why = r["error"].strip().splitlines()[-1][:120]
            rows.append([r["engine"], r["mode"], "error", "–", "–", "–", "–", why])
            continue
        workers = r.get("worker_peak_rss_mb")
        peak_total = r.get("total_peak_rss_mb", r["peak_rss_mb"])
        ratio = fmt(r["total_s"] / base["total_s"]) if base and "total_s" in base else "–"
        note = r.get("scheduler", "")
        if r.get("chunks"):
            note += f"; chunks {r['chunks']}"
        if r.get("cluster_start_s") is not None:
            note += f"; cluster start {fmt(r['cluster_start_s'])} s (not counted)"
        rows.append([
            "xlikert (numba)" if r["engine"] == "numba" else "numpy twin", r["mode"],
            fmt(r["total_s"]), ratio, fmt(r["peak_rss_mb"]),
            (", ".join(fmt(w) for w in workers) + f" (with client: {fmt(peak_total)})")
            if workers
            else "–",
            f"{goal(r['total_s'] < g.get('goal_s', 60) and peak_total / 1024 < g.get('goal_gb', 4))}",
            note,
        ])  # fmt: skip
    out += table(
        ["engine", "mode", "time s", "÷ xlikert eager", "peak RSS MB", "worker peak MB", "goal", "notes"],
        rows,
    )  # fmt: skip
    notes = {r.get("gufunc_pickling") for r in large if r.get("gufunc_pickling")}
    for n in notes:
        out.append(f"Distributed run: {n}.")
        out.append("")
    return out


def render(d: dict[str, Any]) -> list[str]:
    out = _render_small(d)
    if d.get("scaling"):
        out += _render_scaling(d["scaling"])
    if d.get("large", []):
        out += _render_large(d["large"], d.get("large_goal", {}))
    return out


if __name__ == "__main__":
    main()
