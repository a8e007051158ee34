"""Each level scored against each person's own answer, with paired SEs over the people
(the respondent side of :func:`xlikert.validity`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.errors import DesignError
from ..human import human_marginal, human_pmf
from ..individual import INDIVIDUAL_SCORES, individual_scores
from ..support import support_bounds
from .core import level_pairs, paired_mean, paired_skill

__all__ = ["RESPONDENT_SCORES", "respondent_validity"]

#: The individual scores :func:`xlikert.validity` compares the levels on.
RESPONDENT_SCORES: tuple[str, ...] = ("log_score", "rps", "brier")


def _population_marginal(
    p: xr.DataArray, answers: pd.DataFrame, missing: Sequence[Any], item_dim: Any,
    score_dim: Any,
) -> xr.DataArray:  # fmt: skip
    """The shares of the answers of every row of ``answers`` per item, on ``p``'s axis."""
    items = [str(i) for i in p[item_dim].values]
    lo, hi = (np.broadcast_to(b.values, len(items)) for b in support_bounds(p))
    scale = {i: (int(a), int(b)) for i, a, b in zip(items, lo, hi, strict=True)}
    table = answers.reset_index(drop=True)
    pooled = human_marginal(human_pmf(table, items, scale=scale, missing=missing))
    return pooled["pmf"].reindex({score_dim: p[score_dim].values}, fill_value=0.0)


def _per_person(
    results: xr.DataArray, answers: pd.DataFrame, missing: Sequence[Any],
    respondent_dim: Any, item_dim: Any, score_dim: Any,
) -> xr.DataArray:  # fmt: skip
    """Each person's scores, the mean over the items they and the model answered."""
    s = individual_scores(
        results, answers, missing=missing, respondent_dim=respondent_dim, item_dim=item_dim,
        score_dim=score_dim,
    )[list(RESPONDENT_SCORES)]  # fmt: skip
    s = s.where(results.notnull().all(score_dim))  # a reply without an answer: no score
    return s.to_dataarray("metric").mean(item_dim)


def respondent_validity(
    p: xr.DataArray, answers: pd.DataFrame, dim: Any, missing: Sequence[Any],
    respondent_dim: Any, item_dim: Any, score_dim: Any,
) -> xr.Dataset:  # fmt: skip
    """Per level: each individual score's mean over the people, its skill over the
    population marginal, and each pair of levels' paired differences, with SEs.

    Raises
    ------
    DesignError
        No ``respondent_dim`` factor; the answers do not fit (as
        :func:`xlikert.analysis.individual.individual_scores`).
    """
    if respondent_dim not in p.dims:
        raise DesignError(
            f"answers were given, but the results have no {respondent_dim!r} factor (dims "
            f"{list(p.dims)}): individual scores need one persona per respondent"
        )
    model = _per_person(p, answers, missing, respondent_dim, item_dim, score_dim)
    base_pmf = _population_marginal(p, answers, missing, item_dim, score_dim)
    base_pmf = base_pmf.expand_dims({respondent_dim: p[respondent_dim].values})
    base = _per_person(base_pmf, answers, missing, respondent_dim, item_dim, score_dim)
    perfect = np.array([INDIVIDUAL_SCORES[m] for m in RESPONDENT_SCORES])
    lead = [d for d in model.dims if d not in (dim, "metric", respondent_dim)]
    m = model.transpose(*lead, dim, "metric", respondent_dim).values
    b = base.transpose("metric", respondent_dim).values
    levels = [str(v) for v in p[dim].values]
    ia, ib, labels = level_pairs(levels)
    zero = np.zeros_like(m)
    mean, mean_se, n = paired_mean(m, zero)
    skill = [paired_skill(m[..., i, k, :], b[k], b[k], perfect[k])
             for i in range(len(levels)) for k in range(len(perfect))]  # fmt: skip
    diff = paired_mean(m[..., ia, :, :], m[..., ib, :, :])
    skill_diff = [paired_skill(m[..., a, k, :], m[..., c, k, :], b[k], perfect[k])
                  for a, c in zip(ia, ib, strict=True) for k in range(len(perfect))]  # fmt: skip

    def stack(parts: Sequence[tuple[np.ndarray, ...]], j: int, n_rows: int) -> np.ndarray:
        arr = np.stack([x[j] for x in parts], -1)
        return arr.reshape(*arr.shape[:-1], n_rows, len(perfect))

    dims_l = (*lead, dim, "metric")
    dims_p = (*lead, "pair", "metric")
    out = xr.Dataset(
        {
            "individual": (dims_l, mean), "individual_se": (dims_l, mean_se),
            "respondents_compared": (dims_l, n),
            "skill": (dims_l, stack(skill, 0, len(levels))),
            "skill_se": (dims_l, stack(skill, 1, len(levels))),
            "individual_difference": (dims_p, diff[0]),
            "individual_difference_se": (dims_p, diff[1]),
            "skill_difference": (dims_p, stack(skill_diff, 0, len(ia))),
            "skill_difference_se": (dims_p, stack(skill_diff, 1, len(ia))),
        },
        coords={**{d: model[d].values for d in lead}, dim: p[dim].values,
                "metric": list(RESPONDENT_SCORES), "pair": labels,
                "level_a": ("pair", [levels[i] for i in ia]),
                "level_b": ("pair", [levels[i] for i in ib])},
    )  # fmt: skip
    out.attrs["respondents"] = int(p.sizes[respondent_dim])
    return out
