"""Peak memory of ``xlikert demo`` (3 offline models x 4 targets x 17 items), cold and warm.

Usage::

    python benchmarks/bench_memory.py            # cold (fresh cache: GGUF -> float32) and warm
    python benchmarks/bench_memory.py --quick    # warm only, with the user's model cache

Each run is ``xlikert demo`` in a child process; its peak resident set size is the
largest ``ru_maxrss`` of that process tree (what ``/usr/bin/time -v`` reports as
"Maximum resident set size"), read in a wrapper process so runs do not mix. The
wrapper also samples the split of the demo's RSS into anonymous memory and
file-backed pages (the safetensors weights are memory-mapped: those pages are the
page cache, shared and reclaimable). Cold:
an empty ``XLIKERT_CACHE`` (the GGUF chunks are assembled, checked and dequantised
to float32 folders); warm: the same cache again. Goal: <= 2.5 GB (the demo peaked at
6.6 GB before the collection redesign). Writes ``results/memory.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, result_path, write_json
from _render import fmt, goal, table

GOAL_GB = 2.5
WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:])
peak = {"RssAnon": 0, "RssFile": 0}
while proc.poll() is None:  # the demo process's own split of its resident memory
    try:
        status = open(f"/proc/{proc.pid}/status").read()
        for key in peak:
            peak[key] = max(peak[key], int(status.split(key + ":")[1].split()[0]))
    except (OSError, IndexError, ValueError):
        pass
    time.sleep(0.05)
kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": proc.returncode, "peak_kb": kb, "anon_kb": peak["RssAnon"],
                  "file_kb": peak["RssFile"], "wall_s": time.perf_counter() - t0}))
"""


def run_demo(out_dir: Path, cache: str | None) -> dict:
    env_cache = {"XLIKERT_CACHE": cache} if cache else {}
    cmd = [sys.executable, "-c", WRAPPER, sys.executable, "-m", "xlikert.cli", "demo",
           "-o", str(out_dir), "--quiet"]  # fmt: skip
    import os

    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env_cache})
    last = res.stdout.strip().splitlines()[-1]
    info = json.loads(last)
    if info["rc"] != 0:
        raise RuntimeError(f"xlikert demo failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    for key in ("peak", "anon", "file"):
        info[f"{key}_gb"] = info.pop(f"{key}_kb") * 1024 / 1e9
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="warm run only, user cache")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="xlk-mem-") as tmp:
        runs = [("warm (user cache)", None)] if args.quick else [
            ("cold (empty cache: assemble + dequantise)", f"{tmp}/cache"),
            ("warm (same cache)", f"{tmp}/cache"),
        ]  # fmt: skip
        for i, (label, cache) in enumerate(runs):
            print(f"running xlikert demo, {label} ...", flush=True)
            r = run_demo(Path(tmp) / f"demo{i}", cache)
            r["run"] = label
            r["meets_goal"] = r["peak_gb"] <= GOAL_GB
            rows.append(r)
            print(f"  peak RSS {r['peak_gb']:.2f} GB, {r['wall_s']:.0f} s", flush=True)
    print()
    print(f"{'run':45s} {'peak RSS GB':>12s} {'anon GB':>8s} {'file GB':>8s} {'wall s':>8s}"
          f"  goal <= {GOAL_GB} GB")  # fmt: skip
    for r in rows:
        print(f"{r['run']:45s} {r['peak_gb']:12.2f} {r['anon_gb']:8.2f} {r['file_gb']:8.2f} "
              f"{r['wall_s']:8.0f}  {'meets' if r['meets_goal'] else 'MISSES'}")  # fmt: skip
    out = {
        "benchmark": "memory",
        "quick": args.quick,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": machine(["torch", "transformers"]),
        "measured_command": "xlikert demo -o DIR --quiet",
        "measure": "largest ru_maxrss of the demo's process tree (as /usr/bin/time -v); "
        "anon/file: the largest anonymous and file-backed parts of the demo process's RSS, "
        "sampled every 50 ms (file-backed: mmapped weights, shared and reclaimable)",
        "goal_gb": GOAL_GB,
        "before_redesign_gb": 6.6,
        "runs": rows,
    }
    write_json(result_path("memory", args.quick, args.out), out)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Peak memory of the demo"


def render(d: dict[str, Any]) -> list[str]:
    out = [
        f"`{d['measured_command']}`: {d['measure']}. Goal <= {d['goal_gb']} GB "
        f"({d['before_redesign_gb']} GB before the collection redesign).",
        "",
    ]
    rows = [[r["run"], fmt(r["peak_gb"]), fmt(r.get("anon_gb")), fmt(r.get("file_gb")),
             fmt(r["wall_s"]), goal(r["meets_goal"])] for r in d["runs"]]  # fmt: skip
    return out + table(
        ["run", "peak RSS GB", "of it anonymous, peak", "file-backed (weights), peak", "wall s",
         "goal"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
