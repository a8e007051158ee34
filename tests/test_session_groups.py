"""The README's ``pytest -n 2 --dist loadgroup`` keeps each xdist group on one worker.

Each engine of tests/integration is a session fixture used by one ``xdist_group``
(its conftest): grouping is what starts it once per session. A pytest release that
breaks pytest-xdist's grouping (pytest 9.2 with xdist 3.8 silently distributed grouped
tests one by one) fails here, in a few seconds, instead of doubling the engines.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CONFTEST = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:  # as tests/integration/conftest.py marks the users of an engine
        item.add_marker(pytest.mark.xdist_group("engine"))
"""
TESTS = """
import os

def test_{n}():
    with open("workers.txt", "a") as fh:
        fh.write(os.environ["PYTEST_XDIST_WORKER"] + chr(10))
"""


def test_one_group_runs_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    for n in range(6):
        (tmp_path / f"test_{n}.py").write_text(textwrap.dedent(TESTS.format(n=n)))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"one group ran on several workers: {workers}"
