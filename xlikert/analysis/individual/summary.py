"""The individual scores averaged over the respondents, per item and group, with standard
errors, the skill over the baselines (:data:`BASELINES`) and the test-retest ceiling.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr
from scipy.stats import norm

from ...core.errors import DesignError
from .answers import answer_layout, check_answer_table, decode_answers, respondent_rows
from .scores import INDIVIDUAL_SCORES, individual_scores, score_dataset

__all__ = ["BASELINES", "individual_summary"]

#: The baselines of the skill scores, in order.
BASELINES: tuple[str, ...] = ("population", "group_persona", "uniform")


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
        out: np.ndarray = np.add.reduceat(x[..., self.order], self.starts, axis=-1)
        return out

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
            se: np.ndarray = np.sqrt(self.sum(dev**2) / (n - 1) / n)
        return se


def _summary_numpy(
    scores: npt.NDArray[np.float64],
    baselines: Mapping[str, npt.NDArray[np.float64]],
    agree: npt.NDArray[np.float64] | None,
    codes: npt.NDArray[np.int64],
    n_groups: int,
    *,
    z: float,
) -> dict[str, npt.NDArray[np.float64]]:
    """Means, SEs and skill scores per group (the numpy core of :func:`individual_summary`).

    Parameters
    ----------
    scores : np.ndarray
        ``(..., item, metric, respondent)``: the individual scores, the metrics those of
        :data:`INDIVIDUAL_SCORES` in order (NaN: not scored).
    baselines : mapping of str to np.ndarray
        Each baseline's scores, the shape of ``scores``.
    agree : np.ndarray or None
        ``(item, respondent)``: 1 where the retest answer was the same, 0 where not.
    codes : np.ndarray of int
        ``(respondent,)``: each respondent's group, ``0..n_groups-1``.
    n_groups : int
        The number of groups.
    z : float, keyword-only
        The normal quantile of the intervals.

    Returns
    -------
    dict of str to np.ndarray
        ``estimate``, ``se``, ``lower``, ``upper``, ``n`` ``(..., item, metric, group)``;
        ``skill``, ``skill_se``, ``baseline_estimate`` ``(..., baseline, item, metric,
        group)`` with baselines; with ``agree``, ``retest_agreement`` and ``normalized_accuracy``
        and their ``_se``.

    Examples
    --------
    >>> import numpy as np
    >>> s = np.array([[[0.5, 0.7, 0.9]] * 5])  # one item, five metrics, three people
    >>> out = _summary_numpy(s, {"uniform": np.full_like(s, 0.5)}, None,
    ...                     np.array([0, 0, 1]), 2, z=1.96)
    >>> out["estimate"][0, 0].round(3).tolist(), out["n"][0, 0].tolist()
    ([0.6, 0.9], [2.0, 1.0])
    >>> round(float(out["skill"][0, 0, 0, 0]), 3)  # (0.6 - 0.5) / (1 - 0.5)
    0.2
    """
    groups = _Groups(np.asarray(codes, dtype=np.int64), n_groups)
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
    confidence: float = 0.95,
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
    confidence : float, keyword-only
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
    answers = check_answer_table(answers, "answers")
    by = _check_by(answers, by, persona_results, persona)
    dims = _DimNames(respondent_dim, item_dim, score_dim)
    model = individual_scores(
        results, answers, nonsubstantive=nonsubstantive, missing=missing,
        respondent_dim=respondent_dim, item_dim=item_dim, score_dim=score_dim,
    )  # fmt: skip
    ids = np.asarray(model[respondent_dim].values, dtype=object)
    lay = answer_layout(results, item_dim, score_dim)
    point_all, option_all = decode_answers(
        answers, np.arange(len(answers)), lay["items"], lay["scores"], lay["lo"], lay["hi"],
        lay["options"], lay["offered"], nonsubstantive, missing, "answers", lay["labels"],
    )  # fmt: skip
    rows = respondent_rows(answers, ids, "answers")
    point, option = point_all[rows], option_all[rows]
    baselines = _fixed_baselines(lay, point_all, option_all, point, option, ids, dims)
    persona_note = ""
    if persona_results is not None:
        group = individual_scores(
            persona_results, answers.iloc[rows], persona=persona, nonsubstantive=nonsubstantive,
            missing=missing, respondent_dim=respondent_dim, item_dim=item_dim,
            score_dim=score_dim,
        )  # fmt: skip
        persona_note = str(group.attrs.get("group_persona_left_out", ""))
        baselines = {"population": baselines["population"],
                     "group_persona": _group_baseline(group, model, lay, dims),
                     "uniform": baselines["uniform"]}  # fmt: skip
    agree = None
    if retest is not None:
        agree = (
            _retest_agreement(retest, ids, lay, point, option, nonsubstantive, missing, dims)
            .transpose(item_dim, respondent_dim)
            .values
        )
    scores = model.to_array("metric")
    lead = [d for d in scores.dims if d not in (item_dim, "metric", respondent_dim)]
    order = (*lead, item_dim, "metric", respondent_dim)
    scores = scores.transpose(*order)
    base = {k: v.broadcast_like(scores).transpose(*order).values for k, v in baselines.items()}
    codes, index = _group_codes(answers.iloc[rows], by)
    z = float(norm.ppf(0.5 + confidence / 2))
    raw = _summary_numpy(scores.values, base, agree, codes, len(index), z=z)
    out = _summary_dataset(raw, scores, lead, lay, list(baselines), index, by, item_dim)
    out.attrs = {
        "confidence": confidence,
        "individual_se": "sd / sqrt(n) over respondents: the humans' sampling error; the "
        "model's side is exact",
        "population_baseline": "shares of the answers of every row of the answers table",
    }
    if persona_note:
        out.attrs["group_persona_left_out"] = persona_note
    return out


class _DimNames(NamedTuple):
    """The names of the respondent, item and score dims."""

    respondent: Hashable
    item: Hashable
    score: Hashable


def _check_by(
    answers: pd.DataFrame,
    by: Sequence[str] | str,
    persona_results: xr.Dataset | xr.DataArray | None,
    persona: Sequence[str],
) -> list[str]:
    """The group columns, checked: in the table, without missing values."""
    cols = [by] if isinstance(by, str) else list(by)
    if persona_results is not None and not persona:
        raise DesignError("persona_results needs persona=[columns] naming each row's persona")
    for col in cols:
        if col not in answers.columns:
            raise DesignError(f"group column {col!r} is not in the answers table")
        if answers[col].isna().any():
            raise DesignError(f"group column {col!r} has missing values; give them a level")
    return cols


def _fixed_baselines(
    lay: dict[str, Any],
    point_all: npt.NDArray[np.int64],
    option_all: npt.NDArray[np.int64],
    point: npt.NDArray[np.int64],
    option: npt.NDArray[np.int64],
    ids: npt.NDArray[Any],
    dims: _DimNames,
) -> dict[str, xr.DataArray]:
    """The population and uniform baselines' scores ``(metric, respondent, item)``."""
    out: dict[str, xr.DataArray] = {}
    coords = {dims.respondent: ids, dims.item: lay["items"]}
    for name, (qp, qo) in _baseline_distributions(lay, point_all, option_all).items():
        q_points = xr.DataArray(
            np.broadcast_to(qp, (len(ids), *qp.shape)),
            dims=(dims.respondent, dims.item, dims.score),
            coords={**coords, dims.score: lay["scores"]},
        )
        q_options = xr.DataArray(
            np.broadcast_to(qo, (len(ids), *qo.shape)),
            dims=(dims.respondent, dims.item, "option"),
            coords={**coords, "option": lay["options"]},
        )
        out[name] = score_dataset(
            q_points, q_options, point, option, lay, dims.respondent, dims.item, dims.score
        ).to_array("metric")
    return out


