"""An engine started by a test session dies with it, even when the session is killed before
its fixtures' teardown (xlikert.testing.engines.kill_with_parent)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

#: A parent that starts a "server" group (a leader and its child, as vLLM's server and its
#: engine core) with the watcher, prints the group, then waits to be killed.
PARENT = """
import subprocess, sys, time
from xlikert.testing.engines import kill_with_parent
server = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)
kill_with_parent(server.pid)
print(server.pid, flush=True)
time.sleep(300)
"""


def alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups (POSIX)")
def test_a_killed_parent_takes_its_engine_group_with_it():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    group = int(parent.stdout.readline())
    try:
        time.sleep(1.0)
        assert alive(group)  # the watcher leaves a live parent's engine alone
        parent.send_signal(signal.SIGKILL)  # no teardown runs
        parent.wait(timeout=30)
        deadline = time.time() + 30
        while alive(group) and time.time() < deadline:
            time.sleep(0.1)
        assert not alive(group), "the engine's group outlived its killed parent"
    finally:
        if alive(group):
            os.killpg(group, signal.SIGKILL)
