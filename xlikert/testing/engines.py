"""Real inference engines on loopback: a vLLM (CPU build) and a llama.cpp server.

What the test suite and ``benchmarks/`` share to start real engines (so a benchmark
needs no ``pytest``). The engines live in their own virtual environments under the
checkout's ``.engines/`` (or ``$XLIKERT_ENGINES``), made by ``tests/engines/install.sh``,
which the README's test command runs before pytest. A missing engine raises
:class:`EngineNotInstalled`, naming the script: the tests that need an engine fail
with it (they are part of the suite, not optional).

Examples
--------
>>> from xlikert.testing.engines import vllm_server
>>> server = vllm_server(folder, "smollm2", log=Path("vllm.log"))  # doctest: +SKIP
>>> server.url  # doctest: +SKIP
'http://127.0.0.1:40123/v1'
>>> server.kill()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "ENGINES",
    "ROOT",
    "VLLM_ENV",
    "EngineNotInstalled",
    "EngineServer",
    "engine_python",
    "free_port",
    "kill_with_parent",
    "llamacpp_server",
    "smollm2_folder",
    "smollm2_gguf",
    "vllm_server",
    "zoo_folder",
]

#: The source checkout this package was imported from (an editable install), else the
#: working directory.
ROOT = (
    Path(__file__).resolve().parents[2]
    if (Path(__file__).resolve().parents[2] / "pyproject.toml").exists()
    else Path.cwd()
)
#: Where ``tests/engines/install.sh`` puts the engines' virtual environments.
ENGINES = Path(os.environ.get("XLIKERT_ENGINES", ROOT / ".engines"))


#: Environment of every vLLM process the tests start: a 1 GiB KV cache (the CPU build
#: reserves its cache in RAM), and vLLM's warnings only.
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}


class EngineNotInstalled(RuntimeError):
    """An engine's virtual environment is missing: run ``tests/engines/install.sh``."""


def engine_python(name: str) -> Path:
    """The Python of engine venv ``name`` (``vllm`` or ``llamacpp``)."""
    py = ENGINES / name / "bin" / "python"
    if not py.exists():
        raise EngineNotInstalled(
            f"engine {name!r} is not installed in {ENGINES}: run tests/engines/install.sh "
            "(the README's test command does)"
        )
    return py


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def zoo_folder(source: str) -> Path:
    """The dequantised Hugging Face folder of built-in model ``source`` (made once, cached;
    parallel processes wait for the one making it)."""
    from xlikert.collect.zoo import model_folder

    return Path(model_folder({"name": source, "source": source})[0])


def smollm2_folder() -> Path:
    """The dequantised Hugging Face folder of the offline SmolLM2 (made once, cached)."""
    return zoo_folder("smollm2-135m-instruct")


def smollm2_gguf() -> Path:
    """The offline SmolLM2 GGUF file (assembled and checked once, cached)."""
    from xlikert.collect.zoo import resolve_gguf

    return resolve_gguf("smollm2-135m-instruct")


#: The watcher of :func:`kill_with_parent` (``python -c WATCHER parent group``).
WATCHER = """
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
while os.getppid() == parent:
    time.sleep(0.5)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        sys.exit(0)
try:
    os.killpg(group, signal.SIGKILL)
except ProcessLookupError:
    pass
"""


def kill_with_parent(group: int) -> subprocess.Popen:
    """A watcher that kills the process group ``group`` when this process dies.

    An engine runs in its own session (its process group: vLLM's server runs an
    engine-core child), so a test session killed before its fixtures' teardown (a
    SIGTERM, a SIGKILL, a CI timeout) would leave it running. The watcher, a small
    Python process in a session of its own, sees its parent change and kills the
    group; it exits by itself once the group is gone.

    Examples
    --------
    >>> proc = subprocess.Popen(["sleep", "30"], start_new_session=True)  # doctest: +SKIP
    >>> watcher = kill_with_parent(proc.pid)  # doctest: +SKIP
    """
    return subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(os.getpid()), str(group)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


class EngineServer:
    """An OpenAI-compatible server process on 127.0.0.1 that can be killed and restarted."""

    def __init__(self, argv: list[str], port: int, log: Path, env: dict | None = None,
                 ready_timeout: float = 600):  # fmt: skip
        self.argv, self.port, self.log = argv, port, log
        self.env = {**os.environ, **(env or {})}
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                self.argv, stdout=fh, stderr=subprocess.STDOUT, env=self.env,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self._watcher = kill_with_parent(self.proc.pid)
        deadline = time.time() + self.ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.argv[:4]} exited ({self.proc.returncode}); see {self.log}"
                )
            try:
                self.get("/v1/models")
                return
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.5)
        self.kill()
        raise RuntimeError(
            f"{self.argv[:4]} not ready after {self.ready_timeout} s; see {self.log}"
        )

    def get(self, route: str) -> dict:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request("GET", route)
            r = c.getresponse()
            if r.status != 200:
                raise ValueError(r.status)
            return json.loads(r.read())
        finally:
            c.close()

    def post(self, route: str, body: dict) -> dict:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            c.request("POST", route, json.dumps(body), {"Content-Type": "application/json"})
            return json.loads(c.getresponse().read())
        finally:
            c.close()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the server and every process it started (vLLM runs an engine-core child)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):  # the group, even when its leader is gone
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=60)
        self._watcher.wait(timeout=60)  # it sees the group gone
        self.proc = None


def vllm_server(model_dir: Path, served: str, log: Path, port: int | None = None) -> EngineServer:
    """``vllm.entrypoints.openai.api_server`` (CPU build) serving ``model_dir`` in float32."""
    argv = [
        str(engine_python("vllm")), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", served, "--dtype", "float32",
        "--enforce-eager", "--max-logprobs", "64", "--max-model-len", "2048",
        "--host", "127.0.0.1", "--port", str(port or free_port()),
    ]  # fmt: skip
    return EngineServer(argv, int(argv[-1]), log, VLLM_ENV)


def llamacpp_server(
    gguf: Path, served: str, log: Path, port: int | None = None, logits_all: bool = True
) -> EngineServer:
    """``llama_cpp.server`` serving a GGUF file (log-probabilities need ``logits_all``).

    Its threads follow ``OMP_NUM_THREADS`` where it is set (a test worker's share of
    the cores): llama.cpp otherwise reads prompts on a thread per core, which spin
    against the other workers' threads.
    """
    threads = os.environ.get("OMP_NUM_THREADS", "").strip()
    argv = [
        str(engine_python("llamacpp")), "-m", "llama_cpp.server", "--model", str(gguf),
        "--model_alias", served, "--logits_all", str(logits_all).lower(), "--n_ctx", "2048",
        *(["--n_threads", threads, "--n_threads_batch", threads] if threads.isdigit() else []),
        "--host", "127.0.0.1", "--port", str(port or free_port()),
    ]  # fmt: skip
    return EngineServer(argv, int(argv[-1]), log)
