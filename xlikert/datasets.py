"""Synthetic item-PMF designs with the layout of a results file, and real respondents.

:func:`synthetic_pmf` is used by the examples, tests and benchmarks wherever real
collection is not the point (the PMFs are deterministic functions of ``seed``).
:func:`anes96_respondents` is the ANES 1996 extract that ships with statsmodels, with
the persona bands of the built-in experiment ``anes96``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["ANES96_ITEMS", "anes96_respondents", "synthetic_pmf"]

#: The answer columns of :func:`anes96_respondents` (the items of the ``anes96`` instrument).
ANES96_ITEMS: tuple[str, ...] = ("selfLR", "ClinLR", "DoleLR")


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


def anes96_respondents() -> pd.DataFrame:
    """The 944 respondents of ``statsmodels.datasets.anes96`` with the persona bands (offline).

    Columns: the three placements ``selfLR``, ``ClinLR``, ``DoleLR`` (1..7, 1 =
    extremely liberal), ``party`` (categorical: PID 0-1 ``Democrat``, 2-4
    ``Independent``, leaners included, 5-6 ``Republican``), ``education``
    (categorical: educ 1-4 ``no college``, 5-7 ``college``), and the source
    columns ``PID``, ``educ``, ``age``, ``income``, ``vote``.

    Examples
    --------
    >>> t = anes96_respondents()
    >>> len(t), t.party.value_counts().sort_index().tolist()
    (944, [380, 239, 325])
    """
    from statsmodels.datasets import anes96

    raw = anes96.load_pandas().data
    out = raw[list(ANES96_ITEMS)].astype("int64")
    party = pd.cut(
        raw["PID"], [-0.5, 1.5, 4.5, 6.5], labels=["Democrat", "Independent", "Republican"]
    )
    education = pd.cut(raw["educ"], [0.5, 4.5, 7.5], labels=["no college", "college"])
    out = out.assign(party=party, education=education)
    return pd.concat([out, raw[["PID", "educ", "age", "income", "vote"]]], axis=1)
