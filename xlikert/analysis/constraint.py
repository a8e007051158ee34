"""The Constraint layer: failure rate and renormalised item PMFs.

The model's next-token distribution covers the whole vocabulary; a Likert item
accepts only the valid tokens ``V_val`` (every surface form of a scale value,
e.g. ``"7"`` and ``" 7"``), mapped onto the scale by ``phi: V_val -> Y``
(paper section "Constraint"; :ref:`eq-phi` and :ref:`eq-phi-inverse-mapping`):

* valid mass ``P_val = sum_{t in V_val} P_raw(t)``; failure rate ``1 - P_val``;
* item PMF ``P(Y = y) = sum_{t in phi^-1(y)} P_raw(t) / P_val``.

Analyses call :func:`failure_rate` (tabulated by :func:`failure_summary`);
:func:`item_pmf_from_tokens` and :func:`renormalize` build item PMFs from token
probabilities held in xarray.

The rules every collection backend shares to read a next-token distribution
(token -> scale sum, temperature/top-p, top-k intervals) are the collection's
contract: :mod:`xlikert.kernels.readout`.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..core.dims import factor_dims, preferred_factor
from ..core.errors import DesignError, InputTypeError, InvalidPMFError, XlikertError
from ..core.validate import check_score_axis, describe_cells, is_lazy
from .frames import level_frame

__all__ = [
    "VALID_MASS_ATOL",
    "failure_rate",
    "failure_summary",
    "item_pmf_from_tokens",
    "nonsubstantive_rate",
    "renormalize",
]

#: Absolute tolerance on a valid mass above 1 (or below 0): float32 softmax round-off.
VALID_MASS_ATOL = 1e-5
#: The results variable of the non-substantive options' masses (``option`` dim).
NONSUBSTANTIVE = "nonsubstantive_mass"


def _check_mass(
    raw: xr.DataArray, sum_dim: Hashable | None, what: str, atol: float
) -> xr.DataArray:
    """Check raw probabilities for NaN / negative values and return their total.

    ``sum_dim=None`` checks ``raw`` itself as a total. Dask input stays lazy: the
    returned total is built from ``raw`` wrapped so that each block is checked
    when it is computed (the same errors, raised then).
    """
    if is_lazy(raw):
        whole = raw if sum_dim is None else raw.chunk({sum_dim: -1})
        raw = xr.map_blocks(
            _checked_mass_block,
            whole,
            kwargs={"sum_dim": sum_dim, "what": what, "atol": atol},
            template=whole,
        )
        return raw if sum_dim is None else raw.sum([sum_dim])
    total = raw if sum_dim is None else raw.sum([sum_dim])
    nan = raw.isnull()
    if bool(nan.any()):
        raise InvalidPMFError(f"{what} is NaN at {describe_cells(nan)}")
    neg = raw < -atol if sum_dim is None else raw < 0
    if bool(neg.any()):
        raise InvalidPMFError(
            f"{what} is negative at {describe_cells(neg)} (min {float(raw.min()):.6g})"
        )
    if sum_dim is not None:
        zero = total <= 0
        if bool(zero.any()):
            raise InvalidPMFError(
                f"total valid mass is 0 at {describe_cells(zero)}: the model put no "
                "probability on any valid answer, so no item PMF exists there "
                "(its failure rate is 1)"
            )
    over = total > 1.0 + atol
    if bool(over.any()):
        raise InvalidPMFError(
            f"{_mass_name(what) if sum_dim is None else 'total valid mass'} exceeds 1 "
            f"(tolerance {atol:g}) at {describe_cells(over)} (max {float(total.max()):.6g}); "
            "pass raw full-vocabulary probabilities, not already renormalised ones or logits"
        )
    return total


def _mass_name(what: str) -> str:
    return "valid mass" if what == "valid_mass" else what


def _checked_mass_block(
    block: xr.DataArray, sum_dim: Hashable | None, what: str, atol: float
) -> xr.DataArray:
    """One Dask block of raw probabilities, checked by :func:`_check_mass` at compute time."""
    _check_mass(block, sum_dim, what, atol)
    return block


def _answer_mass(
    obj: xr.Dataset | xr.DataArray, atol: float
) -> tuple[xr.DataArray, xr.DataArray | None]:
    """``valid_mass`` and, when the file has it, ``nonsubstantive_mass`` (checked)."""
    if isinstance(obj, xr.Dataset):
        if "valid_mass" not in obj.data_vars:
            raise InvalidPMFError(
                "results Dataset has no 'valid_mass' variable (raw probability of the "
                f"valid tokens); its variables are {sorted(map(str, obj.data_vars))}"
            )
        vm, ns = obj["valid_mass"], obj.get(NONSUBSTANTIVE)
    elif isinstance(obj, xr.DataArray):
        vm, ns = obj, None
    else:
        raise InputTypeError(
            f"expected a results Dataset or a valid_mass DataArray, got {type(obj).__name__}"
        )
    if ns is not None:
        _check_mass(ns.fillna(0.0), None, NONSUBSTANTIVE, atol)
    return vm, ns


def failure_rate(obj: xr.Dataset | xr.DataArray, *, atol: float = VALID_MASS_ATOL) -> xr.DataArray:
    """Failure rate: the probability of an answer that is none of the item's options.

    ``1 - valid_mass``, less the mass of the non-substantive options ("Don't know",
    "Refused") where the file has ``nonsubstantive_mass`` (NaN where an item does not
    offer an option): ``1 - valid_mass - sum_option nonsubstantive_mass``.

    Parameters
    ----------
    obj : xr.Dataset or xr.DataArray
        A results Dataset with a ``valid_mass`` variable (dims
        ``(*factors, item)``, and ``nonsubstantive_mass (*factors, item, option)``
        when items offer non-substantive options), or ``valid_mass`` itself.
    atol : float, keyword-only
        Valid masses within ``atol`` outside [0, 1] (float32 round-off) are
        accepted; the failure rate is clipped to [0, 1].

    Returns
    -------
    xr.DataArray
        ``failure_rate`` with the dims and attrs of ``valid_mass``.

    Raises
    ------
    InvalidPMFError
        ``valid_mass`` is missing, NaN, or outside [0, 1] beyond ``atol``, or the
        substantive and non-substantive masses add up to more than 1; the message
        names the coordinates.
    InputTypeError
        ``obj`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset({"valid_mass": (("model", "item"), [[0.99, 1.0], [0.5, 0.75]])},
    ...                 coords={"model": ["a", "b"], "item": ["1", "2"]})
    >>> failure_rate(ds).values
    array([[0.01, 0.  ],
           [0.5 , 0.25]])
    """
    vm, ns = _answer_mass(obj, atol)
    attrs = dict(vm.attrs)
    vm = _check_mass(vm, None, "valid_mass", atol)
    long_name = "failure rate (1 - valid mass)"
    if ns is not None:
        vm = _check_mass(vm + ns.sum("option"), None, f"valid_mass + {NONSUBSTANTIVE}", atol)
        long_name = "failure rate (1 - valid mass - non-substantive mass)"
    out = (1.0 - vm).clip(0.0, 1.0)
    out.attrs = attrs
    out.attrs.update(long_name=long_name, units="1")
    return out.rename("failure_rate")


def nonsubstantive_rate(results: xr.Dataset, *, atol: float = VALID_MASS_ATOL) -> xr.DataArray:
    """Share of each non-substantive option among the model's answers (failures left out).

    ``nonsubstantive_mass / (valid_mass + sum_option nonsubstantive_mass)``: the
    model's "Don't know" (or "Refused") rate among the answers that are one of the
    item's options, as a survey's rate is among the respondents who answered
    (missing answers left out, :func:`xlikert.human_pmf`). NaN where an item does
    not offer the option. Exact, like the masses it is made of.

    Parameters
    ----------
    results : xr.Dataset
        A results Dataset with ``valid_mass`` and ``nonsubstantive_mass``.
    atol : float, keyword-only
        Tolerance of the mass checks (:func:`failure_rate`).

    Returns
    -------
    xr.DataArray
        ``nonsubstantive_rate`` with dims ``(*factors, item, option)``, in [0, 1].

    Raises
    ------
    DesignError
        The file has no ``nonsubstantive_mass`` (no item offers a non-substantive option).
    InvalidPMFError
        Masses NaN, negative or adding up to more than 1.
    InputTypeError
        ``results`` not a Dataset.

    Examples
    --------
    >>> import numpy as np, xarray as xr, xlikert as xl
    >>> ds = xr.Dataset({"valid_mass": ("item", [0.6, 0.9]),
    ...                  "nonsubstantive_mass": (("item", "option"), [[0.2], [np.nan]])},
    ...                 coords={"item": ["q1", "q2"], "option": ["Don't know"]})
    >>> xl.nonsubstantive_rate(ds).values.ravel().tolist()
    [0.25, nan]
    """
    if not isinstance(results, xr.Dataset):
        raise InputTypeError(f"expected a results Dataset, got {type(results).__name__}")
    vm, ns = _answer_mass(results, atol)
    if ns is None:
        raise DesignError(
            f"the results have no {NONSUBSTANTIVE!r}: no item offers a non-substantive "
            "option (Don't know, Refused)"
        )
    answered = _check_mass(vm + ns.sum("option"), None, f"valid_mass + {NONSUBSTANTIVE}", atol)
    out = ns / answered
    out.attrs = {
        "long_name": "share of the non-substantive option among the model's answers",
        "units": "1",
    }
    return out.rename("nonsubstantive_rate")


def renormalize(
    raw: xr.DataArray, *, score_dim: Hashable = "score", atol: float = VALID_MASS_ATOL
) -> xr.DataArray:
    """Item PMF from raw per-score valid masses: divide by their total.

    Parameters
    ----------
    raw : xr.DataArray
        ``sum_{t in phi^-1(y)} P_raw(t)`` with dims ``(..., score_dim)``; raw
        full-vocabulary probabilities, so each total lies in (0, 1].
    score_dim : hashable, keyword-only
        Score dimension; its coordinate holds consecutive integer scale values.
    atol : float, keyword-only
        Tolerance on a total above 1.

    Returns
    -------
    xr.DataArray
        ``pmf`` summing to 1 over ``score_dim``; attrs kept.

    Raises
    ------
    InvalidPMFError
        NaN or negative mass, a total of 0 (no valid answer) or above 1, a
        malformed score axis; the message names the coordinates.

    Examples
    --------
    >>> import xarray as xr
    >>> raw = xr.DataArray([0.1, 0.3, 0.4], dims="score", coords={"score": [1, 2, 3]})
    >>> renormalize(raw).values
    array([0.125, 0.375, 0.5  ])
    """
    if not isinstance(raw, xr.DataArray):
        raise InputTypeError(f"expected an xarray.DataArray, got {type(raw).__name__}")
    check_score_axis(raw, score_dim)
    total = _check_mass(raw, score_dim, "raw valid mass", atol)
    pmf = raw / total
    pmf.attrs = dict(raw.attrs)
    pmf.attrs.setdefault("long_name", "item PMF over the scale (renormalised on valid tokens)")
    return pmf.rename("pmf")


def _token_scores(
    token_prob: xr.DataArray, token_to_score: Any, token_dim: Hashable
) -> tuple[list[Any], np.ndarray]:
    """Token labels and the scale value of each token along ``token_dim``."""
    n_tok = token_prob.sizes[token_dim]
    labels = (
        list(token_prob[token_dim].values.tolist())
        if token_dim in token_prob.coords
        else list(range(n_tok))
    )
    if isinstance(token_to_score, xr.DataArray):
        if token_to_score.dims != (token_dim,):
            raise XlikertError(
                f"token_to_score DataArray must have the single dim {token_dim!r}, "
                f"got {token_to_score.dims}"
            )
        if token_dim in token_to_score.coords and token_dim in token_prob.coords:
            token_to_score = dict(
                zip(
                    token_to_score[token_dim].values.tolist(),
                    token_to_score.values.tolist(),
                    strict=True,
                )
            )
        else:
            token_to_score = token_to_score.values
    if isinstance(token_to_score, Mapping):
        mapping = dict(token_to_score)
        missing = [t for t in labels if t not in mapping]
        if missing:
            raise XlikertError(
                f"token_to_score has no scale value for token(s) {missing[:10]} of "
                f"{token_dim!r}; every token given is a valid token and needs one"
            )
        unknown = [t for t in mapping if t not in set(labels)]
        if unknown:
            raise XlikertError(
                f"token_to_score maps token(s) {unknown[:10]} that are not in the "
                f"{token_dim!r} coordinate of token_prob (their mass would be lost)"
            )
        values = [mapping[t] for t in labels]
    elif isinstance(token_to_score, Sequence | np.ndarray) and not isinstance(token_to_score, str):
        values = list(np.asarray(token_to_score).tolist())
        if len(values) != n_tok:
            raise XlikertError(
                f"token_to_score has {len(values)} entries but {token_dim!r} has {n_tok} "
                "tokens; give one scale value per token (or a mapping token -> value)"
            )
    else:
        raise InputTypeError(
            "token_to_score must be a mapping token -> scale value, a sequence aligned "
            f"with {token_dim!r}, or a DataArray along it; got {type(token_to_score).__name__}"
        )
    scores = np.empty(n_tok, dtype=np.float64)
    for i, (tok, v) in enumerate(zip(labels, values, strict=True)):
        try:
            scores[i] = float(v)
        except (TypeError, ValueError):
            raise XlikertError(f"token {tok!r} maps to {v!r}, not a scale value") from None
    return labels, scores


def item_pmf_from_tokens(
    token_prob: xr.DataArray,
    token_to_score: Mapping[Any, int] | Sequence[int] | np.ndarray | xr.DataArray,
    *,
    token_dim: Hashable = "token",
    score_values: Sequence[int] | np.ndarray | None = None,
    score_dim: Hashable = "score",
    atol: float = VALID_MASS_ATOL,
) -> xr.Dataset:
    """Item PMFs and valid mass from the raw probabilities of the valid tokens.

    Sums the raw probability of each pre-image ``phi^-1(y)`` and renormalises
    by the total valid mass (:ref:`eq-phi-inverse-mapping`).

    Parameters
    ----------
    token_prob : xr.DataArray
        Raw full-vocabulary next-token probabilities of the valid tokens, dims
        ``(..., token_dim)``.
    token_to_score : mapping, sequence or xr.DataArray
        ``phi``: a mapping from each ``token_dim`` label (or position, when the
        dim has no coordinate) to its scale value, a sequence aligned with
        ``token_dim``, or a DataArray along it.
    token_dim : hashable, keyword-only
        Token dimension of ``token_prob``.
    score_values : sequence of int, optional, keyword-only
        The scale, e.g. ``range(1, 8)``; default: every integer from the
        smallest to the largest mapped value. ``phi`` must be onto it.
    score_dim : hashable, keyword-only
        Name of the score dimension of the result.
    atol : float, keyword-only
        Tolerance on a total valid mass above 1 (float32 round-off).

    Returns
    -------
    xr.Dataset
        ``pmf`` with dims ``(..., score_dim)`` summing to 1, and ``valid_mass``
        with dims ``(...)`` (1 - failure rate). Attrs of ``token_prob`` are
        kept; ``valid_tokens`` records ``phi`` as JSON.

    Raises
    ------
    XlikertError
        A token without a scale value, a token mapped outside the scale, a
        scale value with no token (``phi`` not onto), a malformed scale.
    InvalidPMFError
        NaN or negative probabilities, a total valid mass of 0 (the model put
        no mass on any valid answer) or above 1; the message names the cells.

    Examples
    --------
    >>> import xarray as xr
    >>> prob = xr.DataArray([[0.2, 0.1, 0.3, 0.2]], dims=("item", "token"),
    ...                     coords={"token": ["1", " 1", "2", " 2"]})
    >>> ds = item_pmf_from_tokens(prob, {"1": 1, " 1": 1, "2": 2, " 2": 2})
    >>> ds.pmf.values, ds.valid_mass.values
    (array([[0.375, 0.625]]), array([0.8]))
    """
    if not isinstance(token_prob, xr.DataArray):
        raise InputTypeError(f"expected an xarray.DataArray, got {type(token_prob).__name__}")
    if token_dim not in token_prob.dims:
        raise XlikertError(
            f"token_prob has no token dimension {token_dim!r}; its dims are "
            f"{tuple(token_prob.dims)}. Pass token_dim=..."
        )
    if token_prob.sizes[token_dim] == 0:
        raise XlikertError(f"token dimension {token_dim!r} has length 0: no valid tokens")
    if score_dim in token_prob.dims:
        raise XlikertError(f"token_prob already has a dimension named {score_dim!r}")
    labels, scores = _token_scores(token_prob, token_to_score, token_dim)
    if score_values is None:
        if not np.all(scores == np.round(scores)):
            bad = [t for t, s in zip(labels, scores, strict=True) if s != round(s)]
            raise XlikertError(f"token(s) {bad[:10]} map to non-integer scale values")
        scale = np.arange(int(scores.min()), int(scores.max()) + 1)
    else:
        scale = np.asarray(score_values)
    probe = xr.DataArray(np.zeros(scale.size), dims=[score_dim], coords={score_dim: scale})
    scale = check_score_axis(probe, score_dim)
    outside = [(t, s) for t, s in zip(labels, scores, strict=True) if s not in set(scale.tolist())]
    if outside:
        raise XlikertError(
            f"token(s) mapped outside the scale {scale.tolist()}: "
            + ", ".join(f"{t!r} -> {s:g}" for t, s in outside[:10])
        )
    onehot = (scores[:, None] == scale[None, :]).astype(np.float64)
    empty = scale[onehot.sum(axis=0) == 0]
    if empty.size:
        raise XlikertError(
            f"scale value(s) {empty.tolist()} have no token in their pre-image "
            "(phi must be onto the scale); add their surface forms to the valid set"
        )
    total = _check_mass(token_prob, token_dim, "token probability", atol)
    weights = xr.DataArray(
        onehot,
        dims=(token_dim, score_dim),
        coords={score_dim: scale}
        | ({token_dim: token_prob[token_dim].values} if token_dim in token_prob.coords else {}),
    )
    raw = xr.dot(token_prob.astype(np.float64), weights, dim=[token_dim])
    raw = raw.transpose(..., score_dim)
    pmf = raw / total
    pmf.attrs = {"long_name": "item PMF over the scale (renormalised on valid tokens)"}
    valid = total.rename("valid_mass")
    valid.attrs = {"long_name": "raw probability of all valid tokens (1 - failure rate)"}
    attrs = dict(token_prob.attrs)
    attrs["valid_tokens"] = json.dumps(
        {str(t): int(s) for t, s in zip(labels, scores, strict=True)}, ensure_ascii=False
    )
    pmf = pmf.drop_vars(token_dim, errors="ignore")
    valid = valid.drop_vars([token_dim], errors="ignore")
    return xr.Dataset({"pmf": pmf, "valid_mass": valid}, attrs=attrs)


# ============================================================================ shared rules
# The maths every collection backend shares, in plain numpy. Backends call these
# functions; none keeps a copy of its own (tests compare every path with them).


def failure_summary(fr: xr.DataArray, by: Hashable | None = None) -> pd.DataFrame:
    """Mean, SD and max of the failure rate per level of ``by`` (over conditions and items).

    Parameters
    ----------
    fr
        Failure rates ``(*factors, item)`` (:func:`failure_rate`).
    by
        The factor whose levels are the rows (default :data:`xlikert.core.dims.MODEL_DIM` if
        present, else the first factor); without factors, one row ``all``.

    Returns
    -------
    pandas.DataFrame
        Columns ``M``, ``SD`` (ddof 0) and ``max``; index the levels of ``by``.

    Examples
    --------
    >>> fr = xr.DataArray([[0.0, 0.2], [0.1, 0.1]], dims=("model", "item"),
    ...                   coords={"model": ["a", "b"]})
    >>> failure_summary(fr).round(2).to_dict("index")
    {'a': {'M': 0.1, 'SD': 0.1, 'max': 0.2}, 'b': {'M': 0.1, 'SD': 0.0, 'max': 0.1}}
    """
    by = preferred_factor(factor_dims(fr, score_dim=None, what="the failure rates"), by)
    rest = [d for d in fr.dims if d != by]
    return level_frame({"M": fr.mean(rest), "SD": fr.std(rest), "max": fr.max(rest)}, by)
