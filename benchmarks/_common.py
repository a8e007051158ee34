"""Helpers shared by the benchmark scripts: machine description, JSON, tables.

Not part of the ``xlikert`` package; the scripts in ``benchmarks/`` import it
as a sibling module (``from _common import ...``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: The built-in offline models the collection benchmarks run: full runs', quick runs'.
MODEL, QUICK_MODEL = "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"


def model_name(model: str | None, quick: bool) -> str:
    """``model`` (a ``--model`` given), else the quick or the full runs' model."""
    return model or (QUICK_MODEL if quick else MODEL)


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"model name\s*:\s*(.*)", text)
        if found:
            return found.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
        found = re.search(r"MemTotal:\s*(\d+)\s*kB", text)
        if found:
            return round(int(found.group(1)) / 2**20, 1)
    except OSError:
        pass
    return None


def machine(extra_modules: Iterable[str] = ()) -> dict[str, Any]:
    """Describe the machine and the versions that matter for the numbers.

    Versions of numpy, numba, xarray, dask and xlikert always; of
    ``extra_modules`` (e.g. ``torch``, ``transformers``) when importable. Torch
    adds its thread count and the CUDA device, if any.
    """
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
    }
    for name in ("numpy", "numba", "xarray", "dask", "xlikert", *extra_modules):
        try:
            mod = __import__(name)
        except ImportError:
            continue
        info[name] = getattr(mod, "__version__", "?")
        if name == "torch":
            info["torch_threads"] = mod.get_num_threads()
            info["cuda"] = mod.cuda.get_device_name(0) if mod.cuda.is_available() else None
    return info


def result_path(name: str, quick: bool, out: str | os.PathLike | None = None) -> Path:
    """``results/<name>.json``, or ``results/<name>-quick.json`` in quick mode."""
    if out is not None:
        return Path(out)
    return RESULTS / (f"{name}-quick.json" if quick else f"{name}.json")


