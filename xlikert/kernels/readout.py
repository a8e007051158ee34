"""The readout rules every collection backend shares, once, in plain numpy.

Every backend (transformers, in-process vLLM, an OpenAI-compatible server) turns
one next-token distribution into the stored numbers with these functions, and
keeps no copy of their maths:

* :func:`scale_mass` -- the token -> scale sum (paper section "Constraint":
  ``P(Y = y) = sum_{t in phi^-1(y)} P_raw(t)``);
* :func:`next_token_readout` -- a full-vocabulary logits row to the valid mass,
  the scale PMF, the top-k tokens and the decoding grid;
* :func:`nucleus_logprobs` -- temperature and top-p with the stored tie rule
  (:data:`DECODING_TIE_RULE`);
* :func:`topk_intervals` -- certified intervals from a server's top-k listing
  (:data:`TOPK_BOUNDS_RULE`), and :func:`topk_option_intervals` for the mass of
  each non-substantive answer.

The torch twin that runs the same readout on the accelerator is
:mod:`xlikert.collect.backends.transformers.device_readout`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..core.errors import XlikertError

__all__ = [
    "DECODING_TIE_RULE",
    "DEFAULT_TEMPERATURES",
    "DEFAULT_TOP_PS",
    "TOPK_BOUNDS_RULE",
    "logsumexp",
    "next_token_readout",
    "nucleus_logprobs",
    "scale_mass",
    "topk_intervals",
    "topk_option_intervals",
]

#: The decoding grid's default temperatures (the one place that holds them).
DEFAULT_TEMPERATURES: tuple[float, ...] = (0.1, 0.5, 1.0, 1.3)
#: The decoding grid's default top-p values (the one place that holds them).
DEFAULT_TOP_PS: tuple[float, ...] = (0.8, 0.9, 1.0)


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


def next_token_readout(
    logits: np.ndarray,
    need: np.ndarray,
    temperatures: Sequence[float],
    top_ps: Sequence[float],
    top_k: int = 0,
    pooled: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What every in-process backend reads from full-vocabulary logits rows.

    The one place the transformers backend and the vLLM logits processor
    (:mod:`xlikert.collect.backends.vllm.readout`) turn logits into numbers, so both give
    the same numbers from the same row.

    The numbers are those of :func:`nucleus_logprobs` (its plain form, the twin the tests
    hold this against) read in fewer passes over the vocabulary: one ``exp`` pass per
    temperature, shared by the raw log-softmax (temperature 1), the grid's normaliser and
    the pooled column (a dot product with the pooled tokens' counts); the nucleus from a
    head of the row found in one comparison pass (:func:`_nucleus_from_levels`). The
    columns of ``need`` are bit for bit those of the plain form; the pooled column differs
    by round-off only (its sum taken in another order).

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
    pooled : np.ndarray, optional
        Token ids wanted only as a sum (:func:`nucleus_logprobs`): one more column.

    Returns
    -------
    raw, grid, topk_id, topk_logprob
        ``(C, len(need) [+ 1])`` log-probabilities at temperature 1 with no nucleus;
        ``(C, T, P, len(need) [+ 1])`` under each decoding setting; the ``top_k`` ids
        of row 0 by descending probability (ties by id) and their log-probabilities.

    Examples
    --------
    >>> z = np.log(np.array([[0.5, 0.3, 0.2]]))
    >>> raw, grid, ids, lp = next_token_readout(z, np.array([2]), [1.0], [0.8], top_k=2)
    >>> np.exp(raw).round(6).tolist(), np.exp(grid).round(6).ravel().tolist(), ids.tolist()
    ([[0.2]], [0.0], [0, 1])
    """
    z = np.asarray(logits, dtype=np.float64)
    need = np.asarray(need, dtype=np.intp)
    temps, tops = _checked_grid(temperatures, top_ps)
    weight = None
    if pooled is not None:
        weight = np.bincount(np.asarray(pooled, dtype=np.intp).ravel(), minlength=z.shape[-1])
        weight = weight.astype(np.float64)
    levels = _levels(z, sorted({1.0, *temps}), weight)
    lse1, pool1 = levels[1.0]
    raw = z[..., need] - lse1
    if weight is not None:
        raw = np.concatenate([raw, pool1[..., None]], -1)
    grid = _grid_from_levels(z, need, temps, tops, levels, weight)
    k = min(int(top_k), z.shape[-1])
    if k <= 0:
        return raw, grid, np.empty(0, dtype=np.int64), np.empty(0)
    first = z.reshape(-1, z.shape[-1])[0] - lse1.reshape(-1)[0]  # context (): the prompt
    # the k largest, ties by id: every value above the k-th largest, then the lowest
    # ids among those equal to it (argpartition alone picks tied ids arbitrarily)
    kth = first[np.argpartition(-first, k - 1)[k - 1]]
    above = np.flatnonzero(first > kth)
    ids = np.concatenate([above, np.flatnonzero(first == kth)[: k - above.size]])
    ids = ids[np.argsort(-first[ids], kind="stable")]
    return raw, grid, ids, first[ids]


