"""Wall time of the test suite: with the engines already built, or on a fresh clone as CI runs it.

Usage::

    python benchmarks/bench_suite.py            # the whole suite, as CI runs it
    python benchmarks/bench_suite.py --quick    # tests/test_benchmarks.py only (a smoke run)
    python benchmarks/bench_suite.py --fresh    # .ci/run on a fresh clone, new venv, no caches

The default times the test command of the top-level README in a child process, from
this checkout, with the inference engines already built (``tests/engines/install.sh``
run before; the script says so in the JSON and refuses nothing) and whatever model
cache the user has: **not** a clean clone, whose installs and engine builds come on
top. Writes ``results/suite.json`` (``suite-quick.json``): the date, the command,
its wall time, the passed/skipped/failed counts read from pytest's closing summary
line, the machine's cores and whether the engines were present.

``--fresh`` measures what CI pays: a ``git clone`` of this checkout's HEAD into a
temporary folder, a new virtual environment, an empty model cache (``XLIKERT_CACHE``)
and no engines, then ``.ci/run`` there (the installs, the engine builds, pytest).
pip's download and wheel cache is off (``PIP_NO_CACHE_DIR``) unless ``--pip-cache``
is given. Writes ``results/suite-fresh.json``: the commit, the wall time of
``.ci/run`` and the time pytest reports on its closing line. The folder is deleted
afterwards (``--keep`` keeps it).

The documentation's sentences on the test time are generated from these files
(``benchmarks/run_all --readme-only``, :func:`readme_suite`, :func:`readme_fresh`);
without them they say the time is not recorded yet.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    HERE,
    RESULTS,
    load_average,
    load_record,
    machine,
    result_path,
    timed,
    write_json,
)
from _render import duration, fmt, table

ROOT = HERE.parent
#: The command the README gives for the tests (after the installs).
COMMAND = [sys.executable, "-m", "pytest", "-n", "2"]
QUICK = ["tests/test_benchmarks.py"]
#: What --fresh runs in the clone: CI's entry point.
CI = ".ci/run"
#: Variables of this shell that would point the clone at this checkout's engines, code
#: or thread settings.
_UNSET = ("XLIKERT_ENGINES", "XLIKERT_CACHE", "PYTHONPATH", "OMP_NUM_THREADS", "VIRTUAL_ENV")
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


def pytest_seconds(output: str) -> float | None:
    """The wall time on pytest's closing line (``... in 387.12s (0:06:27) ...``), or None."""
    lines = [ln for ln in output.splitlines() if _COUNT.search(ln)]
    found = [re.search(r"\bin ([\d.]+)s\b", ln) for ln in lines]
    found = [f for f in found if f]
    return float(found[-1].group(1)) if found else None


def fresh_clone(folder: Path, pip_cache: bool) -> tuple[Path, dict[str, str]]:
    """A clone of this checkout's HEAD in ``folder/repo`` and the environment of a fresh
    machine for it: a new venv first on PATH, an empty model cache, no engines."""
    repo = folder / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    env["PATH"] = f"{folder / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["XLIKERT_CACHE"] = str(folder / "cache")
    if not pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    return repo, env


def run_fresh(pip_cache: bool, keep: bool) -> dict[str, Any]:
    """``.ci/run`` on a fresh clone (:func:`fresh_clone`): its record for the JSON."""
    folder = Path(tempfile.mkdtemp(prefix="xlikert-fresh-"))
    try:
        repo, env = fresh_clone(folder, pip_cache)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                                capture_output=True, text=True).stdout.strip()  # fmt: skip
        print(f"running {CI} in a fresh clone of {commit[:10]} at {folder}", flush=True)
        res, wall = timed(lambda: subprocess.run(
            [str(repo / CI)], cwd=repo, env=env, capture_output=True, text=True
        ))  # fmt: skip
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    sys.stdout.write(res.stdout[-3000:] + res.stderr[-2000:])
    return {
        "measured_command": CI, "commit": commit, "returncode": res.returncode,
        "ci_wall_s": wall, "pytest_wall_s": pytest_seconds(res.stdout),
        "counts": summary_counts(res.stdout), "pip_cache": pip_cache,
        "what": "a git clone of the commit, a new virtual environment, an empty model cache "
        "and no engines: .ci/run's installs, engine builds and pytest, as CI runs them"
        + ("; pip's download and wheel cache as the machine had it" if pip_cache else ""),
    }  # fmt: skip


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
    ap.add_argument("--fresh", action="store_true", help=".ci/run on a fresh clone")
    ap.add_argument("--pip-cache", action="store_true", help="--fresh with pip's cache")
    ap.add_argument("--keep", action="store_true", help="--fresh: keep the clone's folder")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.fresh:
        load_before = load_average()
        out = run_fresh(args.pip_cache, args.keep)
        out.update(benchmark="suite-fresh", date=time.strftime("%Y-%m-%d"),
                   **load_record(load_before), machine=machine(["torch", "transformers"]))  # fmt: skip
        write_json(Path(args.out) if args.out else RESULTS / "suite-fresh.json", out)
        return 0 if out["returncode"] == 0 else 1
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


def _returned(d: dict[str, Any]) -> str:
    """``""`` for a run that passed, else its return code, for a sentence."""
    return "" if d["returncode"] == 0 else f", return code {d['returncode']}"


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
    fresh = RESULTS / "suite-fresh.json"
    more = ["", readme_fresh(json.loads(fresh.read_text()))] if fresh.exists() else []
    return [f"What was timed: {d['what']}.", "", *table(header, rows), *more]


def readme_suite(d: dict[str, Any] | None) -> str:
    """The top-level README's sentence on the test suite's time, from ``suite.json``."""
    if d is None:
        return ("Wall time of `python -m pytest -n 2`: not recorded yet "
                "(`python benchmarks/bench_suite.py` writes `results/suite.json`).")  # fmt: skip
    m, ok = d["machine"], _returned(d)
    return (
        f"Timed by `benchmarks/bench_suite.py` ({d['date']}, {m.get('cpu_count')} cores, "
        f"`results/suite.json`) with the engines already built and the model cache as the "
        f"user had it: `{d['measured_command']}` took "
        f"{duration(d['wall_s'])} ({_counts(d['counts'])}{ok}). A clean clone adds the "
        "installs and the engine builds; that is not in this time."
    )


def readme_fresh(d: dict[str, Any] | None) -> str:
    """The documentation's sentence on a fresh clone's test time, from ``suite-fresh.json``."""
    if d is None:
        return ("On a fresh clone: not recorded yet (`python benchmarks/bench_suite.py "
                "--fresh` writes `results/suite-fresh.json`).")  # fmt: skip
    m, ok = d["machine"], _returned(d)
    took = "not found" if d["pytest_wall_s"] is None else duration(d["pytest_wall_s"])
    return (
        f"On a fresh clone (`benchmarks/bench_suite.py --fresh`, {d['date']}, commit "
        f"{d['commit'][:10]}, {m.get('cpu_count')} cores, `results/suite-fresh.json`: "
        f"{d['what']}): `{d['measured_command']}` took {duration(d['ci_wall_s'])} in all, "
        f"pytest {took} of it ({_counts(d['counts'])}{ok})."
    )


#: The documentation's blocks this script's JSON fills: name to (JSON file, sentence).
README_BLOCKS = {
    "suite-time": ("suite.json", readme_suite),
    "suite-fresh-time": ("suite-fresh.json", readme_fresh),
}


if __name__ == "__main__":
    raise SystemExit(main())