def _group_baseline(
    group: xr.Dataset, model: xr.Dataset, lay: dict[str, Any], dims: _DimNames
) -> xr.DataArray:
    """The group personas' scores, checked against the results' items and factor levels."""
    lost = sorted(set(lay["items"]) - set(map(str, group[dims.item].values)))
    if lost:
        raise DesignError(f"the group persona results have no items {lost}")
    group = group.sel({dims.item: lay["items"]})
    for d in set(group.dims) & set(model.dims) - {dims.respondent, dims.item}:
        if list(map(str, group[d].values)) != list(map(str, model[d].values)):
            raise DesignError(
                f"the group persona results have other {d!r} levels than the results: "
                f"{list(map(str, group[d].values))} vs {list(map(str, model[d].values))}"
            )
    return group.to_array("metric")


def _retest_agreement(
    retest: pd.DataFrame,
    ids: npt.NDArray[Any],
    lay: dict[str, Any],
    point: npt.NDArray[np.int64],
    option: npt.NDArray[np.int64],
    nonsubstantive: Mapping[str, Sequence[Any]] | None,
    missing: Sequence[Any],
    dims: _DimNames,
) -> xr.DataArray:
    """1 where a respondent gave the same answer at the retest, 0 where not, NaN where
    either is missing: ``(respondent, item)``."""
    retest = check_answer_table(retest, "retest")
    r_rows = respondent_rows(retest, ids, "retest")
    r_point, r_option = decode_answers(
        retest, r_rows, lay["items"], lay["scores"], lay["lo"], lay["hi"], lay["options"],
        lay["offered"], nonsubstantive, missing, "retest", lay["labels"],
    )  # fmt: skip
    n_scores = lay["scores"].size
    first = np.where(point >= 0, point, np.where(option >= 0, n_scores + option, -1))
    second = np.where(r_point >= 0, r_point, np.where(r_option >= 0, n_scores + r_option, -1))
    both = (first >= 0) & (second >= 0)
    return xr.DataArray(
        np.where(both, (first == second).astype(float), np.nan),
        dims=(dims.respondent, dims.item),
        coords={dims.respondent: ids, dims.item: lay["items"]},
    )


