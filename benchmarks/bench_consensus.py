"""Benchmark: Multivariate Consensus with certified error, per condition.

For K items (5 ... 100) on a 1..7 scale and tol (1e-3 ... 1e-6) it times
``xl.consensus_bounds(pmf, tol=tol)`` per condition with the numba
kernel and with its plain-numpy twin, side by side in one process, reports the
certified error achieved, and for K <= 6 compares with brute-force enumeration
of all 7^K response vectors. Goal (issue 2): K = 17, tol = 1e-4 in under 20 ms
per condition; tol = 1e-6 possible.

Usage::

    python benchmarks/bench_consensus.py            # full, a few minutes
    python benchmarks/bench_consensus.py --quick    # under a minute

Writes ``benchmarks/results/consensus.json`` (``consensus-quick.json`` with
``--quick``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

import xlikert as xl
from xlikert.kernels.consensus import consensus_bounds, consensus_bounds_numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, result_path, time_calls, write_json
from _render import fmt, goal, table

GOAL_MS = 20.0
#: The PMFs timed: peaked and sparse as an LLM's, or diffuse.
REGIMES = {
    "llm": {"concentration": 0.3, "sparsity": 0.3},
    "diffuse": {"concentration": 1.0, "sparsity": 0.0},
}
ITEMS = (5, 6, 10, 17, 25, 50, 100)  # 6: one more brute-force check
HEADER = (
    f"{'regime':8s} {'K':>4s} {'tol':>7s} {'numba ms':>9s} {'numpy ms':>9s} "
    f"{'ratio':>6s} {'kern ms':>8s} {'kern np':>8s} {'ratio':>6s} "
    f"{'max err':>9s} {'|v-bf|':>9s} {'bf ms':>8s}"
)


def brute_force(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact eq. consensus-multivariate by enumerating all n^K vectors (per condition)."""
    out = np.empty(p.shape[0])
    K = p.shape[1]
    c = np.sqrt(K) * (y[-1] - y[0])
    for i, pk in enumerate(p):
        mu = pk @ y
        dist = np.zeros(1)
        prob = np.ones(1)
        for k in range(K):  # outer products over the n^K grid, flattened
            dist = (dist[:, None] + ((y - mu[k]) ** 2)[None, :]).ravel()
            prob = (prob[:, None] * pk[k][None, :]).ravel()
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.log2(1.0 - np.sqrt(dist) / c)
        out[i] = 1.0 + np.sum(np.where(prob > 0, prob * f, 0.0))
    return out


def best_time(fn, repeat: int) -> tuple[float, object]:
    """The least wall time of ``repeat`` calls of ``fn`` (no warm-up) and the last result."""
    times, result = time_calls(fn, repeat)
    return min(times), result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer conditions and repeats")
    ap.add_argument("--out", type=Path, default=None, help="JSON output path")
    ap.add_argument(
        "--regime",
        choices=["llm", "diffuse", "both"],
        default="both",
        help="llm: peaked sparse PMFs (Dirichlet 0.3, 30%% zeros); diffuse: Dirichlet 1",
    )
    args = ap.parse_args(argv)
    args.n_cond = 4 if args.quick else 20
    args.repeat = 2 if args.quick else 3
    args.n_cond_numpy = 2 if args.quick else 5
    args.tols = (1e-3, 1e-4, 1e-5, 1e-6) if args.quick else (1e-3, 1e-4, 1e-5, 1e-6, 1e-8)
    return args


def brute_force_check(pmf, K: int, n_cond: int) -> tuple[np.ndarray | None, float | None]:
    """Brute force on every condition (K <= 6 only) and its ms per condition."""
    y = pmf.score.values.astype(float)
    if K > 6:
        return None, None
    bf_s, bf = best_time(lambda: brute_force(pmf.values, y), 1)
    return bf, 1e3 * bf_s / n_cond


def measure(args, regime: str, K: int, tol: float, pmf, bf, bf_ms) -> dict[str, Any]:
    """One row: end to end and kernel-alone times, numba and numpy, and the errors."""
    y = pmf.score.values.astype(float)
    n_cond, n_np, repeat = args.n_cond, args.n_cond_numpy, args.repeat
    sub = pmf.isel(condition=slice(n_np))
    t_nb, ds = best_time(lambda: xl.consensus_bounds(pmf, tol=tol, kernels="numba"), repeat)
    t_np, ds_np = best_time(lambda: xl.consensus_bounds(sub, tol=tol, kernels="numpy"), 1)
    ms_nb, ms_np = 1e3 * t_nb / n_cond, 1e3 * t_np / n_np
    # the kernels alone, on numpy arrays (no validation, no xarray)
    p_all, p_sub = pmf.values, sub.values
    t_knb, _ = best_time(lambda: consensus_bounds(p_all, y, tol, 1 << 22), repeat)
    t_knp, _ = best_time(lambda: consensus_bounds_numpy(p_sub, y, tol), 1)
    k_nb, k_np = 1e3 * t_knb / n_cond, 1e3 * t_knp / n_np
    vs_bf = None
    if bf is not None:
        vs_bf = float(np.max(np.abs(ds.consensus.values - bf)))
        inside = bool(np.all((ds.lower.values - 1e-12 <= bf) & (bf <= ds.upper.values + 1e-12)))
        if not inside or vs_bf > tol:
            print(f"!! brute force outside the certified bounds (K={K}, tol={tol})")
    return {
        "regime": regime,
        "K": K,
        "tol": tol,
        "conditions": n_cond,
        "numba_ms_per_condition": ms_nb,
        "numpy_ms_per_condition": ms_np,
        "numpy_over_numba": ms_np / ms_nb,
        "kernel_numba_ms_per_condition": k_nb,
        "kernel_numpy_ms_per_condition": k_np,
        "kernel_numpy_over_numba": k_np / k_nb,
        "max_certified_error": float(ds.error.max()),
        "mean_certified_error": float(ds.error.mean()),
        "numba_vs_numpy_max_abs_diff": float(
            abs(ds_np.consensus - ds.consensus.isel(condition=slice(n_np))).max()
        ),
        "max_abs_diff_vs_brute_force": vs_bf,
        "brute_force_ms_per_condition": bf_ms,
        "mean_consensus": float(ds.consensus.mean()),
    }


