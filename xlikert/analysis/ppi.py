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
is the original estimator, ``lambda = 0`` the humans alone; the tuned
``lambda = Cov(Y, f) / ((1 + n / N) Var(f))`` (PPI++'s power tuning for a mean: its
``Tr(H^-1 (Cov(g, g_f) + Cov(g_f, g)) H^-1) / (2 (1 + n / N) Tr(H^-1 Var(g_f) H^-1))``
with ``H = 1``, ``g = theta - Y``, ``g_f = theta - f``), clipped to ``[0, 1]`` as the
reference implementation ppi_py does (the default), is never much worse than the
humans alone. Here the model's prediction for a person is exact (its expectation
under the persona's exact PMF, or the probability of a category), so the only noise
is the humans'. The effective sample size ``n Var_n(Y) / Var`` is the number of
respondents alone that would give the same standard error.

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
import numpy.typing as npt
import pandas as pd
import xarray as xr
from scipy.stats import norm

from ..core.errors import DesignError
from ..core.validate import as_pmf
from .individual import answer_distribution, respondent_answers
from .support import nominal_items

__all__ = ["ppi_mean_numpy", "prediction_powered"]

FloatArray = npt.NDArray[np.float64]


def ppi_mean_numpy(
    y: npt.ArrayLike,
    f_labeled: npt.ArrayLike,
    f_unlabeled: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    power_tuning: bool = True,
    clip: bool = True,
) -> dict[str, FloatArray]:
    """The prediction-powered estimate of a mean, and the humans-only one beside it.

    With ``Y`` the ``n`` answers, ``f`` the model's predictions for them and ``f~`` its
    predictions for the ``N`` others (ppi_py's ``ppi_mean_pointestimate`` and
    ``ppi_mean_ci``, whose conventions these are)::

        lambda_raw = Cov_n(Y, f) / ((1 + n / N) Var(f, f~))   (PPI++ power tuning)
        lambda     = clip(lambda_raw, 0, 1)                    (clip=True, as ppi_py)
        theta      = mean(Y - lambda f) + mean(lambda f~)
        Var        = Var_n(Y - lambda f) / n + Var_N(lambda f~) / N

    ``Cov_n`` and ``Var_n``, ``Var_N`` divide by ``n`` and ``N``; ``Var(f, f~)`` is the
    unbiased variance of all ``n + N`` predictions (``lambda_raw = 0`` where it is 0).
    The interval is ``theta +- z Var^(1/2)``; the humans-only estimate is the case
    ``lambda = 0``.

    Parameters
    ----------
    y : array_like
        ``(..., n)``: the answers of the respondents who answered.
    f_labeled : array_like
        ``(..., n)``: the model's predictions for them.
    f_unlabeled : array_like
        ``(..., N)``: the model's predictions for the respondents without an answer.
    confidence : float, keyword-only
        Coverage of the normal intervals.
    power_tuning : bool, keyword-only
        Tune ``lambda`` (PPI++); False: ``lambda = 1`` (the original estimator).
    clip : bool, keyword-only
        Clip the tuned ``lambda`` to ``[0, 1]`` (ppi_py's default): between the humans
        alone and the original estimator. False: the unclipped optimum (which may lie
        far outside where ``n`` is small).

    Returns
    -------
    dict of str to np.ndarray
        ``estimate``, ``se``, ``lower``, ``upper``; ``human_estimate``, ``human_se``,
        ``human_lower``, ``human_upper`` (the respondents alone); ``effective_n``
        (``n Var_n(Y) / Var``: respondents alone for the same SE); ``ppi_lambda`` (the
        ``lambda`` used) and ``ppi_lambda_unclipped`` (the tuned value before clipping;
        1 without tuning).

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
    (0.6835, 0.6667)
    >>> y = np.array([1.0, 2.0, 9.0]); f = np.array([1.0, 2.0, 2.5])
    >>> out = ppi_mean_numpy(y, f, np.array([2.0, 2.1]))
    >>> round(float(out["ppi_lambda_unclipped"]), 3), float(out["ppi_lambda"])
    (2.389, 1.0)
    """
    y, fl, fu = _broadcast_samples(y, f_labeled, f_unlabeled)
    n, big_n = y.shape[-1], fu.shape[-1]
    y_bar, fl_bar = y.mean(-1), fl.mean(-1)
    if power_tuning:
        var_f = np.concatenate([fl, fu], axis=-1).var(-1, ddof=1)
        cov = ((y - y_bar[..., None]) * (fl - fl_bar[..., None])).mean(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            raw = np.where(var_f > 0, cov / ((1.0 + n / big_n) * var_f), 0.0)
    else:
        raw = np.ones_like(y_bar)
    lam = np.clip(raw, 0.0, 1.0) if clip and power_tuning else raw
    estimate = (y - lam[..., None] * fl).mean(-1) + (lam[..., None] * fu).mean(-1)
    var = (y - lam[..., None] * fl).var(-1) / n + (lam[..., None] * fu).var(-1) / big_n
    se, human_se = np.sqrt(var), np.sqrt(y.var(-1) / n)
    z = float(norm.ppf(0.5 + confidence / 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        effective_n = n * human_se**2 / var
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
        "ppi_lambda_unclipped": raw,
    }


def _broadcast_samples(
    y: npt.ArrayLike, f_labeled: npt.ArrayLike, f_unlabeled: npt.ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The three samples as float64 arrays on one leading shape; too few people raise."""
    ya, fl, fu = (np.asarray(a, dtype=np.float64) for a in (y, f_labeled, f_unlabeled))
    n, big_n = ya.shape[-1], fu.shape[-1]
    if n < 2 or big_n < 2:
        raise DesignError(
            f"prediction-powered inference needs at least two answered and two predicted "
            f"respondents, got n={n} answered and N={big_n} predicted"
        )
    lead = np.broadcast_shapes(ya.shape[:-1], fl.shape[:-1], fu.shape[:-1])
    return (
        np.broadcast_to(ya, (*lead, n)),
        np.broadcast_to(fl, (*lead, n)),
        np.broadcast_to(fu, (*lead, big_n)),
    )


def prediction_powered(
    results: xr.Dataset | xr.DataArray,
    answers: pd.DataFrame,
    item: str,
    *,
    category: int | str | None = None,
    labeled: Sequence[Any] | None = None,
    nonsubstantive: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Any] = (),
    confidence: float = 0.95,
    power_tuning: bool = True,
    clip: bool = True,
    squeeze: bool = True,
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
        column per item of ``results``; codes, or the item's labels (as
        :func:`xlikert.analysis.individual.respondent_answers`).
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
    confidence : float, keyword-only
        Coverage of the intervals.
    power_tuning : bool, keyword-only
        PPI++'s tuned ``lambda`` (default) or the original ``lambda = 1``.
    clip : bool, keyword-only
        Clip the tuned ``lambda`` to ``[0, 1]`` (default, as ppi_py); both values are
        kept (:func:`ppi_mean_numpy`).
    squeeze : bool, keyword-only
        Drop the dims of size 1 (one model), keeping their level as a scalar
        coordinate, so that ``float(out.estimate)`` reads the estimate; False: keep them.
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
    one = _item_results(results, pmf, answers, item, respondent_dim, item_dim)
    people = respondent_answers(
        one, answers[[item]], nonsubstantive=nonsubstantive, missing=missing,
        respondent_dim=respondent_dim, item_dim=item_dim, score_dim=score_dim,
    ).isel({item_dim: 0}, drop=True)  # fmt: skip
    lab, unlab = _split(pmf, people, item, labeled, respondent_dim)
    y_people = people.sel({respondent_dim: lab})
    if category is None:
        f, y, estimand = _mean_target(one, y_people, item, lab, item_dim, score_dim)
    else:
        f, y, estimand = _share_target(one, y_people, item, category, item_dim, score_dim)
    lead = [d for d in f.dims if d != respondent_dim]
    f_lab = f.sel({respondent_dim: lab}).transpose(*lead, respondent_dim).values
    f_unlab = f.sel({respondent_dim: unlab}).transpose(*lead, respondent_dim).values
    out = ppi_mean_numpy(
        y.values, f_lab, f_unlab, confidence=confidence, power_tuning=power_tuning, clip=clip
    )
    ds = xr.Dataset({k: (lead, v) for k, v in out.items()}, coords={d: f[d].values for d in lead})
    if squeeze:
        ds = ds.squeeze([d for d in lead if ds.sizes[d] == 1])
    ds.attrs = {
        "n_labeled": len(lab),
        "n_unlabeled": len(unlab),
        "item": str(item),
        "estimand": estimand,
        "confidence": confidence,
        "power_tuning": int(power_tuning),
        "ppi_clip": int(clip),
        "ppi": "Angelopoulos et al. 2023; the model's predictions exact, the SE the humans'",
    }
    return ds


def _item_results(
    results: xr.Dataset | xr.DataArray,
    pmf: xr.DataArray,
    answers: pd.DataFrame,
    item: str,
    respondent_dim: Hashable,
    item_dim: Hashable,
) -> xr.Dataset | xr.DataArray:
    """``results`` at the one item, once it is known to have respondents, the item and a
    column of answers."""
    if respondent_dim not in pmf.dims:
        raise DesignError(
            f"the results have no {respondent_dim!r} factor (dims {list(pmf.dims)}): "
            "prediction-powered inference needs a prediction per person"
        )
    items = [str(i) for i in pmf[item_dim].values]
    if str(item) not in items:
        raise DesignError(f"item {item!r} is not in the results; items: {items}")
    if str(item) not in map(str, answers.columns):
        raise DesignError(f"the answers table has no column for item {item!r}")
    return results.sel({item_dim: [item]})


def _split(
    pmf: xr.DataArray,
    people: xr.Dataset,
    item: str,
    labeled: Sequence[Any] | None,
    respondent_dim: Hashable,
) -> tuple[list[str], list[str]]:
    """The labeled respondents (with an answer) and the others, in the results' order."""
    ids = [str(v) for v in pmf[respondent_dim].values]
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
    return lab, [i for i in ids if i not in lab_set]


def _mean_target(
    one: xr.Dataset | xr.DataArray,
    y_people: xr.Dataset,
    item: str,
    lab: list[str],
    item_dim: Hashable,
    score_dim: Hashable,
) -> tuple[xr.DataArray, xr.DataArray, str]:
    """The model's expected score per person, the people's scores: the item's mean."""
    one_pmf = as_pmf(one)
    if str(item) in nominal_items(one_pmf, item_dim=item_dim):
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
    one_pmf = one_pmf.isel({item_dim: 0}, drop=True)
    f = (one_pmf * one_pmf[score_dim]).sum([score_dim]).reset_coords(drop=True)
    return f, y_people.answer_score, f"mean score of {item!r} among substantive answers"


def _share_target(
    one: xr.Dataset | xr.DataArray,
    y_people: xr.Dataset,
    item: str,
    category: int | str,
    item_dim: Hashable,
    score_dim: Hashable,
) -> tuple[xr.DataArray, xr.DataArray, str]:
    """The model's probability of the category per person, the people's indicators."""
    points, options = answer_distribution(one, item_dim=item_dim, score_dim=score_dim)
    if isinstance(category, str):
        offered = [] if options is None else [str(o) for o in options["option"].values]
        if (
            options is None
            or category not in offered
            or bool(options.sel({item_dim: item, "option": category}).isnull().all())
        ):
            raise DesignError(f"item {item!r} does not offer the option {category!r}")
        f = options.sel(option=category)
        y = (y_people.answer_option == category).astype(float)
    else:
        scores = [int(v) for v in points[score_dim].values]
        lo = int(one.coords["score_min"].item()) if "score_min" in one.coords else scores[0]
        hi = int(one.coords["score_max"].item()) if "score_max" in one.coords else scores[-1]
        if not lo <= int(category) <= hi:
            raise DesignError(f"item {item!r} has no point {category!r}; its scale {lo}..{hi}")
        f = points.sel({score_dim: int(category)})
        y = (y_people.answer_score == int(category)).astype(float)
    f = f.isel({item_dim: 0}, drop=True).reset_coords(drop=True)
    return f, y, f"share of the answer {category!r} to {item!r} among the answers"