def _checked_grid(
    temperatures: Sequence[float] | np.ndarray, top_ps: Sequence[float] | np.ndarray
) -> tuple[list[float], list[float]]:
    """The grid as floats, each temperature > 0 and each top_p in (0, 1] (else an error
    naming the value)."""
    temps = [float(t) for t in temperatures]
    tops = [float(p) for p in top_ps]
    for t in temps:
        if not t > 0:
            raise XlikertError(f"temperature must be > 0, got {t}")
    for p in tops:
        if not 0 < p <= 1:
            raise XlikertError(f"top_p must be in (0, 1], got {p}")
    return temps, tops


def _levels(
    z: np.ndarray, temps: Sequence[float], weight: np.ndarray | None
) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Per temperature ``T``: ``logsumexp(z / T)`` ``(..., 1)``, computed as :func:`logsumexp`
    computes it (the same floats: ``max(z / T)`` is ``max(z) / T``), and the pooled tokens'
    log-probability at ``T`` ``(...)`` (``-inf`` where they have none; zeros without
    ``weight``). One ``exp`` pass over the vocabulary each; the rows in a few chunks on
    threads (numpy lets go of the GIL; each row's sums are the same in any chunk), each
    chunk :data:`_BLOCK_ROWS` rows at a time."""
    lead, V = z.shape[:-1], z.shape[-1]
    z2 = z.reshape(-1, V)
    lse = np.empty((z2.shape[0], len(temps)))
    pool = np.zeros((z2.shape[0], len(temps)))
    step = max(1, -(-z2.shape[0] // _THREADS))
    parts = [slice(a, a + step) for a in range(0, z2.shape[0], step)]

    def work(part: slice) -> None:  # a few rows at a time: each pass stays in the cache
        for a in range(part.start, part.stop, _BLOCK_ROWS):
            at = slice(a, min(a + _BLOCK_ROWS, part.stop))
            lse[at], pool[at] = _levels_rows(z2[at], temps, weight)

    if len(parts) > 1:
        list(_pool().map(work, parts))
    else:
        for part in parts:
            work(part)
    return {t: (lse[:, i].reshape(*lead, 1), pool[:, i].reshape(lead))
            for i, t in enumerate(temps)}  # fmt: skip


#: Rows :func:`_levels` reads at a time (a row of a 150k vocabulary is 1.2 MB in float64:
#: a few rows' passes stay in the cache; the whole block's did not, and were memory bound).
_BLOCK_ROWS = 2

#: Threads :func:`_levels` spreads its rows over (at most 4: the passes are memory bound).
_THREADS = max(1, min(4, os.cpu_count() or 1))
_POOL: list[ThreadPoolExecutor] = []


def _pool() -> ThreadPoolExecutor:
    """The process's thread pool for :func:`_levels`, started on first use."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(_THREADS, thread_name_prefix="xlikert-readout"))
    return _POOL[0]


def _levels_rows(
    z: np.ndarray, temps: Sequence[float], weight: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_levels` of ``(R, V)`` rows: ``(R, len(temps))`` normalisers and pooled
    log-probabilities."""
    m = z.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    buf = np.empty_like(z)
    lse = np.empty((z.shape[0], len(temps)))
    pool = np.zeros((z.shape[0], len(temps)))
    for i, temp in enumerate(temps):
        mt = m / temp
        if temp == 1.0:  # z / 1.0 is z
            np.subtract(z, mt, out=buf)
        else:
            np.divide(z, temp, out=buf)
            np.subtract(buf, mt, out=buf)
        np.exp(buf, out=buf)
        total = buf.sum(-1, keepdims=True)
        lse[:, i] = (mt + np.log(total))[:, 0]
        if weight is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                pool[:, i] = np.log(buf @ weight) - np.log(total[:, 0])
    return lse, pool


def _grid_from_levels(
    z: np.ndarray,
    need: np.ndarray,
    temps: list[float],
    tops: list[float],
    levels: dict[float, tuple[np.ndarray, np.ndarray]],
    weight: np.ndarray | None,
) -> np.ndarray:
    """:func:`nucleus_logprobs` over the full vocabulary from :func:`_levels`: ``(...,
    T, P, len(need) [+ 1])``."""
    n = need.size
    pooled = weight is not None
    out = np.full((*z.shape[:-1], len(temps), len(tops), n + pooled), np.nan)
    zn = z[..., need]
    for ti, temp in enumerate(temps):
        lse, pool = levels[temp]
        for pi, top_p in enumerate(tops):
            if top_p >= 1:
                out[..., ti, pi, :n] = zn / temp - lse
                if pooled:
                    out[..., ti, pi, n] = pool
    cut = [pi for pi, p in enumerate(tops) if p < 1]
    if not cut:
        return out
    rows = int(np.prod(z.shape[:-1], dtype=np.int64))
    z2, zn2 = z.reshape(rows, z.shape[-1]), zn.reshape(rows, n)
    out2 = out.reshape(rows, len(temps), len(tops), out.shape[-1])
    lse2 = np.stack([levels[t][0].reshape(rows) for t in temps], -1)  # (rows, T)
    heads, stages = _nucleus_heads(z2, temps, lse2, max(tops[pi] for pi in cut))
    cut_tops = [tops[pi] for pi in cut]
    for r in range(rows):
        vals = None
        for stage in range(stages):  # a wider head until it holds every nucleus
            vals = _nucleus_row(heads(r, stage), z2[r], zn2[r], weight, temps, lse2[r], cut_tops)
            if vals is not None:
                break
        assert vals is not None  # the whole row always does
        out2[r][:, cut] = vals[:, :, : out.shape[-1]]
    return out


def _nucleus_heads(
    z2: np.ndarray, temps: list[float], lse2: np.ndarray, top_p: float
) -> tuple[Callable[[int, int], tuple[np.ndarray, np.ndarray, float]], int]:
    """``(r, stage) -> (values, ids, rest)``: row ``r``'s values above a cut, in descending
    order (ties by id), their ids, and the largest value left out; and the stages' number.

    The caller tries the stages in turn until a head holds every nucleus
    (:func:`_nucleus_row` checks: each nucleus ends inside the head at a value strictly
    above ``rest``, so a cut only saves work). Stage ``s`` cuts where every token below
    has probability under :data:`_HEAD_FLOORS` ``[s]`` at every temperature (1e-3: at most a
    thousand tokens a temperature, usually a handful), then under ``(1 - top_p) / (2 V)``
    (so the head holds at least ``(1 + top_p) / 2`` of the mass but for round-off); the
    last stage is the whole row."""
    V = z2.shape[1]
    T = np.asarray(temps)
    with np.errstate(divide="ignore"):
        floors = [*np.log(_HEAD_FLOORS), np.log((1.0 - top_p) / (2.0 * V))]
    cuts = []
    for floor in floors:
        cut = np.min(T * (lse2 + floor), axis=-1)  # (rows,)
        cuts.append(np.where(np.isnan(cut), -np.inf, cut))
    above = z2 > cuts[0][:, None]  # the first stage of every row at once
    rest = np.max(z2, axis=-1, where=~above, initial=-np.inf)

    def head(r: int, stage: int) -> tuple[np.ndarray, np.ndarray, float]:
        if stage == 0:
            return _sorted_row(z2[r], np.flatnonzero(above[r]), float(rest[r]))
        if stage < len(cuts):
            wide = z2[r] > cuts[stage][r]
            left = float(np.max(z2[r], where=~wide, initial=-np.inf))
            return _sorted_row(z2[r], np.flatnonzero(wide), left)
        return _sorted_row(z2[r], np.arange(V), -np.inf)  # the whole row

    return head, len(cuts) + 1


#: The probability under which :func:`_nucleus_heads` leaves tokens out, stage by stage.
_HEAD_FLOORS = (1e-3, 1e-6)


def _sorted_row(
    z: np.ndarray, ids: np.ndarray, rest: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """``(z[ids] in descending order, those ids, rest)``."""
    order = ids[np.argsort(-z[ids], kind="stable")]
    return z[order], order, rest


def _nucleus_row(
    head: tuple[np.ndarray, np.ndarray, float],
    z: np.ndarray,
    zn: np.ndarray,
    weight: np.ndarray | None,
    temps: list[float],
    lses: np.ndarray,
    tops: list[float],
) -> np.ndarray | None:
    """One row's nucleus log-probabilities ``(T, len(tops), len(zn) + 1)`` from its sorted
    ``head`` (:data:`DECODING_TIE_RULE`, the floats of :func:`nucleus_logprobs`); None
    where some nucleus does not end inside the head at a value strictly above ``rest``
    (then only the whole row, sorted, gives it: ``rest`` ``-inf``)."""
    zs, ids, rest = head
    whole = rest == -np.inf and zs.size == z.size
    out = np.full((len(temps), len(tops), zn.size + 1), np.nan)
    w = weight[ids] if weight is not None else None
    for ti, temp in enumerate(temps):
        lse = lses[ti]
        sp = np.exp(zs / temp - lse)
        csum = np.cumsum(sp)
        lp = zn / temp - lse
        for pi, top_p in enumerate(tops):
            reached = csum >= top_p
            if not whole and not (reached.any() and zs[reached.argmax()] > rest):
                return None
            k = int(reached.argmax()) if reached.any() else zs.size - 1
            thr = zs[k]  # the last admitted value; every value tied with it is kept
            inside = zs >= thr
            norm = np.log(sp[inside].sum())
            out[ti, pi, :-1] = np.where(zn >= thr, lp - norm, -np.inf)
            if w is not None:  # the pooled tokens inside the nucleus, summed
                with np.errstate(divide="ignore"):
                    out[ti, pi, -1] = np.log(sp[inside] @ w[inside]) - norm
    return out


def nucleus_logprobs(
    logprobs: np.ndarray,
    need: np.ndarray,
    temperatures: Sequence[float] | np.ndarray,
    top_ps: Sequence[float] | np.ndarray,
    *,
    unlisted_max: np.ndarray | float | None = None,
    pooled: Sequence[int] | np.ndarray | None = None,
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
    pooled : np.ndarray, optional
        Indices of tokens whose probabilities are wanted only as a sum (a multi-token
        answer's stop check: every token that would continue it): one more column,
        the log of their summed probability (over the full vocabulary only).

    Returns
    -------
    np.ndarray
        ``(..., len(temperatures), len(top_ps), len(need) [+ 1])`` float64; ``-inf``
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
    temps, tops = _checked_grid(temperatures, top_ps)
    lead = z.shape[:-1]
    complete = unlisted_max is None
    if pooled is not None and not complete:
        raise XlikertError("pooled token sums need the full vocabulary, not a top-k list")
    n = need.size
    out = np.full((*lead, len(temps), len(tops), n + (pooled is not None)), np.nan)
    zn = z[..., need]
    zp = z[..., np.asarray(pooled, dtype=np.intp)] if pooled is not None else None
    lses = {}  # temperature index -> (..., 1) log normaliser of z / T
    for ti, temp in enumerate(temps):
        if complete:
            lses[ti] = logsumexp(z / temp)
        elif temp == 1.0:
            lses[ti] = np.zeros((*lead, 1))  # listed values are already normalised
        for pi, top_p in enumerate(tops):
            if ti in lses and top_p >= 1:
                out[..., ti, pi, :n] = zn / temp - lses[ti]
                if zp is not None:
                    out[..., ti, pi, n] = (logsumexp(zp / temp) - lses[ti])[..., 0]
    cut = [pi for pi, p in enumerate(tops) if p < 1]
    if not cut or not lses:
        return out
    # top_p < 1: row by row, over the row's values sorted in descending order, or only
    # as many of the largest as hold every nucleus asked for (_descending_head)
    rows = int(np.prod(lead, dtype=np.int64))
    z2, zn2 = z.reshape(rows, z.shape[-1]), zn.reshape(rows, n)
    zp2 = zp.reshape(rows, -1) if zp is not None else None
    out2 = out.reshape(rows, len(temps), len(tops), out.shape[-1])
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
                norm = np.log(sp[zs >= thr].sum())
                vals = np.where(zn2[r] >= thr, lp - norm, -np.inf)
                # an incomplete list: known only when no unlisted token can reach thr
                if not complete and not (reached.any() and np.exp(thr / temp - lse) > bound[r]):
                    vals.fill(np.nan)
                out2[r, ti, pi, :n] = vals
                if zp2 is not None:  # the pooled tokens inside the nucleus, summed
                    inside = zp2[r][zp2[r] >= thr] / temp - lse
                    out2[r, ti, pi, n] = logsumexp(inside)[0] - norm if inside.size else -np.inf
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


def _threshold_inside(
    head: np.ndarray, rest: float, temp: float, lse: float, top_ps: Sequence[float] | np.ndarray
) -> bool:
    """Whether every nucleus at temperature ``temp`` ends inside ``head`` (sorted,
    descending) at a value strictly above ``rest``, the largest value left out."""
    csum = np.cumsum(np.exp(head / temp - lse))
    for top_p in top_ps:
        reached = csum >= top_p
        if not (reached.any() and head[reached.argmax()] > rest):
            return False
    return True


def logsumexp(z: np.ndarray) -> np.ndarray:
    """``log(sum(exp(z)))`` over the last axis (kept, length 1), safe for all -inf rows.

    Examples
    --------
    >>> logsumexp(np.log(np.array([[0.25, 0.75], [0.5, 0.5]]))).round(12).ravel().tolist()
    [0.0, 0.0]
    """
    m = z.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out: np.ndarray = m + np.log(np.exp(z - m).sum(-1, keepdims=True))
    return out


def topk_intervals(
    listed_prob: np.ndarray,
    listed_score: np.ndarray,
    n_scores: int,
    unlisted_valid: np.ndarray | None,
    *,
    out_of_order: int = 1,
    rtol: float = 0.0,
) -> dict[str, np.ndarray | np.float64]:
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
    p_b, R = _unlisted(p, out_of_order, rtol)
    a = scale_mass(p, sc, n_scores)
    a_lo, a_hi = a * (1 - rtol), a * (1 + rtol)
    U = _unlisted_mass(unlisted_valid, n_scores, p_b, R)
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


def _unlisted(p: np.ndarray, out_of_order: int, rtol: float) -> tuple[float, float]:
    """``p_b``, the most an unlisted token can have, and ``R``, the most all of them can have."""
    ranked = np.sort(p)[::-1]
    j = p.size - out_of_order  # the true top-j are listed
    p_b = float(ranked[j - 1]) * (1 + rtol) if j >= 1 else 1.0
    return p_b, max(0.0, 1.0 - float(p.sum()) * (1 - rtol))


def _unlisted_mass(unlisted: np.ndarray | None, n: int, p_b: float, R: float) -> np.ndarray:
    """``U_y = min(m_y p_b, R)``: the most the unlisted answers of each class can have."""
    if unlisted is None:
        return np.full(n, R)
    return np.minimum(np.asarray(unlisted, dtype=np.float64) * min(p_b, 1.0), R)


def topk_option_intervals(
    listed_prob: np.ndarray,
    listed_option: np.ndarray,
    n_options: int,
    unlisted: np.ndarray | None,
    *,
    out_of_order: int = 1,
    rtol: float = 0.0,
) -> dict[str, np.ndarray]:
    """Certified intervals of each non-substantive answer's mass from a server's top-k list.

    As :func:`topk_intervals` (:data:`TOPK_BOUNDS_RULE`) for the raw mass of a
    class of answers: with ``b_o`` the listed mass of option ``o`` and ``U_o`` the
    most its unlisted answers can have, the mass is in ``[b_o (1 - rtol),
    min(1, b_o (1 + rtol) + U_o)]``; the stored value is ``b_o``.

    Parameters
    ----------
    listed_prob : np.ndarray
        ``(n,)`` probabilities of the n distinct listed tokens.
    listed_option : np.ndarray
        ``(n,)`` option index of each listed token, -1 where it answers no option.
    n_options : int
        Number of options.
    unlisted : np.ndarray or None
        ``(n_options,)`` answer tokens of each option not in the list, or None when unknown.
    out_of_order, rtol
        As in :func:`topk_intervals`.

    Returns
    -------
    dict
        ``nonsubstantive_mass``, ``nonsubstantive_mass_lower`` and
        ``nonsubstantive_mass_upper``, each ``(n_options,)``.

    Examples
    --------
    >>> b = topk_option_intervals(np.array([0.5, 0.3, 0.1]), np.array([-1, 0, -1]), 1,
    ...                           np.array([1]), out_of_order=0)
    >>> b["nonsubstantive_mass"].tolist(), b["nonsubstantive_mass_upper"].round(6).tolist()
    ([0.3], [0.4])
    """
    p = np.asarray(listed_prob, dtype=np.float64)
    p_b, R = _unlisted(p, out_of_order, rtol)
    b = scale_mass(p, np.asarray(listed_option), n_options)
    U = _unlisted_mass(unlisted, n_options, p_b, R)
    return {
        "nonsubstantive_mass": b,
        "nonsubstantive_mass_lower": b * (1 - rtol),
        "nonsubstantive_mass_upper": np.minimum(b * (1 + rtol) + U, 1.0),
    }
