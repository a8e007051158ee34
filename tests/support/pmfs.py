"""Small random item-PMF designs for the analysis tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr


def make_pmf(
    levels: Sequence[int],
    n_items: int = 2,
    n_scores: int = 3,
    seed: int = 0,
    zeros: float = 0.0,
    ymin: int = 1,
) -> xr.DataArray:
    """Random item PMFs on dims (f0, f1, ..., item, score); ``zeros``: share of zero masses."""
    rng = np.random.default_rng(seed)
    shape = (*levels, n_items, n_scores)
    mass = rng.gamma(0.7, size=shape)
    if zeros:
        mass[rng.random(shape) < zeros] = 0.0
        first = mass.sum(-1) == 0
        mass[first, 0] = 1.0
    mass /= mass.sum(-1, keepdims=True)
    dims = [f"f{i}" for i in range(len(levels))]
    coords = {d: [f"{d}_{j}" for j in range(n)] for d, n in zip(dims, levels, strict=True)}
    coords["item"] = [f"q{k}" for k in range(n_items)]
    coords["score"] = np.arange(ymin, ymin + n_scores)
    return xr.DataArray(mass, dims=[*dims, "item", "score"], coords=coords, name="pmf")
