"""The individual scores: the model's exact PMF scored against each person's answer
(:data:`INDIVIDUAL_SCORES`), the kernel and its dataset.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.errors import DesignError
from .answers import (
    answer_distribution,
    answer_layout,
    check_answer_table,
    decode_answers,
    left_out_text,
    persona_pmf,
    respondent_rows,
)

__all__ = ["INDIVIDUAL_SCORES", "individual_scores", "score_dataset"]

#: The individual scores, and the value a perfect prediction scores on each.
INDIVIDUAL_SCORES: Mapping[str, float] = {
    "answer_probability": 1.0,
    "log_score": 0.0,
    "rps": 0.0,
    "brier": 0.0,
    "mode_correct": 1.0,
}


def _scores_numpy(
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
    >>> s = _scores_numpy(np.array([[[0.5, 0.3, 0.2]]]), np.zeros((1, 1, 0)),
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


def _to_arrays(
    da: xr.DataArray, last: Hashable, respondent_dim: Hashable, item_dim: Hashable
) -> tuple[np.ndarray, list[Hashable]]:
    lead = [d for d in da.dims if d not in (respondent_dim, item_dim, last)]
    return da.transpose(*lead, respondent_dim, item_dim, last).values, lead


def score_dataset(
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
    out = _scores_numpy(qp, qo, point, option, lay["hi"] - lay["lo"] + 1, lay["ordinal"])
    coords = {d: q_points[d].values for d in lead}
    coords[respondent_dim] = q_points[respondent_dim].values
    coords[item_dim] = lay["items"]
    dims = (*lead, respondent_dim, item_dim)
    return xr.Dataset({k: (dims, v) for k, v in out.items()}, coords=coords)


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
        respondent), a persona column the answers or the results lack, no respondent whose
        persona the results have. A respondent whose persona levels the results lack is
        not refused: their scores are NaN, and they are named, with why, in the attr
        ``group_persona_left_out`` and a warning.
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
    answers = check_answer_table(answers, "answers")
    lay = answer_layout(results, item_dim, score_dim)
    q_points, q_options = answer_distribution(results, item_dim=item_dim, score_dim=score_dim)
    left_out: dict[str, str] = {}
    if persona:
        persona = [persona] if isinstance(persona, str) else list(persona)
        q_points, left_out = persona_pmf(q_points, answers, persona, respondent_dim)
        if q_options is not None:
            q_options, _ = persona_pmf(q_options, answers, persona, respondent_dim)
        rows = np.arange(len(answers))
    else:
        if respondent_dim not in q_points.dims:
            raise DesignError(
                f"the results have no {respondent_dim!r} factor (dims {list(q_points.dims)}); "
                "pass persona=[columns] to read group personas at each respondent's levels"
            )
        levels = np.asarray([str(v) for v in q_points[respondent_dim].values], dtype=object)
        rows = respondent_rows(answers, levels, "answers")
    point, option = decode_answers(
        answers, rows, lay["items"], lay["scores"], lay["lo"], lay["hi"], lay["options"],
        lay["offered"], nonsubstantive, missing, "answers", lay["labels"],
    )  # fmt: skip
    if left_out:  # not scored: NaN, as an unanswered item
        lost = np.isin(np.asarray(q_points[respondent_dim].values, dtype=str), list(left_out))
        point[lost], option[lost] = -1, -1
    out = score_dataset(
        q_points, q_options, point, option, lay, respondent_dim, item_dim, score_dim
    )
    if left_out:
        note = left_out_text(left_out, len(answers))
        out.attrs["group_persona_left_out"] = note
        warnings.warn(note, stacklevel=2)
    out.attrs["individual_scores"] = (
        "exact on the model's side; answer distribution over each item's points and "
        "offered non-substantive options, failures left out"
    )
    return out
