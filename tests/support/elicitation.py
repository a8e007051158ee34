"""A results-like Dataset with the elicitation factor, for the analysis and report tests."""

from __future__ import annotations

import numpy as np
import xarray as xr

LEVELS = ["first_token", "greedy", "own_words"]


def results(seed: int = 0) -> xr.Dataset:
    """A results-like Dataset: model x elicitation x target x item x score, with the greedy
    replies' answers and the own-words variables."""
    rng = np.random.default_rng(seed)
    M, E, T, K, S = 2, 3, 2, 4, 5
    pmf = rng.dirichlet(np.ones(S), size=(M, E, T, K))
    answered = np.full((M, E, T, K), -1)
    answer = np.full((M, E, T, K), np.nan)
    answered[:, 1] = rng.integers(0, 2, size=(M, T, K))
    got = answered[:, 1] == 1
    answer[:, 1] = np.where(got, rng.integers(1, S + 1, size=(M, T, K)), np.nan)
    # where answered, make some replies write the first-token mode
    mode = pmf[:, 0].argmax(-1) + 1
    copy = got & (rng.random((M, T, K)) < 0.5)
    answer[:, 1][copy] = mode[copy]
    pmf[:, 1][~got] = np.nan
    none = np.full((M, E, T, K), np.nan)
    err = np.full((M, E, T, K), np.nan)
    none[:, 2] = rng.random((M, T, K)) * 0.3
    err[:, 2] = rng.random((M, T, K)) * 1e-3
    dims = ("model", "elicitation", "target", "item")
    return xr.Dataset(
        {
            "pmf": ((*dims, "score"), pmf),
            "reply_answered": (dims, answered),
            "reply_answer": (dims, answer),
            "no_answer_mass": (dims, none),
            "elicitation_error": (dims, err),
        },
        coords={"model": ["m1", "m2"], "elicitation": LEVELS, "target": ["USA", "China"],
                "item": [str(k) for k in range(K)], "score": np.arange(1, S + 1)},
    )  # fmt: skip
