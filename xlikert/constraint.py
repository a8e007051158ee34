"""The Constraint layer: failure rate and renormalised item PMFs.

The model's next-token distribution covers the whole vocabulary; a Likert item
accepts only the valid tokens ``V_val`` (every surface form of a scale value,
e.g. ``"7"`` and ``" 7"``), mapped onto the scale by ``phi: V_val -> Y``
(paper section "Constraint", eqs. phi and phi-inverse-mapping):

* valid mass ``P_val = sum_{t in V_val} P_raw(t)``; failure rate ``1 - P_val``;
* item PMF ``P(Y = y) = sum_{t in phi^-1(y)} P_raw(t) / P_val``.

Analyses call :func:`failure_rate`; :func:`item_pmf_from_tokens` and
:func:`renormalize` build item PMFs from token probabilities held in xarray.

The rules every collection backend shares (transformers, in-process vLLM, an
OpenAI-compatible server) are written here once, in plain numpy, and each
backend calls them: the token -> scale sum (:func:`scale_mass`), the
temperature/top-p rule with its tie rule (:func:`nucleus_logprobs`,
:data:`DECODING_TIE_RULE`) and the certified top-k intervals
(:func:`topk_intervals`, :data:`TOPK_BOUNDS_RULE`).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .errors import InputTypeError, InvalidPMFError, XlikertError
from .validate import check_score_axis, describe_cells, is_lazy

__all__ = [
    "DECODING_TIE_RULE",
    "TOPK_BOUNDS_RULE",
    "VALID_MASS_ATOL",
    "failure_rate",
    "item_pmf_from_tokens",
    "log_softmax",
    "next_token_readout",
    "nucleus_logprobs",
    "renormalize",
    "scale_mass",
    "topk_intervals",
]

#: Absolute tolerance on a valid mass above 1 (or below 0): float32 softmax round-off.
VALID_MASS_ATOL = 1e-5


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
        return raw if sum_dim is None else raw.sum(sum_dim)
    total = raw if sum_dim is None else raw.sum(sum_dim)
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
            f"{'valid mass' if sum_dim is None else 'total valid mass'} exceeds 1 "
            f"(tolerance {atol:g}) at {describe_cells(over)} (max {float(total.max()):.6g}); "
            "pass raw full-vocabulary probabilities, not already renormalised ones or logits"
        )
    return total


def _checked_mass_block(
    block: xr.DataArray, sum_dim: Hashable | None, what: str, atol: float
) -> xr.DataArray:
    """One Dask block of raw probabilities, checked by :func:`_check_mass` at compute time."""
    _check_mass(block, sum_dim, what, atol)
    return block


def failure_rate(obj: xr.Dataset | xr.DataArray, *, atol: float = VALID_MASS_ATOL) -> xr.DataArray:
    """Failure rate ``1 - valid_mass``: the probability of answering off the scale.

    Parameters
    ----------
    obj : xr.Dataset or xr.DataArray
        A results Dataset with a ``valid_mass`` variable (dims
        ``(*factors, item)``), or that variable itself.
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
        ``valid_mass`` is missing, NaN, or outside [0, 1] beyond ``atol``;
        the message names the coordinates.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset({"valid_mass": (("model", "item"), [[0.99, 1.0], [0.5, 0.75]])},
    ...                 coords={"model": ["a", "b"], "item": ["1", "2"]})
    >>> failure_rate(ds).values
    array([[0.01, 0.  ],
           [0.5 , 0.25]])
    """
    if isinstance(obj, xr.Dataset):
        if "valid_mass" not in obj.data_vars:
            raise InvalidPMFError(
                "results Dataset has no 'valid_mass' variable (raw probability of the "
                f"valid tokens); its variables are {sorted(map(str, obj.data_vars))}"
            )
        vm = obj["valid_mass"]
    elif isinstance(obj, xr.DataArray):
        vm = obj
    else:
        raise InputTypeError(
            f"expected a results Dataset or a valid_mass DataArray, got {type(obj).__name__}"
        )
    attrs = dict(vm.attrs)
    vm = _check_mass(vm, None, "valid_mass", atol)
    out = (1.0 - vm).clip(0.0, 1.0)
    out.attrs = attrs
    out.attrs.update(long_name="failure rate (1 - valid mass)", units="1")
    return out.rename("failure_rate")


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
    by the total valid mass (paper eq. phi-inverse-mapping).

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
    probe = xr.DataArray(np.zeros(scale.size), dims=score_dim, coords={score_dim: scale})
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
    raw = xr.dot(token_prob.astype(np.float64), weights, dim=token_dim)
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
    valid = valid.drop_vars(token_dim, errors="ignore")
    return xr.Dataset({"pmf": pmf, "valid_mass": valid}, attrs=attrs)


# ============================================================================ shared rules
# The maths every collection backend shares, in plain numpy. Backends call these
# functions; none keeps a copy of its own (tests compare every path with them).

#: How the nucleus is formed; stored in the results' attrs (``decoding_tie_rule``).
DECODING_TIE_RULE = (
    "probabilities p_T = softmax(logits / T) over the full vocabulary (float64); the nucleus "
    "for top_p < 1 is every token whose p_T is >= the p_T of the token at which the cumulative "
    "mass, in descending order, first reaches top_p (tokens tied with it are all kept, so the "
    "result does not depend on sort order); top_p = 1 keeps every token; the item PMF is the "
    "valid tokens' mass inside the nucleus renormalised, decoding_valid_mass is that mass over "
    "the nucleus mass (NaN PMF where no valid token is in the nucleus)"
)

#: How top-k intervals are derived; stored in the results' attrs (``bounds_rule``).
TOPK_BOUNDS_RULE = (
    "top-k mode: the server lists n distinct tokens with their raw log-probabilities; at most "
    "o of them (o = 1: the sampled token, which vLLM and others list first whatever its rank) "
    "may stand outside the rank order, so the n - o most probable listed tokens are the true "
    "top n - o and every unlisted token has probability <= p_b, the (n - o)-th largest listed "
    "probability (xlikert asks for k + o entries to keep k). Each listed probability p is "
    "taken as the interval [p (1 - rtol), p (1 + rtol)] (rtol: the server's arithmetic, 0 when "
    "exact). With a_y the listed valid mass of score y, m_y its unlisted valid tokens (from "
    "the tokenizer; unbounded without one), s the listed total, R = max(0, 1 - s_lo) the "
    "unlisted mass and U_y = min(m_y p_b, R): valid mass in [A_lo, min(1, A_hi + min(sum_y "
    "U_y, R))]; pmf_y in [a_y,lo / (a_y,lo + sum_{z != y} a_z,hi + W_y), (a_y,hi + U_y) / "
    "(a_y,hi + U_y + sum_{z != y} a_z,lo)] with W_y = min(sum_{z != y} U_z, R) (0/0 read as 0 "
    "below and 1 above). The stored pmf is a_y / A (listed values renormalised)."
)


def scale_mass(token_prob: np.ndarray, token_score: np.ndarray, n_scores: int) -> np.ndarray:
    """Sum token probabilities over each scale value's pre-image: ``sum_{t in phi^-1(y)} p_t``.

    The numpy core of :func:`item_pmf_from_tokens`, used by every collection
    backend. Tokens whose score index is negative belong to no scale value.

    Parameters
    ----------
    token_prob : np.ndarray
        ``(..., n_tokens)`` probabilities (NaN propagates only into the scores
        whose pre-image holds it).
    token_score : np.ndarray
        ``(n_tokens,)`` index of each token's scale value in ``0..n_scores-1``,
        or -1 for a token that is not a valid answer.
    n_scores : int
        Number of scale values.

    Returns
    -------
    np.ndarray
        ``(..., n_scores)`` float64.

    Examples
    --------
    >>> scale_mass(np.array([0.2, 0.1, 0.3, 0.05]), np.array([0, 0, 1, -1]), 2)
    array([0.3, 0.3])
    """
    p = np.asarray(token_prob, dtype=np.float64)
    idx = np.asarray(token_score)
    if idx.shape != p.shape[-1:]:
        raise XlikertError(
            f"token_score has shape {idx.shape}; it needs one entry per token {p.shape[-1:]}"
        )
    out = np.zeros((*p.shape[:-1], int(n_scores)))
    for s in range(int(n_scores)):
        sel = idx == s
        if sel.any():
            out[..., s] = p[..., sel].sum(-1)
    return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities over the last axis, in float64.

    Examples
    --------
    >>> np.exp(log_softmax(np.array([0.0, np.log(3.0)])))
    array([0.25, 0.75])
    """
    z = np.asarray(logits, dtype=np.float64)
    m = z.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return z - (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))


