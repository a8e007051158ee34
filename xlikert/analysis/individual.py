"""One respondent at a time: the model's exact PMF scored against each person's answer.

A silicon sample with a persona per respondent (factor ``respondent``, one level per
row of a survey table) gives, for every person and item, the model's exact
distribution over the item's answers. :func:`individual_scores` scores it against
the answer the person gave:

=======================  ==========================================================
``answer_probability``   the probability the model gives to the person's answer
``log_score``            its natural log (0 is perfect; ``-inf`` where it is 0)
``rps``                  the ranked probability score of an ordinal item,
                         ``sum_k (F_k - O_k)^2 / (K - 1)`` over the item's own ``K``
                         points (0 perfect, 1 worst); NaN for a nominal item and
                         for a non-substantive answer
``brier``                ``sum_c (q_c - o_c)^2`` over the item's answers (0..2)
``mode_correct``         1 when the person's answer is the model's most probable
                         one; ``1/m`` when it is one of ``m`` tied modes (the
                         accuracy of a random tie-break; a uniform guess scores
                         ``1/C``)
=======================  ==========================================================

The answers of an item are its own points (``score_min..score_max``) and the
non-substantive options it offers ("Don't know", "Refused"; the results file's
``option`` dim): the model's answer distribution is
``pmf * valid_mass / A`` on the points and ``nonsubstantive_mass / A`` on the options,
``A = valid_mass + sum nonsubstantive_mass`` (failures left out, as a survey's
rate is among the respondents who answered; :func:`xlikert.nonsubstantive_rate`).
So a "Don't know" is scored against the model's "Don't know" mass, and a
substantive answer against its points' share of the answers. The RPS is conditional
on a substantive answer: it is computed on ``pmf``, the item's points only.

These scores are exact on the model's side: they carry no sampling error of the
model. The humans are a sample: :func:`individual_summary` averages them over the
respondents, per item and per group, with the standard error of a mean over
respondents, and compares them with three baselines -- the population's marginal
PMF (the shares of the answers in the whole table), the group persona's PMF (a
results file of group personas, read at each respondent's group) and a uniform
answer -- as skill scores ``(S - S_b) / (S_perfect - S_b)`` (``1 - L / L_b`` for a
loss) with delta-method standard errors of the paired means. A retest of the same
people gives the test-retest ceiling (the share who gave the same answer twice) and
the model's accuracy over it (Park et al. 2024).

Examples
--------
>>> import pandas as pd, xarray as xr
>>> from xlikert.analysis.individual import individual_scores
>>> res = xr.Dataset({"pmf": (("respondent", "item", "score"), [[[0.7, 0.2, 0.1]],
...                                                            [[0.1, 0.1, 0.8]]])},
...                  coords={"respondent": ["a", "b"], "item": ["q"], "score": [1, 2, 3]})
>>> s = individual_scores(res, pd.DataFrame({"q": [1, 2]}, index=["a", "b"]))
>>> s.answer_probability.values.ravel().tolist(), s.mode_correct.values.ravel().tolist()
([0.7, 0.1], [1.0, 0.0])
>>> [round(float(v), 3) for v in s.rps.values.ravel()]
[0.05, 0.325]
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import norm

from ..core.errors import DesignError, InputTypeError
from ..core.validate import as_pmf, check_score_axis
from .support import nominal_items, support_bounds

__all__ = [
    "BASELINES",
    "INDIVIDUAL_SCORES",
    "answer_distribution",
    "individual_scores",
    "individual_summary",
    "respondent_answers",
    "scores_numpy",
]

#: The individual scores, and the value a perfect prediction scores on each.
INDIVIDUAL_SCORES: Mapping[str, float] = {
    "answer_probability": 1.0,
    "log_score": 0.0,
    "rps": 0.0,
    "brier": 0.0,
    "mode_correct": 1.0,
}
#: The baselines of the skill scores, in order.
BASELINES: tuple[str, ...] = ("population", "group_persona", "uniform")
NONSUBSTANTIVE = "nonsubstantive_mass"


# --------------------------------------------------------------------------- kernel
def scores_numpy(
    q_points: np.ndarray,
    q_options: np.ndarray,
    answer_point: np.ndarray,
    answer_option: np.ndarray,
    n_points: np.ndarray,
    ordinal: np.ndarray,
) -> dict[str, np.ndarray]:
    """The individual scores of answer distributions against observed answers.

    Parameters
    ----------
    q_points : np.ndarray
        ``(..., n, J, S)``: the probability of each point of the score axis among the
        answers (0 off an item's support).
    q_options : np.ndarray
        ``(..., n, J, O)``: the probability of each non-substantive option (0 where the
        item does not offer it); ``O`` may be 0.
    answer_point : np.ndarray of int
        ``(n, J)``: the index on the score axis of the person's substantive answer, -1
        where the answer is not substantive or missing.
    answer_option : np.ndarray of int
        ``(n, J)``: the index of the person's non-substantive option, -1 where none.
    n_points : np.ndarray of int
        ``(J,)``: each item's own number of points ``K``.
    ordinal : np.ndarray of bool
        ``(J,)``: whether each item's points are ordered (RPS only there).

    Returns
    -------
    dict of str to np.ndarray
        :data:`INDIVIDUAL_SCORES`, each ``(..., n, J)``; NaN where the person did not
        answer (and ``rps`` where the item is nominal or the answer not substantive).

    Examples
    --------
    >>> import numpy as np
    >>> s = scores_numpy(np.array([[[0.5, 0.3, 0.2]]]), np.zeros((1, 1, 0)),
    ...                  np.array([[1]]), np.array([[-1]]), np.array([3]), np.array([True]))
    >>> round(float(s["brier"][0, 0]), 2), round(float(s["rps"][0, 0]), 3)
    (0.78, 0.145)
    """
    lead = q_points.shape[:-1]
    on_point = answer_point >= 0
    on_option = answer_option >= 0
    answered = np.broadcast_to(on_point | on_option, lead)
    ip = np.broadcast_to(np.maximum(answer_point, 0)[..., None], (*lead, 1))
    p = np.take_along_axis(q_points, ip, axis=-1)[..., 0]
    if q_options.shape[-1]:
        io = np.broadcast_to(np.maximum(answer_option, 0)[..., None], (*lead, 1))
        p = np.where(on_option, np.take_along_axis(q_options, io, axis=-1)[..., 0], p)
        top = np.maximum(q_points.max(-1), q_options.max(-1))
        ties = (q_points == top[..., None]).sum(-1) + (q_options == top[..., None]).sum(-1)
    else:
        top = q_points.max(-1)
        ties = (q_points == top[..., None]).sum(-1)
    brier = (q_points**2).sum(-1) + (q_options**2).sum(-1) - 2.0 * p + 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.log(p)
        cdf = np.cumsum(q_points, axis=-1) / q_points.sum(-1, keepdims=True)
        observed = np.arange(q_points.shape[-1]) >= answer_point[..., None]
        rps = ((cdf - observed) ** 2).sum(-1) / (np.asarray(n_points) - 1)
    out = {
        "answer_probability": p,
        "log_score": log,
        "rps": np.where(on_point & np.asarray(ordinal, dtype=bool), rps, np.nan),
        "brier": brier,
        "mode_correct": (p == top) / ties,
    }
    return {k: np.where(answered, v, np.nan) for k, v in out.items()}


# --------------------------------------------------------------------------- inputs
def answer_distribution(
    results: xr.Dataset | xr.DataArray,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> tuple[xr.DataArray, xr.DataArray | None]:
    """The model's exact distribution over each item's answers, failures left out.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset (or its ``pmf``).
    item_dim, score_dim : hashable, keyword-only
        Names of the item and score dims.

    Returns
    -------
    tuple of xr.DataArray
        ``(points, options)``: ``pmf * valid_mass / A`` over ``score_dim`` and
        ``nonsubstantive_mass / A`` over ``option`` (None without non-substantive
        options; then ``points`` is ``pmf``), ``A = valid_mass + sum nonsubstantive_mass``.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset({"pmf": (("item", "score"), [[0.5, 0.5]]), "valid_mass": ("item", [0.5]),
    ...                  "nonsubstantive_mass": (("item", "option"), [[0.25]])},
    ...                 coords={"item": ["q"], "score": [1, 2], "option": ["Don't know"]})
    >>> points, options = answer_distribution(ds)
    >>> points.values.tolist(), options.values.tolist()
    ([[0.3333333333333333, 0.3333333333333333]], [[0.3333333333333333]])
    """
    pmf = as_pmf(results)
    check_score_axis(pmf, score_dim)
    if not isinstance(results, xr.Dataset) or NONSUBSTANTIVE not in results:
        return pmf, None
    ns = results[NONSUBSTANTIVE]
    answered = results["valid_mass"] + ns.fillna(0.0).sum("option")
    return pmf * results["valid_mass"] / answered, (ns / answered)


def _ids(index: pd.Index) -> np.ndarray:
    return np.asarray([str(v) for v in index], dtype=object)


def _check_table(table: Any, what: str) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise InputTypeError(
            f"expected {what} as a pandas DataFrame, one row per respondent indexed by the "
            f"respondent level, got {type(table).__name__}"
        )
    ids = _ids(table.index)
    dup = pd.Index(ids)[pd.Index(ids).duplicated()].unique().tolist()
    if dup:
        raise DesignError(f"{what} has repeated respondent ids {dup[:5]}; one row per respondent")
    return table


def _decode(
    table: pd.DataFrame,
    rows: np.ndarray,
    items: Sequence[str],
    scores: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    options: Sequence[str],
    offered: np.ndarray,
    nonsubstantive: Mapping[str, Sequence[Any]] | None,
    missing: Sequence[Any],
    what: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's answer to each item: score-axis index and option index (-1: none)."""
    absent = [i for i in items if i not in table.columns]
    if absent:
        raise DesignError(
            f"{what} has no column for items {absent}; its columns: {list(map(str, table.columns))}"
        )
    codes = {str(o): list(c) for o, c in (nonsubstantive or {}).items()}
    unknown = sorted(set(codes) - set(options))
    if unknown:
        raise DesignError(
            f"nonsubstantive options {unknown} are not options of the results "
            f"(its 'option' levels: {list(options)})"
        )
    n, n_items = len(rows), len(items)
    point = np.full((n, n_items), -1, dtype=np.int64)
    option = np.full((n, n_items), -1, dtype=np.int64)
    sub = table.iloc[rows]
    for j, item in enumerate(items):
        col = sub[item]
        is_opt = np.full(n, -1, dtype=np.int64)
        for k, o in enumerate(options):
            hit = col.isin(codes.get(o, [])).to_numpy() | (col.astype(object) == o).to_numpy()
            is_opt[hit] = k
        miss = col.isna().to_numpy() | col.isin(list(missing)).to_numpy()
        num = pd.to_numeric(col.where((is_opt < 0) & ~miss), errors="coerce").to_numpy(float)
        value_bad = (is_opt < 0) & ~miss & (~np.isfinite(num) | (num % 1 != 0) |
                                           (num < lo[j]) | (num > hi[j]))  # fmt: skip
        opt_bad = np.zeros(n, dtype=bool)
        if options:
            opt_bad = (is_opt >= 0) & ~offered[j, np.maximum(is_opt, 0)]
        bad = value_bad | opt_bad
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            values = pd.unique(col.to_numpy(dtype=object)[bad]).tolist()[:5]
            offer = [o for k, o in enumerate(options) if offered[j, k]]
            raise DesignError(
                f"{what}: {int(bad.sum())} answer(s) to item {item!r} are outside the item's "
                f"scale {int(lo[j])}..{int(hi[j])}"
                + (f" and its options {offer}" if offer else "")
                + f": value(s) {values} (first: respondent {_ids(sub.index)[first]!r}); "
                "declare no-answer codes with missing=[...] (or nonsubstantive={option: codes})"
            )
        ok = (is_opt < 0) & ~miss
        point[ok, j] = np.searchsorted(scores, num[ok].astype(np.int64))
        option[:, j] = np.where(miss, -1, is_opt)
    return point, option


def _respondent_rows(table: pd.DataFrame, levels: np.ndarray, what: str) -> np.ndarray:
    """Row positions of ``table`` for each respondent level; a level without a row raises."""
    pos = pd.Index(_ids(table.index)).get_indexer(levels)
    if (pos < 0).any():
        lost = levels[pos < 0].tolist()
        raise DesignError(
            f"{what} has no row for respondents {lost[:5]}{' ...' if len(lost) > 5 else ''} "
            f"({len(lost)} of {len(levels)} respondent levels of the results)"
        )
    return pos


def _persona_pmf(
    da: xr.DataArray, table: pd.DataFrame, persona: Sequence[str], respondent_dim: Hashable
) -> xr.DataArray:
    """Each respondent's group persona: ``da`` read at the row's levels of ``persona``."""
    sel = {}
    for col in persona:
        if col not in table.columns:
            raise DesignError(f"persona column {col!r} is not in the answers table")
        if col not in da.dims:
            raise DesignError(
                f"the group persona results have no factor {col!r}; their dims: {list(da.dims)}"
            )
        values = table[col]
        if values.isna().any():
            first = _ids(table.index)[int(np.flatnonzero(values.isna().to_numpy())[0])]
            raise DesignError(f"persona column {col!r} has no value for respondent {first!r}")
        labels = values.astype(str).to_numpy()
        known = set(map(str, da[col].values))
        bad = sorted(set(labels) - known)
        if bad:
            raise DesignError(
                f"persona column {col!r} holds {bad[:5]}, not levels of the results' factor "
                f"{col!r} ({sorted(known)})"
            )
        sel[col] = xr.DataArray(labels, dims=respondent_dim)
    out = da.assign_coords({c: da[c].astype(str) for c in persona}).sel(sel)
    return out.drop_vars(list(persona)).assign_coords({respondent_dim: _ids(table.index)})


def _layout(
    results: xr.Dataset | xr.DataArray, item_dim: Hashable, score_dim: Hashable
) -> dict[str, Any]:
    pmf = as_pmf(results)
    scores = check_score_axis(pmf, score_dim)
    items = [str(i) for i in np.atleast_1d(pmf[item_dim].values)]
    lo, hi = support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    lo = np.broadcast_to(np.asarray(lo.values), (len(items),)).astype(np.int64)
    hi = np.broadcast_to(np.asarray(hi.values), (len(items),)).astype(np.int64)
    nominal = set(nominal_items(pmf, item_dim=item_dim))
    options: list[str] = []
    offered = np.zeros((len(items), 0), dtype=bool)
    if isinstance(results, xr.Dataset) and NONSUBSTANTIVE in results:
        ns = results[NONSUBSTANTIVE]
        options = [str(o) for o in ns["option"].values]
        keep = [d for d in ns.dims if d not in (item_dim, "option")]
        offered = ns.notnull().any(keep).transpose(item_dim, "option").values
    return {
        "scores": scores,
        "items": items,
        "lo": lo,
        "hi": hi,
        "ordinal": np.array([i not in nominal for i in items]),
        "options": options,
        "offered": offered,
    }


def _to_arrays(
    da: xr.DataArray, last: Hashable, respondent_dim: Hashable, item_dim: Hashable
) -> tuple[np.ndarray, list[Hashable]]:
    lead = [d for d in da.dims if d not in (respondent_dim, item_dim, last)]
    return da.transpose(*lead, respondent_dim, item_dim, last).values, lead


def _score_dataset(
    q_points: xr.DataArray,
    q_options: xr.DataArray | None,
    point: np.ndarray,
    option: np.ndarray,
    lay: dict[str, Any],
    respondent_dim: Hashable,
    item_dim: Hashable,
    score_dim: Hashable,
) -> xr.Dataset:
    qp, lead = _to_arrays(q_points.fillna(0.0), score_dim, respondent_dim, item_dim)
    if q_options is not None and lay["options"]:
        q_options = q_options.broadcast_like(q_points.isel({score_dim: 0}, drop=True))
        qo, _ = _to_arrays(q_options.fillna(0.0), "option", respondent_dim, item_dim)
    else:
        qo = np.zeros((*qp.shape[:-1], 0))
    out = scores_numpy(qp, qo, point, option, lay["hi"] - lay["lo"] + 1, lay["ordinal"])
    coords = {d: q_points[d].values for d in lead}
    coords[respondent_dim] = q_points[respondent_dim].values
    coords[item_dim] = lay["items"]
    dims = (*lead, respondent_dim, item_dim)
    return xr.Dataset({k: (dims, v) for k, v in out.items()}, coords=coords)


# --------------------------------------------------------------------------- public
def respondent_answers(
    results: xr.Dataset | xr.DataArray,
    answers: pd.DataFrame,
    *,
    nonsubstantive: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Any] = (),
    respondent_dim: Hashable = "respondent",
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Every row's answers, checked against each item's own scale and options in ``results``.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset (or its ``pmf``): the items, their supports and options.
    answers : pandas.DataFrame
        One row per respondent (index: the respondent id), a column per item.
    nonsubstantive, missing : keyword-only
        As in :func:`individual_scores`.
    respondent_dim, item_dim, score_dim : hashable, keyword-only
        Names of the respondent, item and score dims.

    Returns
    -------
    xr.Dataset
        ``answer_score (respondent, item)``: the point answered (NaN where the answer is
        not substantive or missing); ``answer_option``: the non-substantive option
        answered ("" where none).

    Raises
    ------
    DesignError
        An item without a column or an answer outside its scale and options.

    Examples
    --------
    >>> import pandas as pd, xarray as xr
    >>> res = xr.DataArray([[0.5, 0.5]], dims=("item", "score"),
    ...                    coords={"item": ["q"], "score": [1, 2]})
    >>> respondent_answers(res, pd.DataFrame({"q": [2, None]})).answer_score.values.tolist()
    [[2.0], [nan]]
    """
    answers = _check_table(answers, "answers")
    lay = _layout(results, item_dim, score_dim)
    point, option = _decode(
        answers, np.arange(len(answers)), lay["items"], lay["scores"], lay["lo"], lay["hi"],
        lay["options"], lay["offered"], nonsubstantive, missing, "answers",
    )  # fmt: skip
    score = np.where(point >= 0, lay["scores"][np.maximum(point, 0)], np.nan)
    names = np.asarray(["", *lay["options"]], dtype=object)[option + 1]
    dims = (respondent_dim, item_dim)
    return xr.Dataset(
        {"answer_score": (dims, score), "answer_option": (dims, names.astype(str))},
        coords={respondent_dim: _ids(answers.index), item_dim: lay["items"]},
    )


def individual_scores(
    results: xr.Dataset | xr.DataArray,
    answers: pd.DataFrame,
    *,
    persona: Sequence[str] = (),
    nonsubstantive: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Any] = (),
    respondent_dim: Hashable = "respondent",
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Each respondent's answer scored against the model's exact PMF for that person.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset (or its ``pmf``) with a ``respondent_dim`` factor, one level per
        person; or, with ``persona``, a results Dataset of group personas whose factors
        are columns of ``answers``. With ``nonsubstantive_mass`` the items' non-substantive
        options are answers too.
    answers : pandas.DataFrame
        One row per respondent, indexed by the respondent level (compared as text), a
        column per item of ``results`` holding the person's answer: a point of the
        item's own scale, or the name of a non-substantive option it offers (or a code
        listed in ``nonsubstantive``); NaN or a code in ``missing``: not answered.
    persona : sequence of str, keyword-only
        Read ``results`` as group personas: each respondent gets the PMF of the persona
        at the row's levels of these columns (every row of ``answers`` is scored).
    nonsubstantive : mapping of str to sequence, keyword-only
        Option name -> the codes that mean it in ``answers`` (e.g. ``{"Don't know": [8]}``).
    missing : sequence, keyword-only
        Codes that mean no answer.
    respondent_dim, item_dim, score_dim : hashable, keyword-only
        Names of the respondent factor and the item and score dims.

    Returns
    -------
    xr.Dataset
        :data:`INDIVIDUAL_SCORES`, each ``(*factors, respondent, item)``; NaN where the
        person did not answer (``rps`` also for nominal items and non-substantive
        answers).

    Raises
    ------
    DesignError
        A respondent level without a row, an item without a column, an answer outside
        the item's scale and options (naming the item, the values and the first
        respondent), a persona level the results do not have.
    InputTypeError
        ``answers`` not a DataFrame.

    Examples
    --------
    >>> import pandas as pd, xarray as xr
    >>> res = xr.Dataset({"pmf": (("respondent", "item", "score"), [[[0.5, 0.5]]])},
    ...                  coords={"respondent": ["7"], "item": ["q"], "score": [1, 2]})
    >>> individual_scores(res, pd.DataFrame({"q": [3]}, index=[7]))
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: answers: 1 answer(s) to item 'q' are outside the item's scale 1..2: value(s) [3] (first: respondent '7'); declare no-answer codes with missing=[...] (or nonsubstantive={option: codes})
    """
    answers = _check_table(answers, "answers")
    lay = _layout(results, item_dim, score_dim)
    q_points, q_options = answer_distribution(results, item_dim=item_dim, score_dim=score_dim)
    if persona:
        persona = [persona] if isinstance(persona, str) else list(persona)
        q_points = _persona_pmf(q_points, answers, persona, respondent_dim)
        if q_options is not None:
            q_options = _persona_pmf(q_options, answers, persona, respondent_dim)
        rows = np.arange(len(answers))
    else:
        if respondent_dim not in q_points.dims:
            raise DesignError(
                f"the results have no {respondent_dim!r} factor (dims {list(q_points.dims)}); "
                "pass persona=[columns] to read group personas at each respondent's levels"
            )
        levels = np.asarray([str(v) for v in q_points[respondent_dim].values], dtype=object)
        rows = _respondent_rows(answers, levels, "answers")
    point, option = _decode(
        answers, rows, lay["items"], lay["scores"], lay["lo"], lay["hi"], lay["options"],
        lay["offered"], nonsubstantive, missing, "answers",
    )  # fmt: skip
    out = _score_dataset(
        q_points, q_options, point, option, lay, respondent_dim, item_dim, score_dim
    )
    out.attrs["individual_scores"] = (
        "exact on the model's side; answer distribution over each item's points and "
        "offered non-substantive options, failures left out"
    )
    return out


def _baseline_distributions(
    lay: dict[str, Any], point_all: np.ndarray, option_all: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The population's marginal and the uniform answer distributions, ``(J, S)`` and ``(J, O)``."""
    n_items, n_scores, n_opt = len(lay["items"]), lay["scores"].size, len(lay["options"])
    counts_p = np.zeros((n_items, n_scores))
    counts_o = np.zeros((n_items, n_opt))
    for j in range(n_items):
        counts_p[j] = np.bincount(point_all[point_all[:, j] >= 0, j], minlength=n_scores)
        if n_opt:
            counts_o[j] = np.bincount(option_all[option_all[:, j] >= 0, j], minlength=n_opt)
    total = counts_p.sum(1, keepdims=True) + counts_o.sum(1, keepdims=True)
    on = (lay["scores"] >= lay["lo"][:, None]) & (lay["scores"] <= lay["hi"][:, None])
    size = on.sum(1, keepdims=True) + lay["offered"].sum(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        population = (counts_p / total, counts_o / total)
    return {"population": population, "uniform": (on / size, lay["offered"] / size)}


class _Groups:
    """Sums over the respondents of each group: one sort, then ``np.add.reduceat``."""

    def __init__(self, codes: np.ndarray, n_groups: int) -> None:
        self.codes = codes
        self.order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=n_groups)
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    def sum(self, x: np.ndarray) -> np.ndarray:
        return np.add.reduceat(x[..., self.order], self.starts, axis=-1)

    def mean(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = ~np.isnan(x)
        n = self.sum(ok.astype(np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sum(np.where(ok, x, 0.0)) / n, n

    def se(self, x: np.ndarray, mean: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The standard error ``sd / sqrt(n)`` (sd with ddof 1) of each group's mean;
        ``mean`` and ``n`` are the group's own (NaN for a group of one)."""
        ok = ~np.isnan(x)
        with np.errstate(invalid="ignore", divide="ignore"):
            dev = np.where(ok, x - mean[..., self.codes], 0.0)
            return np.sqrt(self.sum(dev**2) / (n - 1) / n)


def _summarise(
    scores: np.ndarray,
    baselines: Mapping[str, np.ndarray],
    agree: np.ndarray | None,
    groups: _Groups,
    z: float,
) -> dict[str, np.ndarray]:
    """Means, SEs and skill scores per group; arrays ``(..., metric, respondent)`` in,
    ``(..., metric, group)`` out (baselines broadcast to ``scores``)."""
    perfect = np.asarray(list(INDIVIDUAL_SCORES.values()))[:, None]
    est, n = groups.mean(scores)
    se = groups.se(scores, est, n)
    out = {"estimate": est, "se": se, "lower": est - z * se, "upper": est + z * se, "n": n}
    skill, skill_se, base = [], [], []
    for b in baselines.values():
        ok = ~np.isnan(scores) & ~np.isnan(b)
        mm, bb = np.where(ok, scores, np.nan), np.where(ok, b, np.nan)
        big_m, n_ok = groups.mean(mm)
        big_b, _ = groups.mean(bb)
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = perfect - big_b
            g_m, g_b = 1.0 / gap, (big_m - perfect) / gap**2
            influence = mm * g_m[..., groups.codes] + bb * g_b[..., groups.codes]
            mean_inf, _ = groups.mean(influence)
            skill.append((big_m - big_b) / gap)
            skill_se.append(groups.se(influence, mean_inf, n_ok))
        base.append(big_b)
    if baselines:
        out.update(skill=np.stack(skill, -4), skill_se=np.stack(skill_se, -4),
                   baseline_estimate=np.stack(base, -4))  # fmt: skip
    if agree is not None:
        acc = scores[..., list(INDIVIDUAL_SCORES).index("mode_correct"), :]
        big_r, n_r = groups.mean(agree)
        out["retest_agreement"] = big_r
        out["retest_agreement_se"] = groups.se(agree, big_r, n_r)
        ok = ~np.isnan(acc) & ~np.isnan(agree)
        a, r = np.where(ok, acc, np.nan), np.where(ok, agree, np.nan)
        big_a, n_both = groups.mean(a)
        big_rr, _ = groups.mean(r)
        with np.errstate(invalid="ignore", divide="ignore"):
            inf = a / big_rr[..., groups.codes] - r * (big_a / big_rr**2)[..., groups.codes]
            mean_inf, _ = groups.mean(inf)
            out["normalized_accuracy"] = big_a / big_rr
            out["normalized_accuracy_se"] = groups.se(inf, mean_inf, n_both)
    return out


def individual_summary(
    results: xr.Dataset | xr.DataArray,
    answers: pd.DataFrame,
    *,
    by: Sequence[str] = (),
    persona_results: xr.Dataset | xr.DataArray | None = None,
    persona: Sequence[str] = (),
    retest: pd.DataFrame | None = None,
    nonsubstantive: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Any] = (),
    level: float = 0.95,
    respondent_dim: Hashable = "respondent",
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Individual scores averaged over respondents, per item and group, with skill scores.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset with a ``respondent_dim`` factor (:func:`individual_scores`).
    answers : pandas.DataFrame
        One row per respondent of the population (index: the respondent level), a column
        per item; every row's answers make the population's marginal PMF, the rows of
        the results' respondents are scored.
    by : sequence of str, keyword-only
        Columns of ``answers`` whose levels group the respondents (each a dim of the
        output); empty: every respondent in one group.
    persona_results : xr.Dataset or xr.DataArray, keyword-only
        Group personas (factors named by ``persona``): the ``group_persona`` baseline.
    persona : sequence of str, keyword-only
        The columns of ``answers`` that give each respondent's group persona.
    retest : pandas.DataFrame, keyword-only
        The same people's answers at a retest (same index, the same item columns):
        adds the test-retest ceiling ``retest_agreement`` (share of the respondents who
        gave the same answer twice) and ``normalized_accuracy`` (the model's
        ``mode_correct`` over it), with SEs.
    nonsubstantive, missing : keyword-only
        As in :func:`individual_scores`.
    level : float, keyword-only
        Coverage of the normal intervals ``lower``, ``upper``.
    respondent_dim, item_dim, score_dim : hashable, keyword-only
        Names of the respondent factor and the item and score dims.

    Returns
    -------
    xr.Dataset
        ``estimate``, ``se``, ``lower``, ``upper`` ``(*factors, *by, item, metric)``: the
        mean of each of :data:`INDIVIDUAL_SCORES` over the respondents who answered and
        its standard error ``sd / sqrt(n)`` (the humans' sampling error; the model's side
        is exact); ``n`` the respondents scored; ``skill``, ``skill_se`` and
        ``baseline_estimate`` ``(..., baseline, metric)``: ``(M - B) / (P - B)`` against
        each baseline (``population``, ``group_persona`` with ``persona_results``,
        ``uniform``), ``P`` the perfect score, over the same respondents, with the
        delta-method SE of the paired means; with ``retest``, ``retest_agreement``,
        ``normalized_accuracy`` and their ``_se``.

    Raises
    ------
    DesignError
        As :func:`individual_scores`; a ``by`` column not in the table or with a
        missing value; ``persona_results`` without ``persona``.

    Examples
    --------
    >>> import pandas as pd, xarray as xr
    >>> res = xr.Dataset({"pmf": (("respondent", "item", "score"),
    ...                           [[[0.8, 0.2]], [[0.3, 0.7]], [[0.6, 0.4]]])},
    ...                  coords={"respondent": ["a", "b", "c"], "item": ["q"], "score": [1, 2]})
    >>> t = pd.DataFrame({"q": [1, 2, 2]}, index=["a", "b", "c"])
    >>> s = individual_summary(res, t)
    >>> round(float(s.estimate.sel(item="q", metric="mode_correct")), 3)
    0.667
    >>> round(float(s.skill.sel(item="q", metric="brier", baseline="uniform")), 3)
    0.347
    """
    answers = _check_table(answers, "answers")
    by = [by] if isinstance(by, str) else list(by)
    if persona_results is not None and not persona:
        raise DesignError("persona_results needs persona=[columns] naming each row's persona")
    for col in by:
        if col not in answers.columns:
            raise DesignError(f"group column {col!r} is not in the answers table")
        if answers[col].isna().any():
            raise DesignError(f"group column {col!r} has missing values; give them a level")
    kw = {"item_dim": item_dim, "score_dim": score_dim, "respondent_dim": respondent_dim}
    model = individual_scores(
        results, answers, nonsubstantive=nonsubstantive, missing=missing, **kw
    )
    ids = np.asarray(model[respondent_dim].values, dtype=object)
    lay = _layout(results, item_dim, score_dim)
    everyone = np.arange(len(answers))
    point_all, option_all = _decode(
        answers, everyone, lay["items"], lay["scores"], lay["lo"], lay["hi"], lay["options"],
        lay["offered"], nonsubstantive, missing, "answers",
    )  # fmt: skip
    rows = _respondent_rows(answers, ids, "answers")
    point, option = point_all[rows], option_all[rows]
    baselines: dict[str, xr.DataArray] = {}
    coords = {respondent_dim: ids, item_dim: lay["items"]}
    for name, (qp, qo) in _baseline_distributions(lay, point_all, option_all).items():
        q_points = xr.DataArray(
            np.broadcast_to(qp, (len(ids), *qp.shape)), dims=(respondent_dim, item_dim, score_dim),
            coords={**coords, score_dim: lay["scores"]},
        )  # fmt: skip
        q_options = xr.DataArray(
            np.broadcast_to(qo, (len(ids), *qo.shape)), dims=(respondent_dim, item_dim, "option"),
            coords={**coords, "option": lay["options"]},
        )  # fmt: skip
        baselines[name] = _score_dataset(
            q_points, q_options, point, option, lay, respondent_dim, item_dim, score_dim
        ).to_array("metric")
    if persona_results is not None:
        group = individual_scores(
            persona_results, answers.iloc[rows], persona=persona,
            nonsubstantive=nonsubstantive, missing=missing, **kw,
        )  # fmt: skip
        lost = sorted(set(lay["items"]) - set(map(str, group[item_dim].values)))
        if lost:
            raise DesignError(f"the group persona results have no items {lost}")
        group = group.sel({item_dim: lay["items"]})
        for d in set(group.dims) & set(model.dims) - {respondent_dim, item_dim}:
            if list(map(str, group[d].values)) != list(map(str, model[d].values)):
                raise DesignError(
                    f"the group persona results have other {d!r} levels than the results: "
                    f"{list(map(str, group[d].values))} vs {list(map(str, model[d].values))}"
                )
        baselines = {"population": baselines["population"],
                     "group_persona": group.to_array("metric"),
                     "uniform": baselines["uniform"]}  # fmt: skip
    agree = None
    if retest is not None:
        retest = _check_table(retest, "retest")
        r_rows = _respondent_rows(retest, ids, "retest")
        r_point, r_option = _decode(
            retest, r_rows, lay["items"], lay["scores"], lay["lo"], lay["hi"], lay["options"],
            lay["offered"], nonsubstantive, missing, "retest",
        )  # fmt: skip
        n_scores = lay["scores"].size
        first = np.where(point >= 0, point, np.where(option >= 0, n_scores + option, -1))
        second = np.where(r_point >= 0, r_point, np.where(r_option >= 0, n_scores + r_option, -1))
        both = (first >= 0) & (second >= 0)
        agree = xr.DataArray(
            np.where(both, (first == second).astype(float), np.nan),
            dims=(respondent_dim, item_dim), coords=coords,
        )  # fmt: skip
    z = float(norm.ppf(0.5 + level / 2))
    scores = model.to_array("metric")
    lead = [d for d in scores.dims if d not in (item_dim, "metric", respondent_dim)]
    order = (*lead, item_dim, "metric", respondent_dim)
    scores = scores.transpose(*order)
    base = {k: v.broadcast_like(scores).transpose(*order).values for k, v in baselines.items()}
    if by:
        keys = answers.iloc[rows][by].astype(str)
        levels = keys.drop_duplicates().sort_values(by)
        codes = pd.MultiIndex.from_frame(levels).get_indexer(pd.MultiIndex.from_frame(keys))
        index = pd.MultiIndex.from_frame(levels) if len(by) > 1 else pd.Index(levels[by[0]])
    else:
        codes, index = np.zeros(len(ids), dtype=np.int64), pd.Index(["all"])
    groups = _Groups(np.asarray(codes, dtype=np.int64), len(index))
    agree_v = None
    if agree is not None:
        agree_v = agree.transpose(item_dim, respondent_dim).values
    raw = _summarise(scores.values, base, agree_v, groups, z)
    coords = {d: scores[d].values for d in lead}
    coords.update({item_dim: lay["items"], "metric": list(INDIVIDUAL_SCORES)})
    dims = {
        "skill": (*lead, "baseline", item_dim, "metric", "_group"),
        "retest_agreement": (item_dim, "_group"),
        "retest_agreement_se": (item_dim, "_group"),
        "normalized_accuracy": (*lead, item_dim, "_group"),
        "normalized_accuracy_se": (*lead, item_dim, "_group"),
    }
    dims["skill_se"] = dims["baseline_estimate"] = dims["skill"]
    raw["n"] = raw["n"].max(axis=tuple(range(len(lead)))).astype(np.int64)
    dims["n"] = (item_dim, "metric", "_group")
    data = {k: (dims.get(k, (*lead, item_dim, "metric", "_group")), v) for k, v in raw.items()}
    if baselines:
        coords["baseline"] = list(baselines)
    out = xr.Dataset(data, coords=coords)
    if isinstance(index, pd.MultiIndex):
        out = out.assign_coords(xr.Coordinates.from_pandas_multiindex(index, "_group"))
    else:
        out = out.assign_coords(_group=index)
    if by:
        if len(by) > 1:
            out = out.unstack("_group")
        else:
            out = out.drop_vars("_group").rename_dims(_group=by[0])
            out = out.assign_coords({by[0]: index.to_numpy()})
    else:
        out = out.isel(_group=0, drop=True)
    out = out.transpose(*[d for d in out.dims if d not in ("baseline", item_dim, "metric")],
                        item_dim, ..., "metric")  # fmt: skip
    out.attrs = {
        "level": level,
        "individual_se": "sd / sqrt(n) over respondents: the humans' sampling error; the "
        "model's side is exact",
        "population_baseline": "shares of the answers of every row of the answers table",
    }
    return out
