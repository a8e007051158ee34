"""Shared fixtures: small random PMF designs; each pytest-xdist worker's share of the cores."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest
import xarray as xr
from support.pmfs import make_pmf


def _share_the_cores() -> None:
    """One worker's share of the cores for torch's OpenMP threads (and, by inheritance,
    for the engines and child processes a worker starts).

    Each torch process starts a thread per core; with as many pytest-xdist workers as
    cores (the README's ``-n 2`` on CI's 2 cores) the threads of the workers and their
    engines wait on each other by spinning. Measured on 2 cores, three real-model test
    files under ``-n 2``: 241 s wall and 466 s of CPU with a thread per core, 53 s and
    96 s with one thread per worker. ``OMP_NUM_THREADS`` set by the caller wins.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = max(1, (cores or 1) // workers)
    os.environ["OMP_NUM_THREADS"] = str(share)
    if "torch" in sys.modules:  # imported before this file (a plugin): set it there too
        sys.modules["torch"].set_num_threads(share)


_share_the_cores()


@pytest.fixture
def pmf_factory() -> Callable[..., xr.DataArray]:
    """``make_pmf(levels, n_items=2, n_scores=3, seed=0, zeros=0.0, ymin=1)``."""
    return make_pmf