def next_token_readout(
    logits: np.ndarray,
    need: np.ndarray,
    temperatures: Sequence[float],
    top_ps: Sequence[float],
    top_k: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What every in-process backend reads from full-vocabulary logits rows.

    The one place the transformers backend and the vLLM logits processor
    (:mod:`xlikert.collect.vllm_readout`) turn logits into numbers, so both give
    the same numbers from the same row.

    Parameters
    ----------
    logits : np.ndarray
        ``(C, V)`` logits (float32 or wider) of the next token after one prompt
        followed by each of ``C`` answer contexts.
    need : np.ndarray
        Token ids the answer rule needs.
    temperatures, top_ps : sequence of float
        The decoding grid (:func:`nucleus_logprobs`).
    top_k : int
        How many of the most probable tokens after row 0 to list (0: none).

    Returns
    -------
    raw, grid, topk_id, topk_logprob
        ``(C, len(need))`` log-probabilities at temperature 1 with no nucleus;
        ``(C, T, P, len(need))`` under each decoding setting; the ``top_k`` ids
        of row 0 by descending probability (ties by id) and their log-probabilities.

    Examples
    --------
    >>> z = np.log(np.array([[0.5, 0.3, 0.2]]))
    >>> raw, grid, ids, lp = next_token_readout(z, np.array([2]), [1.0], [0.8], top_k=2)
    >>> np.exp(raw).round(6).tolist(), np.exp(grid).round(6).ravel().tolist(), ids.tolist()
    ([[0.2]], [0.0], [0, 1])
    """
    logp = log_softmax(logits)
    raw = logp[:, need]
    grid = nucleus_logprobs(logits, need, temperatures, top_ps)
    k = min(int(top_k), logp.shape[-1])
    if k <= 0:
        return raw, grid, np.empty(0, dtype=np.int64), np.empty(0)
    first = logp[0]  # context () is the prompt itself
    # the k largest, ties by id: every value above the k-th largest, then the lowest
    # ids among those equal to it (argpartition alone picks tied ids arbitrarily)
    kth = first[np.argpartition(-first, k - 1)[k - 1]]
    above = np.flatnonzero(first > kth)
    ids = np.concatenate([above, np.flatnonzero(first == kth)[: k - above.size]])
    ids = ids[np.argsort(-first[ids], kind="stable")]
    return raw, grid, ids, first[ids]


def nucleus_logprobs(
    logprobs: np.ndarray,
    need: np.ndarray,
    temperatures,
    top_ps,
    *,
    unlisted_max: np.ndarray | float | None = None,
) -> np.ndarray:
    """Log-probabilities a sampler gives the tokens ``need`` under temperature and top-p.

    The rule is :data:`DECODING_TIE_RULE`: ``q_T = softmax(z / T)``; for
    ``top_p < 1`` the nucleus is every token whose ``q_T`` is at least that of
    the token at which the descending cumulative mass first reaches ``top_p``
    (ties all kept); ``q`` is renormalised over the nucleus and is 0 (``-inf``)
    outside it.

    Parameters
    ----------
    logprobs : np.ndarray
        ``(..., n)`` raw log-probabilities (or logits) of the full vocabulary; or,
        with ``unlisted_max``, of the ``n`` tokens a server listed.
    need : np.ndarray
        Indices into the last axis of the tokens whose probabilities are wanted.
    temperatures, top_ps : sequence of float
        The grid; every temperature > 0 and every top_p in (0, 1].
    unlisted_max : array_like or float, optional
        For an incomplete list (a server's top-k): every token not listed has
        probability at most this (broadcast over ``...``; see
        :func:`topk_intervals`). Then only temperature 1 can be computed (the
        normaliser of other temperatures needs every token); ``top_p = 1`` keeps
        the listed values as they are, and ``top_p < 1`` is known only when the
        nucleus threshold lies in the list strictly above ``unlisted_max`` (so no
        unlisted token can be in the nucleus). Unknown points are NaN.

    Returns
    -------
    np.ndarray
        ``(..., len(temperatures), len(top_ps), len(need))`` float64; ``-inf``
        outside the nucleus, NaN where not computable.

    Examples
    --------
    >>> lp = np.log([0.5, 0.3, 0.2])
    >>> np.exp(nucleus_logprobs(lp, np.arange(3), [1.0], [1.0, 0.8]))[0]
    array([[0.5  , 0.3  , 0.2  ],
           [0.625, 0.375, 0.   ]])
    """
    z = np.asarray(logprobs, dtype=np.float64)
    need = np.asarray(need, dtype=np.intp)
    temps = [float(t) for t in temperatures]
    tops = [float(p) for p in top_ps]
    for t in temps:
        if not t > 0:
            raise XlikertError(f"temperature must be > 0, got {t}")
    for p in tops:
        if not 0 < p <= 1:
            raise XlikertError(f"top_p must be in (0, 1], got {p}")
    lead = z.shape[:-1]
    out = np.full((*lead, len(temps), len(tops), need.size), np.nan)
    zn = z[..., need]
    complete = unlisted_max is None
    lses = {}  # temperature index -> (..., 1) log normaliser of z / T
    for ti, temp in enumerate(temps):
        if complete:
            lses[ti] = _logsumexp(z / temp)
        elif temp == 1.0:
            lses[ti] = np.zeros((*lead, 1))  # listed values are already normalised
        for pi, top_p in enumerate(tops):
            if ti in lses and top_p >= 1:
                out[..., ti, pi, :] = zn / temp - lses[ti]
    cut = [pi for pi, p in enumerate(tops) if p < 1]
    if not cut or not lses:
        return out
    # top_p < 1: row by row, over the row's values sorted in descending order, or only
    # as many of the largest as hold every nucleus asked for (_descending_head)
    rows = int(np.prod(lead, dtype=np.int64))
    z2, zn2 = z.reshape(rows, z.shape[-1]), zn.reshape(rows, need.size)
    out2 = out.reshape(rows, len(temps), len(tops), need.size)
    lse2 = {ti: lse.reshape(rows) for ti, lse in lses.items()}
    if not complete:
        bound = np.broadcast_to(np.asarray(unlisted_max, dtype=np.float64), lead).reshape(-1)
    for r in range(z2.shape[0]):
        levels = [(temps[ti], lse2[ti][r]) for ti in lses]
        if complete:
            zs = _descending_head(z2[r], levels, [tops[pi] for pi in cut])
        else:
            zs = np.sort(z2[r])[::-1]
        for ti, (temp, lse) in zip(lses, levels, strict=True):
            sp = np.exp(zs / temp - lse)
            csum = np.cumsum(sp)
            lp = zn2[r] / temp - lse
            for pi in cut:
                reached = csum >= tops[pi]
                k = int(reached.argmax()) if reached.any() else zs.size - 1
                thr = zs[k]  # the last admitted value; every value tied with it is kept
                vals = np.where(zn2[r] >= thr, lp - np.log(sp[zs >= thr].sum()), -np.inf)
                # an incomplete list: known only when no unlisted token can reach thr
                if not complete and not (reached.any() and np.exp(thr / temp - lse) > bound[r]):
                    vals = np.nan
                out2[r, ti, pi] = vals
    return out


def _descending_head(
    z: np.ndarray, levels: Sequence[tuple[float, float]], top_ps: Sequence[float]
) -> np.ndarray:
    """The largest values of one row, in descending order: enough to hold every nucleus.

    The nucleus at temperature ``T`` and ``top_p`` needs the sorted values only down to
    its threshold. The ``k`` largest (``k`` = 64, 1024, 16384, found by
    ``np.partition`` in linear time) suffice when, at every ``(T, top_p)``, the running
    mass of the ``k`` reaches ``top_p`` at a value strictly above the ``(k + 1)``-th
    largest (no value tied with the threshold is left out); their running sums are
    then those of the full sort. Otherwise the whole row is sorted.

    Parameters
    ----------
    z : np.ndarray
        ``(n,)`` logits of one row (float64).
    levels : sequence of (float, float)
        ``(T, logsumexp(z / T))`` for every temperature.
    top_ps : sequence of float
        The top-p values below 1.
    """
    n = z.size
    k = 64
    while 4 * k < n:
        part = np.partition(z, n - k - 1)  # the k largest after position n - k - 1
        head, rest = np.sort(part[n - k :])[::-1], part[n - k - 1]
        if all(_threshold_inside(head, rest, temp, lse, top_ps) for temp, lse in levels):
            return head
        k *= 16
    return np.sort(z)[::-1]


def _threshold_inside(head, rest, temp: float, lse: float, top_ps) -> bool:
    """Whether every nucleus at temperature ``temp`` ends inside ``head`` (sorted,
    descending) at a value strictly above ``rest``, the largest value left out."""
    csum = np.cumsum(np.exp(head / temp - lse))
    for top_p in top_ps:
        reached = csum >= top_p
        if not (reached.any() and head[reached.argmax()] > rest):
            return False
    return True


def _logsumexp(z: np.ndarray) -> np.ndarray:
    m = z.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return m + np.log(np.exp(z - m).sum(-1, keepdims=True))


def topk_intervals(
    listed_prob: np.ndarray,
    listed_score: np.ndarray,
    n_scores: int,
    unlisted_valid: np.ndarray | None,
    *,
    out_of_order: int = 1,
    rtol: float = 0.0,
) -> dict[str, np.ndarray]:
    """Certified item-PMF and valid-mass intervals from a server's top-k list.

    See :data:`TOPK_BOUNDS_RULE`. Holds for any server that lists at most
    ``out_of_order`` tokens outside the rank order (vLLM and OpenAI list the
    sampled token first whatever its rank: ``out_of_order=1``).

    Parameters
    ----------
    listed_prob : np.ndarray
        ``(n,)`` probabilities of the n distinct listed tokens.
    listed_score : np.ndarray
        ``(n,)`` score index of each listed token, -1 where it is not valid.
    n_scores : int
        Number of scale values.
    unlisted_valid : np.ndarray or None
        ``(n_scores,)`` number of valid tokens of each score not in the list
        (from the tokenizer), or None when unknown.
    out_of_order : int
        How many listed tokens may stand outside the rank order.
    rtol : float
        Relative error of each reported probability (the server's arithmetic).

    Returns
    -------
    dict
        ``pmf`` (listed valid mass renormalised; NaN if none), ``valid_mass``
        (listed valid mass), ``pmf_lower``/``pmf_upper`` ``(n_scores,)``,
        ``valid_mass_lower``/``valid_mass_upper`` and ``unlisted_max`` (p_b, the
        largest probability an unlisted token can have).

    Examples
    --------
    >>> b = topk_intervals(np.array([0.5, 0.3, 0.15, 0.01]), np.array([0, 1, -1, -1]), 2,
    ...                    np.array([0, 1]), out_of_order=0)
    >>> float(b["valid_mass_lower"]), round(float(b["valid_mass_upper"]), 6)
    (0.8, 0.81)
    """
    p = np.asarray(listed_prob, dtype=np.float64)
    sc = np.asarray(listed_score)
    if p.ndim != 1 or sc.shape != p.shape:
        raise XlikertError("listed_prob and listed_score must be 1-d arrays of the same length")
    if out_of_order < 0 or rtol < 0:
        raise XlikertError("out_of_order and rtol must be >= 0")
    n = p.size
    ranked = np.sort(p)[::-1]
    j = n - out_of_order  # the true top-j are listed
    p_b = float(ranked[j - 1]) * (1 + rtol) if j >= 1 else 1.0
    a = scale_mass(p, sc, n_scores)
    a_lo, a_hi = a * (1 - rtol), a * (1 + rtol)
    R = max(0.0, 1.0 - float(p.sum()) * (1 - rtol))
    if unlisted_valid is None:
        U = np.full(n_scores, R)
    else:
        U = np.minimum(np.asarray(unlisted_valid, dtype=np.float64) * min(p_b, 1.0), R)
    A = float(a.sum())
    W = np.minimum(U.sum() - U, R)
    others_hi = a_hi.sum() - a_hi
    others_lo = a_lo.sum() - a_lo
    with np.errstate(invalid="ignore", divide="ignore"):
        den_lo = a_lo + others_hi + W
        lo = np.where(den_lo > 0, a_lo / den_lo, 0.0)
        den_hi = a_hi + U + others_lo
        hi = np.where(den_hi > 0, (a_hi + U) / den_hi, 1.0)
        pmf = a / A if A > 0 else np.full(n_scores, np.nan)
    return {
        "pmf": pmf,
        "valid_mass": np.float64(A),
        "pmf_lower": np.clip(lo, 0.0, 1.0),
        "pmf_upper": np.clip(hi, 0.0, 1.0),
        "valid_mass_lower": np.float64(float(a_lo.sum())),
        "valid_mass_upper": np.float64(min(float(a_hi.sum()) + min(float(U.sum()), R), 1.0)),
        "unlisted_max": np.float64(min(p_b, 1.0)),
    }
