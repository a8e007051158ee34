"""Shared fixtures: small random PMF designs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import xarray as xr
from support.pmfs import make_pmf


@pytest.fixture
def pmf_factory() -> Callable[..., xr.DataArray]:
    """``make_pmf(levels, n_items=2, n_scores=3, seed=0, zeros=0.0, ymin=1)``."""
    return make_pmf