def _clean(obj: Any) -> Any:
    """Make ``obj`` strict JSON: NaN/inf to None, numpy scalars to Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        with contextlib.suppress(ValueError, TypeError):
            obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus ``timestamp`` and ``command`` if missing) as JSON."""
    path = Path(path)
    payload = dict(payload)
    payload.setdefault("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    payload.setdefault("command", " ".join(["python", *_rel_argv()]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(payload), indent=2) + "\n")
    print(f"wrote {path}")
    return path


def _rel_argv() -> list[str]:
    argv = list(sys.argv)
    with contextlib.suppress(ValueError):
        argv[0] = str(Path(argv[0]).resolve().relative_to(HERE.parent))
    return argv


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()``'s result and its wall time in seconds."""
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def time_calls(
    fn: Callable[[], Any], repeat: int, warm: bool = False, reset: Callable[[], Any] | None = None
) -> tuple[list[float], Any]:
    """The wall time of each of ``repeat`` calls of ``fn``, and the last call's result.

    ``warm``: one untimed call first. ``reset`` (e.g. a cache's) is called, untimed,
    before each timed call.
    """
    if warm:
        fn()
    times, result = [], None
    for _ in range(repeat):
        if reset is not None:
            reset()
        result, seconds = timed(fn)
        times.append(seconds)
    return times, result


def timeit(fn: Callable[[], Any], repeat: int, warm: bool = True) -> dict[str, float]:
    """Min and median wall time of ``repeat`` calls (after one warm-up call)."""
    times, _ = time_calls(fn, repeat, warm)
    return {"min_s": min(times), "median_s": statistics.median(times), "repeat": repeat}


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages now (a shared machine: timings have noise)."""
    return list(os.getloadavg())


def load_record(before: Sequence[float]) -> dict[str, list[float]]:
    """``load_average_before`` (taken by the caller before its runs) and ``..._after`` (now)."""
    return {"load_average_before": list(before), "load_average_after": load_average()}


def json_line_child(
    cmd: Sequence[str], env: dict[str, str] | None = None
) -> tuple[dict[str, Any] | None, subprocess.CompletedProcess]:
    """Run ``cmd`` (a child that prints its record as JSON on its last line); that record
    (None when the child failed) and the finished process (its output, for the error)."""
    res = subprocess.run(list(cmd), capture_output=True, text=True, check=False, env=env)
    if res.returncode != 0 or not res.stdout.strip():
        return None, res
    return json.loads(res.stdout.strip().splitlines()[-1]), res


def format_table(
    rows: Sequence[Sequence[Any]], header: Sequence[str], align: str | None = None
) -> str:
    """A plain-text table; numbers right-aligned unless ``align`` says otherwise.

    ``align`` is one character per column, ``l`` or ``r``.
    """
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    if align is None:
        align = "l" + "r" * (len(header) - 1)

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(w) if a == "l" else v.rjust(w)
            for v, w, a in zip(values, widths, align, strict=True)
        ).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def print_table(rows: Sequence[Sequence[Any]], header: Sequence[str], align: str | None = None):
    """Print :func:`format_table`."""
    print(format_table(rows, header, align))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 1e5 or abs(value) < 1e-3:
            return f"{value:.2e}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}"
    return str(value)


def loglog_fit(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Least-squares fit of ``log y = a + b log x``: the growth exponent ``b``.

    Returns ``exponent``, ``prefactor`` (``exp(a)``) and ``r2``.
    """
    import numpy as np

    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    b, a = np.polyfit(lx, ly, 1)
    resid = ly - (a + b * lx)
    ss = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss if ss > 0 else 1.0
    return {"exponent": float(b), "prefactor": float(math.exp(a)), "r2": r2}


def probe_moved(probes: Sequence[float]) -> float:
    """How far the matmul probes moved: ``(max - min) / min`` of their rates."""
    lo, hi = min(probes), max(probes)
    return (hi - lo) / lo if lo > 0 else math.inf


def goal_verdict(fractions: Sequence[float], probes: Sequence[float], goal: float) -> str:
    """The verdict on a "fraction of the bound ≥ goal" claim from every timed run.

    Parameters
    ----------
    fractions : sequence of float
        The fraction of the bound of each timed run of a row (each against the
        matmul probes measured right beside it).
    probes : sequence of float
        Every probe rate (FLOP/s) measured beside those runs, before and after each.
    goal : float
        The fraction the row must reach.

    Returns
    -------
    str
        ``"meets"`` when the median run reaches ``goal``, ``"misses"`` when it does
        not, or ``"inconclusive (probe moved X%)"`` when the probes moved more
        (relatively, ``(max - min) / min``) than the median's margin from the goal
        (``|median / goal - 1|``): a fraction divides by the probe rate, so a probe
        that moved that much could turn the verdict over.
    """
    if not fractions or not probes:
        raise ValueError("goal_verdict needs at least one run and one probe")
    median = statistics.median(fractions)
    moved = probe_moved(probes)
    if moved > abs(median / goal - 1.0):
        return f"inconclusive (probe moved {100 * moved:.0f}%)"
    return "meets" if median >= goal else "misses"


class ProbedRuns:
    """Timed runs with a matmul probe right beside each: probe, run, probe, run, probe.

    Each run shares its closing probe with the next run's opening one, so a run is
    always compared with the machine as it was just before and just after it.

    Parameters
    ----------
    probe : callable
        Measures the reference rate now (FLOP/s), e.g. a short float32 GEMM.
    """

    def __init__(self, probe: Callable[[], float]) -> None:
        self.probe = probe
        self.last = probe()
        #: Every probe rate in the order measured.
        self.probes: list[float] = [self.last]

    def run(
        self, fn: Callable[[], Any], repeat: int, reset: Callable[[], Any] | None = None
    ) -> dict[str, Any]:
        """Time ``repeat`` calls of ``fn``, each between two probes.

        ``reset`` (e.g. a FLOP counter's) is called before each run. Returns the
        seconds of each run, the probe rates before and after each, the median
        seconds and the last call's result.
        """
        seconds, before, after, result = [], [], [], None
        for _ in range(repeat):
            if reset is not None:
                reset()
            before.append(self.last)
            result, s = timed(fn)
            seconds.append(s)
            self.last = self.probe()
            self.probes.append(self.last)
            after.append(self.last)
        return {"seconds": seconds, "median_s": statistics.median(seconds), "result": result,
                "probe_before": before, "probe_after": after}  # fmt: skip


def run_fractions(work: float, seconds: Sequence[float], before: Sequence[float],
                  after: Sequence[float]) -> list[float]:  # fmt: skip
    """``work / seconds / rate`` of each run, ``rate`` the mean of its two probes."""
    return [work / s / ((b + a) / 2) for s, b, a in zip(seconds, before, after, strict=True)]
