"""A local Ray cluster of two nodes on this machine: ``ray start --head`` and a second
``ray start --address`` on loopback, each a process group of its own (stopped by its id).

Used by tests/collect/run/test_cluster.py (one cluster per session) and
benchmarks/bench_cluster.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _node_ip(i: int) -> str:
    """Node ``i``'s address: its own in the loopback range, never 127.0.0.1 (see above)."""
    return f"127.0.0.{2 + i}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> list[str]:
    """``ray`` of this interpreter's environment."""
    exe = Path(sys.executable).with_name("ray")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


class LocalCluster:
    """``nodes`` Ray nodes of ``cpus`` CPUs each (no GPU), started on this machine.

    ``address`` is the head's ``127.0.0.1:port``; :meth:`stop` ends both process groups
    (SIGTERM, then SIGKILL after ``grace`` seconds) and removes the temporary folder.
    """

    def __init__(self, nodes: int = 2, cpus: int = 1, timeout: float = 180.0):
        self.tmp = Path(tempfile.mkdtemp(prefix="xlr-"))  # short: Ray's socket paths
        self.procs: list[subprocess.Popen] = []
        port = _free_port()
        # Each node on its own loopback address (127.0.0.2, 127.0.0.3, ...): Ray turns
        # 127.0.0.1 into the machine's network address (resolve_ip_for_localhost), and
        # this cluster's traffic must stay on loopback.
        self.address = f"{_node_ip(0)}:{port}"
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
        common = ["--block", f"--num-cpus={cpus}", "--num-gpus=0", "--disable-usage-stats"]
        head = [*_ray_cli(), "start", "--head", f"--port={port}", "--include-dashboard=false",
                f"--temp-dir={self.tmp}", f"--ray-client-server-port={_free_port()}",
                f"--dashboard-agent-listen-port={_free_port()}",
                f"--node-ip-address={_node_ip(0)}", *common]  # fmt: skip
        t0 = time.perf_counter()
        try:
            self._start(head, env, "head")
            self._wait(0, timeout)
            for i in range(1, nodes):
                self._start([*_ray_cli(), "start", f"--address={self.address}",
                             f"--dashboard-agent-listen-port={_free_port()}",
                             f"--node-ip-address={_node_ip(i)}", *common],
                            env, f"node{i}")  # fmt: skip
            self._wait(nodes, timeout)
        except BaseException:
            self.stop()
            raise
        #: Seconds from the first ``ray start`` to every node alive.
        self.startup_s = time.perf_counter() - t0

    def _start(self, cmd: list[str], env: dict[str, str], name: str) -> None:
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 - the process writes it
        self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))  # fmt: skip

    def _wait(self, nodes: int, timeout: float) -> None:
        """Until the head's port answers, then until ``nodes`` nodes are alive (one process
        connected to the cluster, polling)."""
        deadline = time.perf_counter() + timeout
        host, port = self.address.split(":")
        while True:
            self._check_alive()
            try:
                socket.create_connection((host, int(port)), timeout=1.0).close()
                break
            except OSError:
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"the Ray head did not answer in {timeout:.0f} s") from None
                time.sleep(0.2)
        code = (
            "import ray, sys, time; ray.init(address=sys.argv[1], log_to_driver=False)\n"
            "while sum(1 for n in ray.nodes() if n['Alive']) < int(sys.argv[2]): time.sleep(0.2)"
        )
        while nodes:  # the GCS may answer before it takes drivers: try again until it does
            self._check_alive()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError(f"the Ray cluster did not have {nodes} nodes in {timeout:.0f} s")
            try:
                done = subprocess.run([sys.executable, "-c", code, self.address, str(nodes)],
                                      capture_output=True, timeout=left)  # fmt: skip
            except subprocess.TimeoutExpired:
                continue
            if done.returncode == 0:
                return
            time.sleep(1.0)

    def _check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                logs = "".join(f.read_text()[-1500:] for f in sorted(self.tmp.glob("*.log")))
                raise RuntimeError(f"ray start ended ({p.returncode}):\n{logs}")

    def stop(self, grace: float = 5.0) -> None:
        """End every process group this cluster started (by its id), then its folder."""
        for p in reversed(self.procs):
            _signal_group(p, signal.SIGTERM)
        deadline = time.perf_counter() + grace
        for p in reversed(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.perf_counter()))
            _signal_group(p, signal.SIGKILL)  # what ray start left behind in its group
            p.wait()
        self.procs = []
        shutil.rmtree(self.tmp, ignore_errors=True)


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig)
