"""Run a vLLM child process and read its JSON (vLLM is not importable here).

The venv is ``vllm`` under the engines folder the tests use
(``xlikert.testing.engines.ENGINES``: ``$XLIKERT_ENGINES`` or ``<repo>/.engines``, made by
``tests/engines/install.sh``). Without it, :func:`run_child` (``_vllm_child.py``, for
``bench_collect.py`` and ``bench_sampling.py``) returns a ``not_run`` record and no
numbers; ``bench_gpu.py`` runs its own child through :func:`run_json_child`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
from xlikert.testing.engines import ENGINES  # noqa: E402

NOT_INSTALLED = "not run: vLLM not installed (tests/engines/install.sh)"


def vllm_python(this_python: bool = False) -> Path | None:
    """The vLLM venv's Python, or None when the venv is missing.

    ``this_python``: this Python itself when it imports vLLM (a GPU machine's).
    """
    if this_python and importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    py = ENGINES / "vllm" / "bin" / "python"
    return py if py.exists() else None


def child_env(cpu: bool = True) -> dict[str, str]:
    """The environment of a vLLM child: xlikert from this checkout first on ``PYTHONPATH``,
    vLLM's warnings only, and on the CPU ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) unless set."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "VLLM_LOGGING_LEVEL": "WARNING"}
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return env


def run_json_child(
    cmd: list[str], out: Path, env: dict[str, str], timeout: float
) -> dict[str, Any]:
    """Run ``cmd`` (a vLLM child that writes JSON to ``out``); that JSON, or an ``error``
    record (the first ``Error:`` line of its stderr and the stderr's tail)."""
    print(f"vLLM child: {' '.join(map(str, cmd[1:]))}", flush=True)
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"vLLM child did not finish in {timeout:.0f} s"}
    if res.returncode != 0 or not out.exists():
        stderr = res.stderr or res.stdout
        first = next((ln for ln in stderr.splitlines() if "Error:" in ln), "")
        return {"error": f"vLLM child failed (return code {res.returncode}): {first} ... "
                         f"{stderr[-2000:]}"}  # fmt: skip
    return json.loads(out.read_text())


def run_child(mode: str, args: list[str], timeout: float = 3600) -> dict[str, Any]:
    """``_vllm_child.py <mode> <args>`` in the vLLM venv; its JSON, or why there is none.

    The child imports xlikert from this checkout (``PYTHONPATH``), runs vLLM's CPU
    build with ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) unless set, and its wall time
    (engine start included) is added as ``wall_s``.
    """
    py = vllm_python()
    if py is None:
        return {"not_run": NOT_INSTALLED}
    with tempfile.TemporaryDirectory(prefix="xlk-vllm-") as tmp:
        out = Path(tmp) / "out.json"
        cmd = [str(py), str(HERE / "_vllm_child.py"), mode, "--out", str(out), *args]
        t0 = time.perf_counter()
        data = run_json_child(cmd, out, child_env(), timeout)
    if "error" not in data:
        data["wall_s"] = time.perf_counter() - t0
    return data


def not_measured(data: dict[str, Any]) -> dict[str, Any]:
    """The ``not_run`` and ``error`` entries of a child's record (empty when it measured)."""
    return {k: data[k] for k in ("not_run", "error") if k in data}


class KeepOpen:
    """Hands ``collect`` an open model (an engine started once) without letting it close it."""

    def __init__(self, model: Any) -> None:
        self.model, self.name = model, model.name
        self.mode = getattr(model, "mode", "exact")

    def score(self, prompts):
        return self.model.score(prompts)

    def provenance(self):
        return self.model.provenance()

    def close(self) -> None:
        pass