def _group_codes(table: pd.DataFrame, by: list[str]) -> tuple[npt.NDArray[np.int64], pd.Index]:
    """Each row's group (an index into the groups) and the groups' index."""
    if not by:
        return np.zeros(len(table), dtype=np.int64), pd.Index(["all"])
    keys = table[by].astype(str)
    levels = keys.drop_duplicates().sort_values(by)
    codes = pd.MultiIndex.from_frame(levels).get_indexer(pd.MultiIndex.from_frame(keys))
    index = pd.MultiIndex.from_frame(levels) if len(by) > 1 else pd.Index(levels[by[0]])
    return np.asarray(codes, dtype=np.int64), index


def _summary_dataset(
    raw: dict[str, npt.NDArray[np.float64]],
    scores: xr.DataArray,
    lead: list[Hashable],
    lay: dict[str, Any],
    baselines: list[str],
    index: pd.Index,
    by: list[str],
    item_dim: Hashable,
) -> xr.Dataset:
    """The Dataset of :func:`individual_summary` from :func:`_summary_numpy`'s arrays."""
    coords: dict[Hashable, Any] = {d: scores[d].values for d in lead}
    coords.update({item_dim: lay["items"], "metric": list(INDIVIDUAL_SCORES)})
    dims: dict[str, tuple[Hashable, ...]] = {
        "skill": (*lead, "baseline", item_dim, "metric", "_group"),
        "retest_agreement": (item_dim, "_group"),
        "retest_agreement_se": (item_dim, "_group"),
        "normalized_accuracy": (*lead, item_dim, "_group"),
        "normalized_accuracy_se": (*lead, item_dim, "_group"),
        "n": (item_dim, "metric", "_group"),
    }
    dims["skill_se"] = dims["baseline_estimate"] = dims["skill"]
    raw = {**raw, "n": raw["n"].max(axis=tuple(range(len(lead)))).astype(np.int64)}
    data = {k: (dims.get(k, (*lead, item_dim, "metric", "_group")), v) for k, v in raw.items()}
    if baselines:
        coords["baseline"] = baselines
    out = xr.Dataset(data, coords=coords)
    if isinstance(index, pd.MultiIndex):
        out = out.assign_coords(xr.Coordinates.from_pandas_multiindex(index, "_group"))
    else:
        out = out.assign_coords(_group=index)
    if len(by) > 1:
        out = out.unstack("_group")
    elif by:
        out = out.drop_vars("_group").rename_dims(_group=by[0])
        out = out.assign_coords({by[0]: index.to_numpy()})
    else:
        out = out.isel(_group=0, drop=True)
    rest = [d for d in out.dims if d not in ("baseline", item_dim, "metric")]
    return out.transpose(*rest, item_dim, ..., "metric")
