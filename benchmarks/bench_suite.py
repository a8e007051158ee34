"""Wall time of the test suite (``python -m pytest -n 2``), with the engines already built.

Usage::

    python benchmarks/bench_suite.py            # the whole suite, as CI runs it
    python benchmarks/bench_suite.py --quick    # tests/test_benchmarks.py only (a smoke run)

Times the test command of the top-level README in a child process, from this
checkout, with the inference engines already built (``tests/engines/install.sh``
run before; the script says so in the JSON and refuses nothing) and whatever model
cache the user has: **not** a clean clone, whose installs and engine builds come on
top. Writes ``results/suite.json`` (``suite-quick.json``): the date, the command,
its wall time, the passed/skipped/failed counts read from pytest's closing summary
line, the machine's cores and whether the engines were present. The top-level
README's sentence on the test time is generated from this file
(``benchmarks/run_all --readme-only``, :func:`readme_suite`); without it the
sentence says the time is not recorded yet.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import HERE, load_average, load_record, machine, result_path, timed, write_json
from _render import duration, fmt, table

ROOT = HERE.parent
#: The command the README gives for the tests (after the installs).
COMMAND = [sys.executable, "-m", "pytest", "-n", "2"]
QUICK = ["tests/test_benchmarks.py"]
#: pytest's closing line, e.g. "== 731 passed, 14 skipped, 2 warnings in 387.12s (0:06:27) =="
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def summary_counts(output: str) -> dict[str, int]:
    """The counts on pytest's last summary line (``passed``, ``skipped``, ...).

    Parameters
    ----------
    output : str
        pytest's output; its last line with ``passed``/``failed`` ... ``in Ns`` is read.

    Returns
    -------
    dict of str to int
        One entry per kind named on that line (``error`` and ``errors`` as ``errors``).
    """
    lines = [ln for ln in output.splitlines() if re.search(r"\bin [\d.]+s\b", ln)]
    lines = [ln for ln in lines if _COUNT.search(ln)]
    if not lines:
        return {}
    out: dict[str, int] = {}
    for n, kind in _COUNT.findall(lines[-1]):
        out["errors" if kind.startswith("error") else kind] = int(n)
    return out


def engines_built() -> dict[str, bool]:
    """Which real engines are installed where the tests look for them."""
    try:
        from xlikert.testing.engines import ENGINES
    except ImportError:
        return {}
    return {name: (ENGINES / name / "bin" / "python").exists() for name in ("vllm", "llamacpp")}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="tests/test_benchmarks.py only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    cmd = COMMAND + (QUICK if args.quick else [])
    engines = engines_built()
    print(f"running {' '.join(['python', *cmd[1:]])} (engines present: {engines})", flush=True)
    load_before = load_average()
    res, wall = timed(lambda: subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True))
    sys.stdout.write(res.stdout[-3000:])
    counts = summary_counts(res.stdout)
    out = {
        "benchmark": "suite",
        "quick": args.quick,
        "date": time.strftime("%Y-%m-%d"),
        "measured_command": " ".join(["python", *cmd[1:]]),
        "what": "engines already built (tests/engines/install.sh run before), not a clean "
        "clone: installs and engine builds are not in this time",
        "engines_present": engines,
        "returncode": res.returncode,
        "wall_s": wall,
        "counts": counts,
        **load_record(load_before),
        "machine": machine(["torch", "transformers"]),
    }
    write_json(result_path("suite", args.quick, args.out), out)
    return 0 if res.returncode == 0 else 1


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Test suite wall time"


def _counts(c: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {k}" for k, n in c.items()) or "counts not found in its output"


def render(d: dict[str, Any] | None) -> list[str]:
    """This benchmark's table for benchmarks/README.md (``None``: not recorded yet)."""
    if d is None:
        return ["Test suite wall time: not recorded yet (`python benchmarks/bench_suite.py`).", ""]
    m = d["machine"]
    rows = [[f"`{d['measured_command']}`", d["date"], duration(d["wall_s"]), _counts(d["counts"]),
             fmt(d["returncode"]), fmt(m.get("cpu_count"))]]  # fmt: skip
    header = ["command", "date", "wall", "tests", "return code", "cores"]
    return [f"What was timed: {d['what']}.", "", *table(header, rows)]


def readme_suite(d: dict[str, Any] | None) -> str:
    """The top-level README's sentence on the test suite's time, from ``suite.json``."""
    if d is None:
        return ("Wall time of `python -m pytest -n 2`: not recorded yet "
                "(`python benchmarks/bench_suite.py` writes `results/suite.json`).")  # fmt: skip
    m = d["machine"]
    ok = "" if d["returncode"] == 0 else f", return code {d['returncode']}"
    return (
        f"Timed by `benchmarks/bench_suite.py` ({d['date']}, {m.get('cpu_count')} cores, "
        f"`results/suite.json`) with the engines already built and the model cache as the "
        f"user had it: `{d['measured_command']}` took "
        f"{duration(d['wall_s'])} ({_counts(d['counts'])}{ok}). A clean clone adds the "
        "installs and the engine builds; that is not in this time."
    )


#: The top-level README's blocks this script's JSON fills: name to (JSON file, sentence).
README_BLOCKS = {"suite-time": ("suite.json", readme_suite)}


if __name__ == "__main__":
    raise SystemExit(main())
