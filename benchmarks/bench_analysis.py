"""Speed and memory of the analysis layer: numba kernels vs their numpy twins.

Designs
-------
paper    5 models x 4 targets, 17 items, 1..7 (goal: < 50 ms warm)
framing  3 x 4 x 6, 17 items, 1..7              (goal: < 200 ms warm)
large    4 factors x 10 levels, 50 items, 1..7, every order up to 4-way
         (goal: < 60 s and < 4 GB peak on 2 cores)

For each design the pipeline (composite + decompose with all effects and
summaries + summary_table) runs warm with ``engine="numba"`` and
``engine="numpy"`` side by side in one process; ``xl.consensus(tol=1e-4)`` is
timed too where it is implemented. The large design runs in subprocesses so
that each engine's peak memory (``ru_maxrss``) is its own; it also runs on a
Dask-chunked copy (threads scheduler) for eager vs Dask.

Usage::

    python benchmarks/bench_analysis.py            # full, a few minutes
    python benchmarks/bench_analysis.py --quick    # < 1 minute, smaller large design

Writes ``benchmarks/results/analysis.json`` (``analysis-quick.json`` in quick mode).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

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


def _pipeline(pmf, engine: str):
    import xlikert as xl

    s = xl.composite(pmf, engine=engine)
    dec = xl.decompose(s, engine=engine, progress=False)
    return xl.summary_table(dec)


def _timeit(fn, repeat: int) -> dict[str, float]:
    fn()  # warm: numba compile/cache load, imports
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return {"min_s": min(times), "median_s": statistics.median(times), "repeat": repeat}


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
        row[engine] = _timeit(lambda e=engine: _pipeline(pmf, e), repeat)
        row[engine]["peak_mb_tracemalloc"] = _peak_tracemalloc(lambda e=engine: _pipeline(pmf, e))
    row["ratio_numpy_over_numba"] = row["numpy"]["median_s"] / row["numba"]["median_s"]
    try:
        cons = _timeit(lambda: xl.consensus(pmf, tol=1e-4), repeat)
        n_cond = int(np.prod([pmf.sizes[d] for d in pmf.dims[:-2]]))
        cons["per_condition_ms"] = 1e3 * cons["median_s"] / n_cond
        row["consensus_tol_1e-4"] = cons
        row["total_with_consensus_s"] = row["numba"]["median_s"] + cons["median_s"]
    except NotImplementedError as err:
        row["consensus_tol_1e-4"] = {"skipped": f"NotImplementedError: {err}"}
        row["total_with_consensus_s"] = None
    return row


def _child(args: argparse.Namespace) -> None:
    """Run one large-design job in this (fresh) process and print a JSON line."""
    import xlikert as xl

    spec = LARGE_QUICK if args.quick else LARGE
    pmf = xl.datasets.synthetic_pmf(spec["factors"], n_items=spec["n_items"], seed=2)
    small = xl.datasets.synthetic_pmf({f"f{i}": 2 for i in range(4)}, n_items=2)
    xl.decompose(small, engine=args.engine)  # warm the kernels (cache load)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    t0 = time.perf_counter()
    if args.mode == "eager":
        s = xl.composite(pmf, engine=args.engine)
        t1 = time.perf_counter()
        dec = xl.decompose(s, engine=args.engine, progress=False)
        tab = xl.summary_table(dec)
    else:
        import dask

        lazy = pmf.chunk({"f0": max(1, pmf.sizes["f0"] // 5)})
        with dask.config.set(scheduler="threads", num_workers=args.workers):
            s = xl.composite(lazy, engine=args.engine)
            t1 = time.perf_counter()
            dec = xl.decompose(s, engine=args.engine, progress=False).compute()
            tab = xl.summary_table(dec)
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(
        json.dumps(
            {
                "engine": args.engine,
                "mode": args.mode,
                "sizes": {k: int(v) for k, v in pmf.sizes.items()},
                "n_terms": len(dec.children) - 1,
                "n_rows": len(tab),
                "composite_s": t1 - t0,
                "total_s": t2 - t0,
                "peak_rss_mb": peak,
                "baseline_rss_mb": base,
            }
        )
    )


def bench_large(quick: bool, engines: list[str], workers: int) -> list[dict[str, Any]]:
    rows = []
    jobs = [(e, "eager") for e in engines] + [("numba", "dask")]
    for engine, mode in jobs:
        cmd = [sys.executable, __file__, "--child", "--engine", engine, "--mode", mode]
        cmd += ["--workers", str(workers)] + (["--quick"] if quick else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            rows.append({"engine": engine, "mode": mode, "error": out.stderr[-2000:]})
            continue
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def machine() -> dict[str, Any]:
    import dask
    import numba
    import xarray

    import xlikert

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "xarray": xarray.__version__,
        "dask": dask.__version__,
        "xlikert": xlikert.__version__,
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="smaller large design, fewer repeats (< 1 min)"
    )
    p.add_argument("--repeat", type=int, default=None, help="timed repeats per small design")
    p.add_argument("--workers", type=int, default=2, help="Dask threads for the chunked run")
    p.add_argument(
        "--no-numpy-large", action="store_true", help="skip the numpy twin on the large design"
    )
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine", default="numba", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="eager", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args)
        return
    repeat = args.repeat or (5 if args.quick else 20)
    result: dict[str, Any] = {"machine": machine(), "quick": args.quick, "small": [], "large": []}
    for name, spec in DESIGNS.items():
        result["small"].append(bench_small(name, spec, repeat))
    engines = ["numba"] if args.no_numpy_large else ["numba", "numpy"]
    result["large"] = bench_large(args.quick, engines, args.workers)
    spec = LARGE_QUICK if args.quick else LARGE
    result["large_goal"] = {"goal_s": spec["goal_s"], "goal_gb": spec["goal_gb"]}

    print(
        f"{'design':<9} {'numba ms':>10} {'numpy ms':>10} {'ratio':>6} {'goal ms':>8} {'peak MB':>8}  consensus"
    )
    for row in result["small"]:
        cons = row["consensus_tol_1e-4"]
        ctext = (
            "skipped"
            if "skipped" in cons
            else f"{1e3 * cons['median_s']:.1f} ms ({cons['per_condition_ms']:.2f} ms/cond)"
        )
        print(
            f"{row['design']:<9} {1e3 * row['numba']['median_s']:>10.1f} {1e3 * row['numpy']['median_s']:>10.1f} "
            f"{row['ratio_numpy_over_numba']:>6.2f} {1e3 * row['goal_s']:>8.0f} "
            f"{row['numba']['peak_mb_tracemalloc']:>8.1f}  {ctext}"
        )
    print(
        f"\nlarge design {'(quick: 4 x 5 levels, 20 items)' if args.quick else '(4 x 10 levels, 50 items)'}, every order"
    )
    print(f"{'engine':<7} {'mode':<6} {'total s':>8} {'composite s':>12} {'peak RSS MB':>12}")
    for row in result["large"]:
        if "error" in row:
            print(f"{row['engine']:<7} {row['mode']:<6} ERROR {row['error'][-300:]}")
            continue
        print(
            f"{row['engine']:<7} {row['mode']:<6} {row['total_s']:>8.2f} {row['composite_s']:>12.3f} {row['peak_rss_mb']:>12.0f}"
        )
    ok = {r["engine"] + "-" + r["mode"]: r for r in result["large"] if "error" not in r}
    if "numba-eager" in ok and "numpy-eager" in ok:
        ratio = ok["numpy-eager"]["total_s"] / ok["numba-eager"]["total_s"]
        result["large_ratio_numpy_over_numba"] = ratio
        print(f"numpy/numba ratio (large, eager): {ratio:.2f}")
    out = args.out or HERE / "results" / ("analysis-quick.json" if args.quick else "analysis.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
