"""Synthetic item-PMF designs with the layout of a results file.

Used by the examples, tests and benchmarks wherever real collection is not the
point. The PMFs are deterministic functions of ``seed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

__all__ = ["synthetic_pmf"]


def synthetic_pmf(
    factors: Mapping[str, Sequence[str] | int] | None = None,
    n_items: int = 17,
    scale: tuple[int, int] = (1, 7),
    seed: int = 0,
    concentration: float = 1.0,
    sparsity: float = 0.0,
) -> xr.DataArray:
    """A fully crossed design of random item PMFs.

    Parameters
    ----------
    factors
        Factor name -> level labels (or a number of levels, labelled
        ``"<name>0"``, ``"<name>1"``, ...). Default: the paper's design,
        5 models x 4 targets.
    n_items
        Number of items ``K``.
    scale
        ``(y_min, y_max)`` of the Likert scale.
    seed
        Seed of the generator; equal seeds give equal PMFs.
    concentration
        Dirichlet concentration; small values give peaked, LLM-like PMFs.
    sparsity
        Probability that a score gets exactly zero mass (before renormalising;
        at least one score per PMF keeps its mass).

    Returns
    -------
    xr.DataArray
        ``pmf`` with dims ``(*factors, "item", "score")``, float64, each PMF
        summing to 1 over ``score``.

    Examples
    --------
    >>> pmf = synthetic_pmf({"model": 2, "target": ["USA", "China"]}, n_items=3)
    >>> dict(pmf.sizes)
    {'model': 2, 'target': 2, 'item': 3, 'score': 7}
    >>> bool(abs(pmf.sum("score") - 1).max() < 1e-12)
    True
    """
    if factors is None:
        factors = {
            "model": ["Llama-3.3-70B", "Qwen3-80B", "Aya-32B", "Mistral-24B", "Gemma-27B"],
            "target": ["USA", "China", "Canada", "France"],
        }
    coords: dict[str, list[str] | np.ndarray] = {}
    for name, levels in factors.items():
        if isinstance(levels, int):
            levels = [f"{name}{i}" for i in range(levels)]
        coords[name] = list(levels)
    lo, hi = scale
    n_scores = hi - lo + 1
    shape = [len(v) for v in coords.values()] + [n_items, n_scores]
    rng = np.random.default_rng(seed)
    mass = rng.gamma(concentration, size=shape)
    if sparsity > 0:
        zero = rng.random(shape) < sparsity
        keep = rng.integers(0, n_scores, size=shape[:-1])
        zero[np.arange(n_scores) == keep[..., None]] = False
        mass[zero] = 0.0
    mass /= mass.sum(axis=-1, keepdims=True)
    coords["item"] = [str(k + 1) for k in range(n_items)]
    coords["score"] = np.arange(lo, hi + 1)
    return xr.DataArray(
        mass,
        dims=[*factors, "item", "score"],
        coords=coords,
        name="pmf",
        attrs={"description": "synthetic item PMFs", "seed": seed},
    )
