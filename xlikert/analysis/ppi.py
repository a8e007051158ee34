"""Population estimates that combine models and people: prediction-powered inference.

Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic 2023,
"Prediction-powered inference", Science 382; with the power tuning of Angelopoulos,
Duchi and Zrnic 2023, "PPI++") estimates a population mean from ``n`` respondents who
answered and ``N`` who were only predicted. With ``Y`` a person's answer and ``f`` the
model's prediction for that person,

    theta = mean_n(Y) + lambda (mean_N(f) - mean_n(f))
    Var   = Var_n(Y - lambda f) / n + lambda^2 Var_N(f) / N

and the interval ``theta +- z sqrt(Var)`` covers the population mean whatever the
model's bias: the model only narrows it where it predicts the people. ``lambda = 1``
is the original estimator; the tuned ``lambda = Cov(Y, f) / ((1 + n / N) Var(f))``
(the default) is never much worse than the humans alone. Here the model's prediction
for a person is exact (its expectation under the persona's exact PMF, or the
probability of a category), so the only noise is the humans'. The effective sample
size ``Var(Y) / Var`` is the number of respondents alone that would give the same
standard error.

Examples
--------
>>> import numpy as np
>>> from xlikert.analysis.ppi import ppi_mean_numpy
>>> y = np.array([1.0, 2.0, 3.0, 4.0]); f = y + 0.5
>>> out = ppi_mean_numpy(y, f, np.linspace(1.5, 5.5, 41), power_tuning=False)
>>> float(out["estimate"]), float(out["se"]) < float(out["human_se"])
(3.0, True)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import norm

from ..core.errors import DesignError
from ..core.validate import as_pmf
from .individual import answer_distribution, respondent_answers
from .support import nominal_items

__all__ = ["ppi_mean_numpy", "prediction_powered"]


def ppi_mean_numpy(
    y: np.ndarray,
    f_labeled: np.ndarray,
    f_unlabeled: np.ndarray,
    *,
    level: float = 0.95,
    power_tuning: bool = True,
) -> dict[str, np.ndarray]:
    """The prediction-powered estimate of a mean, and the humans-only one beside it.

    Parameters
    ----------
    y : np.ndarray
        ``(..., n)``: the answers of the respondents who answered.
    f_labeled : np.ndarray
        ``(..., n)``: the model's predictions for them.
    f_unlabeled : np.ndarray
        ``(..., N)``: the model's predictions for the respondents without an answer.
    level : float, keyword-only
        Coverage of the normal intervals.
    power_tuning : bool, keyword-only
        Tune ``lambda`` (PPI++); False: ``lambda = 1`` (the original estimator).

    Returns
    -------
    dict of str to np.ndarray
        ``estimate``, ``se``, ``lower``, ``upper``; ``human_estimate``, ``human_se``,
        ``human_lower``, ``human_upper`` (the respondents alone); ``effective_n``
        (``Var(Y) / Var``: respondents alone for the same SE); ``ppi_lambda``.

    Raises
    ------
    DesignError
        Fewer than two answered or two predicted respondents.

    Examples
    --------
    >>> import numpy as np
    >>> out = ppi_mean_numpy(np.array([0.0, 1.0, 1.0]), np.array([0.2, 0.8, 0.7]),
    ...                      np.array([0.3, 0.9]))
    >>> round(float(out["estimate"]), 4), round(float(out["human_estimate"]), 4)
    (0.6919, 0.6667)
    """
    y, fl, fu = (np.asarray(a, dtype=np.float64) for a in (y, f_labeled, f_unlabeled))
    n, big_n = y.shape[-1], fu.shape[-1]
    lead = np.broadcast_shapes(y.shape[:-1], fl.shape[:-1], fu.shape[:-1])
    y, fl = np.broadcast_to(y, (*lead, n)), np.broadcast_to(fl, (*lead, n))
    fu = np.broadcast_to(fu, (*lead, big_n))
    if n < 2 or big_n < 2:
        raise DesignError(
            f"prediction-powered inference needs at least two answered and two predicted "
            f"respondents, got n={n} answered and N={big_n} predicted"
        )
    y_bar, fl_bar, fu_bar = y.mean(-1), fl.mean(-1), fu.mean(-1)
    var_y = y.var(-1, ddof=1)
    if power_tuning:
        var_f = np.concatenate([fl, fu], axis=-1).var(-1, ddof=1)
        cov = ((y - y_bar[..., None]) * (fl - fl_bar[..., None])).sum(-1) / (n - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            lam = np.where(var_f > 0, cov / ((1.0 + n / big_n) * var_f), 0.0)
    else:
        lam = np.ones_like(y_bar)
    estimate = y_bar + lam * (fu_bar - fl_bar)
    var = (y - lam[..., None] * fl).var(-1, ddof=1) / n + lam**2 * fu.var(-1, ddof=1) / big_n
    se, human_se = np.sqrt(var), np.sqrt(var_y / n)
    z = float(norm.ppf(0.5 + level / 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        effective_n = var_y / var
    return {
        "estimate": estimate,
        "se": se,
        "lower": estimate - z * se,
        "upper": estimate + z * se,
        "human_estimate": y_bar,
        "human_se": human_se,
        "human_lower": y_bar - z * human_se,
        "human_upper": y_bar + z * human_se,
        "effective_n": effective_n,
        "ppi_lambda": lam,
    }


def prediction_powered(
    results: xr.Dataset | xr.DataArray,
    answers: pd.DataFrame,
    item: str,
    *,
    category: int | str | None = None,
    labeled: Sequence[Any] | None = None,
    nonsubstantive: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Any] = (),
    level: float = 0.95,
    power_tuning: bool = True,
    respondent_dim: Hashable = "respondent",
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """An item's population mean, or a category's share, from people and exact predictions.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset with a ``respondent_dim`` factor, one level per person of the
        population (answered or not).
    answers : pandas.DataFrame
        The people's answers: one row per respondent (index: the respondent level), a
        column per item of ``results``.
    item : str
        The item.
    category : int or str, keyword-only
        Estimate the share of this answer (a point of the item, or a non-substantive
        option it offers) among the answers; None: the item's mean score (ordinal
        items, substantive answers).
    labeled : sequence, keyword-only
        The respondents whose answers are used (the others are predicted only); None:
        every respondent of ``results`` with an answer in ``answers``.
    nonsubstantive, missing : keyword-only
        As in :func:`xlikert.analysis.individual.individual_scores`.
    level : float, keyword-only
        Coverage of the intervals.
    power_tuning : bool, keyword-only
        PPI++'s tuned ``lambda`` (default) or the original ``lambda = 1``.
    respondent_dim, item_dim, score_dim : hashable, keyword-only
        Names of the respondent factor and the item and score dims.

    Returns
    -------
    xr.Dataset
        Over the other factors of ``results`` (the model): the variables of
        :func:`ppi_mean_numpy`; attrs ``n_labeled``, ``n_unlabeled``, ``item``,
        ``estimand``. The model's predictions are exact: ``se`` is the humans'
        sampling error, narrowed where the model predicts them.

    Raises
    ------
    DesignError
        No ``respondent_dim``; a labeled respondent without a row, without an answer,
        or (for a mean) with a non-substantive answer; a mean of a nominal item; a
        category the item does not offer; fewer than two answered or predicted.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> pmf = np.array([[[0.8, 0.2]], [[0.3, 0.7]], [[0.6, 0.4]], [[0.1, 0.9]], [[0.5, 0.5]]])
    >>> res = xr.Dataset({"pmf": (("respondent", "item", "score"), pmf)},
    ...                  coords={"respondent": list("abcde"), "item": ["q"], "score": [1, 2]})
    >>> t = pd.DataFrame({"q": [1, 2, 1, None, None]}, index=list("abcde"))
    >>> out = prediction_powered(res, t, "q", power_tuning=False)
    >>> round(float(out.estimate), 4), out.attrs["n_labeled"], out.attrs["n_unlabeled"]
    (1.6, 3, 2)
    """
    pmf = as_pmf(results)
    if respondent_dim not in pmf.dims:
        raise DesignError(
            f"the results have no {respondent_dim!r} factor (dims {list(pmf.dims)}): "
            "prediction-powered inference needs a prediction per person"
        )
    items = [str(i) for i in pmf[item_dim].values]
    if str(item) not in items:
        raise DesignError(f"item {item!r} is not in the results; items: {items}")
    one = results.sel({item_dim: [item]})
    if str(item) not in map(str, answers.columns):
        raise DesignError(f"the answers table has no column for item {item!r}")
    people = respondent_answers(
        one, answers[[item]], nonsubstantive=nonsubstantive, missing=missing,
        respondent_dim=respondent_dim, item_dim=item_dim, score_dim=score_dim,
    ).isel({item_dim: 0}, drop=True)  # fmt: skip
    ids = np.asarray([str(v) for v in pmf[respondent_dim].values], dtype=object)
    have = people.answer_score.notnull() | (people.answer_option != "")
    answered_ids = set(np.asarray(people[respondent_dim].values)[have.values])
    if labeled is None:
        lab = [i for i in ids if i in answered_ids]
    else:
        lab = [str(v) for v in labeled]
        not_resp = sorted(set(lab) - set(ids))
        no_answer = sorted(set(lab) - answered_ids)
        if not_resp or no_answer:
            raise DesignError(
                f"labeled respondents must be respondents of the results with an answer to "
                f"{item!r}: not respondents {not_resp[:5]}, without an answer {no_answer[:5]}"
            )
    lab_set = set(lab)
    unlab = [i for i in ids if i not in lab_set]
    y_people = people.sel({respondent_dim: lab})
    points, options = answer_distribution(one, item_dim=item_dim, score_dim=score_dim)
    if category is None:
        if str(item) in nominal_items(pmf, item_dim=item_dim):
            raise DesignError(
                f"item {item!r} is nominal: its mean has no meaning; estimate a category's "
                "share with category=..."
            )
        dk = np.asarray(y_people.answer_option.values) != ""
        if dk.any():
            raise DesignError(
                f"a mean needs substantive answers, but labeled respondents "
                f"{np.asarray(lab, dtype=object)[dk][:5].tolist()} answered "
                f"{sorted(set(y_people.answer_option.values[dk]))}; leave them out of labeled= "
                "or estimate a category's share"
            )
        one_pmf = as_pmf(one).isel({item_dim: 0}, drop=True)
        f = (one_pmf * one_pmf[score_dim]).sum([score_dim])
        y = y_people.answer_score
        estimand = f"mean score of {item!r} among substantive answers"
    else:
        if isinstance(category, str):
            offered = [] if options is None else [str(o) for o in options["option"].values]
            if (
                options is None
                or category not in offered
                or bool(options.sel({item_dim: item, "option": category}).isnull().all())
            ):
                raise DesignError(f"item {item!r} does not offer the option {category!r}")
            f = options.sel(option=category).isel({item_dim: 0}, drop=True)
            y = (y_people.answer_option == category).astype(float)
        else:
            scores = [int(v) for v in pmf[score_dim].values]
            lo = int(one.coords["score_min"].item()) if "score_min" in one.coords else scores[0]
            hi = int(one.coords["score_max"].item()) if "score_max" in one.coords else scores[-1]
            if not lo <= int(category) <= hi:
                raise DesignError(f"item {item!r} has no point {category!r}; its scale {lo}..{hi}")
            f = points.sel({score_dim: int(category)}).isel({item_dim: 0}, drop=True)
            y = (y_people.answer_score == int(category)).astype(float)
        estimand = f"share of the answer {category!r} to {item!r} among the answers"
    f = f.reset_coords(drop=True)
    lead = [d for d in f.dims if d != respondent_dim]
    f_lab = f.sel({respondent_dim: lab}).transpose(*lead, respondent_dim).values
    f_unlab = f.sel({respondent_dim: unlab}).transpose(*lead, respondent_dim).values
    out = ppi_mean_numpy(y.values, f_lab, f_unlab, level=level, power_tuning=power_tuning)
    ds = xr.Dataset({k: (lead, v) for k, v in out.items()}, coords={d: f[d].values for d in lead})
    ds.attrs = {
        "n_labeled": len(lab),
        "n_unlabeled": len(unlab),
        "item": str(item),
        "estimand": estimand,
        "level": level,
        "power_tuning": int(power_tuning),
        "ppi": "Angelopoulos et al. 2023; the model's predictions exact, the SE the humans'",
    }
    return ds
