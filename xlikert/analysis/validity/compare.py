""":func:`validity`: which reading of the model is closest to the people."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..._version import __version__
from ...core.dims import ELICITATION_DIM, factor_dims
from ...core.errors import DesignError, InputTypeError
from ...core.io import encode_attrs, read_attrs
from ...core.validate import as_pmf
from .core import DISTANCES, closest_level, lead_probability
from .distances import check_human, level_distances, model_population
from .people import RESPONDENT_SCORES, respondent_validity

__all__ = ["VALIDITY_METHODS", "validity"]

#: How each number of :func:`validity` is made (its attrs).
VALIDITY_METHODS = {
    "se_method": "delta method on the multinomial covariance (diag q - q q')/N of the human "
    "PMF (N = n, or Kish n_eff when weighted); the model PMFs are exact",
    "pair_se_method": "the same delta method on the difference of the two levels' "
    "gradients in q: both levels are read against the same humans, so their errors are "
    "paired",
    "overall_se_method": "an upper bound: the mean over the items of the items' SEs (the SD "
    "of a sum is at most the sum of the SDs, whatever the respondents' correlation across "
    "items)",
    "closest_method": "the level with the smallest overall distance (the largest skill for "
    "the individual scores); closest_z = its lead over the runner-up / the SE of their "
    "paired difference; closest_probability = Phi(closest_z), a one-sided normal probability",
    "individual_method": "each person's score averaged over the items they and the model "
    "answered, then the mean over the people with sd/sqrt(n); pairs over the same people; "
    "skill (S - B)/(P - B) over the population marginal of the answers table by the delta "
    "method",
    "js_log_base": 2,
}


def _closest(ds: xr.Dataset, mean: str, pair_se: str, dim: Hashable, lower: bool) -> xr.Dataset:
    levels = np.asarray([str(v) for v in ds[dim].values], dtype=object)
    ia = [levels.tolist().index(a) for a in ds["level_a"].values]
    ib = [levels.tolist().index(b) for b in ds["level_b"].values]
    m = ds[mean].transpose(..., dim)
    se = ds[pair_se].transpose(*m.dims[:-1], "pair")
    best, second, z = closest_level(m.values, se.values, ia, ib, lower)
    name = np.append(levels, "")
    dims = m.dims[:-1]
    return xr.Dataset(
        {
            "closest": (dims, name[best].astype(str)),
            "runner_up": (dims, name[second].astype(str)),
            "closest_z": (dims, z),
            "closest_probability": (dims, lead_probability(z)),
        },
        coords={d: m[d].values for d in dims},
    )


def validity(
    results: xr.Dataset | xr.DataArray,
    human: xr.Dataset,
    *,
    answers: pd.DataFrame | None = None,
    dim: Hashable = ELICITATION_DIM,
    missing: Sequence[Any] = (),
    respondent_dim: Hashable = "respondent",
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Which reading of the model is closest to the people, with the humans' SEs.

    Each level of ``dim`` (the ``elicitation`` factor: first token, prefix, greedy, own
    words, stated) is set against the same human PMFs: W1, TV and JS per cell with the
    humans' delta-method SE, every pair of levels' paired difference with its SE, their
    means over the items, and the closest level with how sure that is. Every other factor
    (model, language, a persona group the human data share) stays a dim.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        Results with the factor ``dim`` (at least two levels), or their ``pmf``. A cell
        without a PMF (a reply that writes no answer) is counted, not compared. A
        ``respondent_dim`` factor the human data do not have is mixed uniformly.
    human : xr.Dataset
        A human PMF Dataset with ``n`` (:func:`xlikert.human_pmf`): every item of the
        results, on the same scale; its groups broadcast against the results' factors.
    answers : pandas.DataFrame, keyword-only
        With a ``respondent_dim`` factor: each person's answers (index: the respondent
        levels, a column per item), for the individual scores of each level.
    dim : hashable, keyword-only
        The factor whose levels are compared.
    missing : sequence, keyword-only
        Codes in ``answers`` that mean no answer.
    respondent_dim, item_dim, score_dim : hashable, keyword-only
        Names of the respondent factor and of the item and score dims.

    Returns
    -------
    xr.Dataset
        On ``metric`` (``wasserstein``, ``total_variation``, ``jensen_shannon``, and with
        ``answers`` ``log_score``, ``rps``, ``brier``) and ``pair`` (``"a − b"``, coords
        ``level_a``, ``level_b``): per cell ``estimate``, ``se``, ``difference``,
        ``difference_se``; per condition ``overall``, ``overall_se`` (a bound),
        ``overall_difference``, ``overall_difference_se``, ``items_compared``,
        ``cells_unanswered``; ``closest``, ``runner_up``, ``closest_z``,
        ``closest_probability``; with ``answers`` ``individual``, ``individual_se``,
        ``skill``, ``skill_se`` and their ``_difference`` over pairs,
        ``respondents_compared``. Attrs: the results' attrs, and how each number is made.

    Raises
    ------
    DesignError
        No factor ``dim`` or fewer than two levels; human data without ``n`` or without
        some item of the results (naming them); answers without a respondent factor.
    InputTypeError
        ``human`` not a Dataset.

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3] * 25}), ["q"], scale=(1, 3))
    >>> pmf = xr.DataArray([[[0.25, 0.5, 0.25]], [[0.6, 0.3, 0.1]]],
    ...                    dims=("elicitation", "item", "score"),
    ...                    coords={"elicitation": ["stated", "first_token"], "item": ["q"],
    ...                            "score": [1, 2, 3]})
    >>> v = xl.validity(pmf, h)
    >>> str(v.closest.sel(metric="wasserstein").values)
    'stated'
    >>> round(float(v.overall_difference.sel(metric="wasserstein").values[0]), 2)
    -0.5
    """
    if not isinstance(human, xr.Dataset):
        raise InputTypeError(
            f"expected a human PMF Dataset (xl.human_pmf), got {type(human).__name__}"
        )
    p = as_pmf(results)
    factors = factor_dims(p, item_dim=item_dim, score_dim=score_dim)
    if dim not in factors or p.sizes[dim] < 2:
        raise DesignError(
            f"validity compares the levels of the factor {dim!r}; the results have "
            + (
                f"one level {[str(v) for v in p[dim].values]}"
                if dim in factors
                else f"factors {factors}"
            )
            + f": read at least two (e.g. {dim} = ['first_token', 'greedy'])"
        )
    items = [str(i) for i in p[item_dim].values]
    human, unused = check_human(human, items, item_dim)
    population = model_population(p, human, respondent_dim)
    ds = level_distances(population, human, dim, item_dim, score_dim)
    closest = _closest(ds, "overall", "overall_difference_se", dim, lower=True)
    if answers is not None:
        people = respondent_validity(p, answers, dim, missing, respondent_dim, item_dim,
                                     score_dim)  # fmt: skip
        closest = xr.concat(
            [closest, _closest(people, "skill", "skill_difference_se", dim, lower=False)],
            "metric",
        )
        ds = xr.merge([ds, people], join="outer", compat="override")
        ds = ds.reindex(metric=[*DISTANCES, *RESPONDENT_SCORES])
    size_name = ds.attrs.get("sample_size", "n")
    ds = xr.merge([ds, closest], join="outer", compat="override")
    first = [d for d in (*p.dims, *human["pmf"].dims) if d not in (item_dim, score_dim)]
    ds = ds.transpose(*dict.fromkeys(d for d in first if d in ds.dims), ...)
    ds = ds.transpose(..., *[d for d in (item_dim, "pair", "metric") if d in ds.dims])
    attrs = read_attrs(results) if isinstance(results, xr.Dataset) else dict(p.attrs)
    attrs.update(VALIDITY_METHODS, sample_size=size_name, validity_dim=str(dim))
    if unused:
        attrs["human_items_unused"] = unused
    attrs["history"] = f"{attrs.get('history', '')}\nxlikert {__version__}: validity".strip()
    ds.attrs = attrs
    return encode_attrs(ds)
