"""Answers that are not opinions: "Don't know", "Refused", counted apart from the scale.

A survey item may offer non-substantive options. On the model side a results file
holds their exact mass, ``nonsubstantive_mass (*factors, item, option)``, beside the
PMF over the substantive options (:func:`xlikert.analysis.constraint.nonsubstantive_rate`
gives the model's rate among its answers). On the human side :func:`xlikert.human_pmf`
counts the respondents who gave each such code apart from the missing answers and from
the scale:

    n_nonsubstantive       (*groups, item, option)  respondents who gave the option
    nonsubstantive_weight  (*groups, item, option)  their summed survey weights (weighted)
    nonsubstantive_rate    (*groups, item, option)  their (weighted) share of the respondents
                                                    who answered, substantively or not
    n_answered             (*groups, item)          those respondents: the rate's sample
                                                    size (Kish's effective size, weighted)

:func:`nonsubstantive_alignment` compares the two rates, model minus humans, with the
human side's standard error: the binomial ``sqrt(r (1 - r) / N)`` of a proportion, ``N``
the respondents who answered (Kish's effective sample size for a weighted share, the
usual design-effect approximation). The model's rate is exact, so this is the standard
error of the difference. Like every Wald SE it is 0 where the human rate is 0 or 1 (no
respondent, or every one, gave the option): read such rows with their ``n_answered``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import xarray as xr
from scipy.stats import norm

from ..core.errors import DesignError, InputTypeError
from .constraint import nonsubstantive_rate

__all__ = [
    "NONSUBSTANTIVE_HUMAN_VARIABLES",
    "nonsubstantive_alignment",
    "nonsubstantive_variables",
    "pool_nonsubstantive",
]

#: The variables of a human PMF Dataset about non-substantive answers.
NONSUBSTANTIVE_HUMAN_VARIABLES: tuple[str, ...] = (
    "n_nonsubstantive",
    "nonsubstantive_weight",
    "nonsubstantive_rate",
    "n_answered",
)


def nonsubstantive_variables(
    counts: xr.DataArray,
    weights: xr.DataArray | None,
    n: xr.DataArray | None,
    weight: xr.DataArray | None,
    w2: xr.DataArray | None,
    *,
    offered: xr.DataArray | None = None,
) -> dict[str, xr.DataArray]:
    """The non-substantive variables of a human PMF Dataset, from one table's sums.

    Parameters
    ----------
    counts : xr.DataArray
        Respondents who gave each option, ``(*groups, item, option)``.
    weights : xr.DataArray or None
        Their summed survey weights (None: unweighted).
    n : xr.DataArray
        Respondents who answered substantively, ``(*groups, item)``.
    weight : xr.DataArray or None
        Their summed weights (None: unweighted).
    w2 : xr.DataArray or None
        The summed squared weights of every respondent who answered, substantively or
        not (None: unweighted).
    offered : xr.DataArray of bool, keyword-only
        Whether each item offers each option, ``(item, option)`` (None: every item):
        where it does not, the rate is NaN, as in a results file, not 0.

    Returns
    -------
    dict of str to xr.DataArray
        ``n_nonsubstantive``, ``nonsubstantive_rate``, ``n_answered`` (and
        ``nonsubstantive_weight`` when weighted).

    Examples
    --------
    >>> import xarray as xr
    >>> out = nonsubstantive_variables(
    ...     xr.DataArray([[1]], dims=("item", "option")), None, xr.DataArray([3], dims="item"),
    ...     None, None)
    >>> float(out["nonsubstantive_rate"][0, 0]), int(out["n_answered"][0])
    (0.25, 4)
    """
    out = {"n_nonsubstantive": counts.astype(np.int64)}
    if weights is None:
        assert n is not None, "counts: n answered"
        answered = n + counts.sum("option")
        out["nonsubstantive_rate"] = counts / answered
        out["n_answered"] = answered.astype(np.int64)
    else:
        assert weight is not None and w2 is not None, "weights: their totals"
        total = weight + weights.sum("option")
        out["nonsubstantive_weight"] = weights
        out["nonsubstantive_rate"] = weights / total
        out["n_answered"] = total**2 / w2
    if offered is not None:
        out["nonsubstantive_rate"] = out["nonsubstantive_rate"].where(offered)
    return out


def pool_nonsubstantive(human: xr.Dataset, dims: Sequence[Hashable]) -> dict[str, xr.DataArray]:
    """The non-substantive variables of ``human`` pooled over the group ``dims``.

    The pooled rate is the share of the pooled respondents (their weights when
    weighted); Kish's effective size pools as ``(sum W)^2 / sum (W^2 / n_answered)``,
    ``W`` the groups' summed weights of the respondents who answered.

    Parameters
    ----------
    human : xr.Dataset
        A human PMF Dataset with ``n_nonsubstantive`` (:func:`xlikert.human_pmf`).
    dims : sequence of hashable
        The group dims to pool over.

    Returns
    -------
    dict of str to xr.DataArray
        The pooled variables (empty when ``human`` has none).

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> t = pd.DataFrame({"g": ["a", "a", "b", "b"], "q": [1, 8, 2, 2]})
    >>> h = xl.human_pmf(t, ["q"], scale=(1, 2), by=["g"], nonsubstantive={"Don't know": [8]})
    >>> float(pool_nonsubstantive(h, ["g"])["nonsubstantive_rate"].squeeze())
    0.25
    """
    if "n_nonsubstantive" not in human:
        return {}
    counts = human["n_nonsubstantive"].sum(dims)
    offered = human["nonsubstantive_rate"].notnull().any(dims)  # NaN: the item does not offer it
    if "nonsubstantive_weight" not in human:
        return nonsubstantive_variables(
            counts, None, human["n"].sum(dims), None, None, offered=offered
        )
    total = human["weight"] + human["nonsubstantive_weight"].sum("option")
    w2 = (total**2 / human["n_answered"]).sum(dims)
    return nonsubstantive_variables(
        counts, human["nonsubstantive_weight"].sum(dims), None, human["weight"].sum(dims), w2,
        offered=offered,
    )  # fmt: skip


def nonsubstantive_alignment(
    model: xr.Dataset, human: xr.Dataset, *, confidence: float = 0.95
) -> xr.Dataset:
    """Model minus human non-substantive rates, with the human side's standard error.

    Parameters
    ----------
    model : xr.Dataset
        A results Dataset with ``valid_mass`` and ``nonsubstantive_mass``.
    human : xr.Dataset
        A human PMF Dataset with ``nonsubstantive_rate`` and ``n_answered``
        (:func:`xlikert.human_pmf` with ``nonsubstantive=``), with the same options.
    confidence : float, keyword-only
        Coverage of the Wald interval.

    Returns
    -------
    xr.Dataset
        ``nonsubstantive_model``, ``nonsubstantive_human``, ``nonsubstantive_difference``
        (model minus humans), ``nonsubstantive_se`` (binomial, of the human rate),
        ``nonsubstantive_lower``, ``nonsubstantive_upper``, dims ``(*dims, item, option)``;
        NaN where an item does not offer the option.

    Raises
    ------
    DesignError
        Either side without non-substantive answers, or options only one side has.
    InputTypeError
        ``model`` or ``human`` not a Dataset.

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> from xlikert.analysis.nonsubstantive import nonsubstantive_alignment
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2, 8, 2]}), ["q"], scale=(1, 2),
    ...                  nonsubstantive={"Don't know": [8]})
    >>> m = xr.Dataset({"valid_mass": ("item", [0.9]),
    ...                 "nonsubstantive_mass": (("item", "option"), [[0.1]])},
    ...                coords={"item": ["q"], "option": ["Don't know"]})
    >>> a = nonsubstantive_alignment(m, h).squeeze()
    >>> round(float(a.nonsubstantive_difference), 3), round(float(a.nonsubstantive_se), 3)
    (-0.15, 0.217)
    """
    if not isinstance(human, xr.Dataset):
        raise InputTypeError(f"expected a human PMF Dataset, got {type(human).__name__}")
    if "nonsubstantive_rate" not in human:
        raise DesignError(
            "the human data count no non-substantive answers: pass xl.human_pmf(..., "
            "nonsubstantive={'Don't know': [codes]})"
        )
    p = nonsubstantive_rate(model)
    q = human["nonsubstantive_rate"]
    only_m = sorted(set(map(str, p["option"].values)) - set(map(str, q["option"].values)))
    only_h = sorted(set(map(str, q["option"].values)) - set(map(str, p["option"].values)))
    if only_m or only_h:
        raise DesignError(
            f"the model and the human data have different non-substantive options: model only "
            f"{only_m}, human only {only_h}; select common ones with .sel(option=[...])"
        )
    q = q.sel(option=p["option"].values)
    se = np.sqrt(q * (1.0 - q) / human["n_answered"])
    diff = p - q
    z = float(norm.ppf(0.5 + confidence / 2))
    ds = xr.Dataset(
        {
            "nonsubstantive_model": p,
            "nonsubstantive_human": q,
            "nonsubstantive_difference": diff,
            "nonsubstantive_se": se,
            "nonsubstantive_lower": np.maximum(diff - z * se, -1.0),
            "nonsubstantive_upper": np.minimum(diff + z * se, 1.0),
        }
    )
    ds = ds.transpose(..., *[d for d in ("item", "option") if d in ds.dims])
    ds["nonsubstantive_se"].attrs["long_name"] = (
        "binomial standard error of the human rate, sqrt(r (1 - r) / N), N the respondents "
        "who answered (Kish effective size when weighted); the model's rate is exact; a human "
        "rate of 0 or 1 has SE 0 (Wald)"
    )
    ds.attrs = {"confidence": confidence, "nonsubstantive_rate": "share among the answers (failures and "
                "missing answers left out)"}  # fmt: skip
    return ds