def print_row(r: dict[str, Any]) -> None:
    ms_nb, ms_np = r["numba_ms_per_condition"], r["numpy_ms_per_condition"]
    k_nb, k_np = r["kernel_numba_ms_per_condition"], r["kernel_numpy_ms_per_condition"]
    vs_bf, bf_ms = r["max_abs_diff_vs_brute_force"], r["brute_force_ms_per_condition"]
    print(
        f"{r['regime']:8s} {r['K']:4d} {r['tol']:7.0e} {ms_nb:9.3f} {ms_np:9.2f} "
        f"{ms_np / ms_nb:6.0f} {k_nb:8.3f} {k_np:8.2f} {k_np / k_nb:6.0f} "
        f"{r['max_certified_error']:9.2e} "
        f"{'' if vs_bf is None else f'{vs_bf:9.2e}':>9s} "
        f"{'' if bf_ms is None else f'{bf_ms:8.1f}':>8s}"
    )


def run(args) -> list[dict[str, Any]]:
    """Every (regime, K, tol) row, printed as it is measured."""
    regimes = REGIMES if args.regime == "both" else {args.regime: REGIMES[args.regime]}
    # warm up (JIT cache load) outside the timings
    xl.consensus(xl.datasets.synthetic_pmf({"c": 1}, n_items=3), tol=1e-6)
    print(
        "per condition; numba/numpy ms: xl.consensus_bounds end to end; "
        "kern: the kernel alone; max err: certified half-width"
    )
    print(HEADER)
    print("-" * len(HEADER))
    rows = []
    for regime, kw in regimes.items():
        for K in ITEMS:
            pmf = xl.datasets.synthetic_pmf({"condition": args.n_cond}, n_items=K, seed=K, **kw)
            bf, bf_ms = brute_force_check(pmf, K, args.n_cond)
            for tol in args.tols:
                rows.append(measure(args, regime, K, tol, pmf, bf, bf_ms))
                print_row(rows[-1])
    return rows


def print_goal(rows: list[dict[str, Any]]) -> None:
    print()
    for r in rows:
        if r["K"] != 17 or r["tol"] != 1e-4:
            continue
        verdict = "meets" if r["numba_ms_per_condition"] < GOAL_MS else "MISSES"
        print(
            f"K=17, tol=1e-4 ({r['regime']}): {r['numba_ms_per_condition']:.3f} ms per "
            f"condition end to end ({r['kernel_numba_ms_per_condition']:.3f} ms kernel) "
            f"-> {verdict} the {GOAL_MS:.0f} ms goal; certified error "
            f"{r['max_certified_error']:.2e}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = run(args)
    print_goal(rows)
    payload = {
        "benchmark": "multivariate consensus, certified error",
        "quick": args.quick,
        "machine": machine(),
        "goal": {"K": 17, "tol": 1e-4, "ms_per_condition": GOAL_MS},
        "timing": "best of repeats, warm, end-to-end xl.consensus_bounds per condition",
        "rows": rows,
    }
    write_json(result_path("consensus", args.quick, args.out), payload)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Multivariate Consensus"


def render(d: dict[str, Any]) -> list[str]:
    g = d.get("goal", {})
    rows_all = d["rows"]
    out = [
        f"{d.get('timing', '')}; numpy = the plain-numpy twin in the same process; "
        "max error = certified half-width of the bounds; \\|v − brute force\\| for K ≤ 6.",
        "",
    ]
    sel = [r for r in rows_all if r["tol"] == g.get("tol", 1e-4) or r["K"] == g.get("K", 17)]
    rows = []
    for r in sel:
        mark = ""
        if r["K"] == g.get("K") and r["tol"] == g.get("tol"):
            mark = f"goal < {fmt(g.get('ms_per_condition'))} ms: {goal(r['numba_ms_per_condition'] < g.get('ms_per_condition', 20))}"
        rows.append([
            r["regime"], fmt(r["K"]), f"{r['tol']:.0e}", fmt(r["numba_ms_per_condition"]),
            fmt(r["numpy_ms_per_condition"]),
            fmt(r["numba_ms_per_condition"] / r["numpy_ms_per_condition"]),
            fmt(r["max_certified_error"]), fmt(r.get("max_abs_diff_vs_brute_force")), mark,
        ])  # fmt: skip
    out += table(
        ["regime", "K", "tol", "xlikert ms/cond.", "numpy ms/cond.", "xlikert/numpy",
         "max certified error", "\\|v − brute force\\|", "goal"],
        rows,
    )  # fmt: skip
    out.append(
        f"Rows shown: tol = {g.get('tol', 1e-4):.0e} for every K, and every tol at K = {g.get('K', 17)}; "
        f"all {len(rows_all)} rows are in the JSON."
    )
    out.append("")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
