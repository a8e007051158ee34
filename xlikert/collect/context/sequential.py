"""Sequential administration: a battery asked in one conversation, its answers' exact mixtures.

:func:`administer` asks the items of a :class:`Battery` in one conversation
(:data:`CONVERSATION_RULE`) and reads the exact answer PMF of every item after
every answer history, enumerating the histories in a prefix tree: one forward
pass per history read, each from its parent's cached prompt (the backend's
:class:`~xlikert.collect.protocol.ContextReader`). Histories are read best first
(largest probability first). A small battery is read completely: exact. A longer
one stops when the certified error of every item's PMF is at most ``tol``
(:data:`~xlikert.kernels.history_tree.CERTIFIED_BOUND_RULE`) or when
``max_passes`` forward passes are spent: then it says so (a ``RuntimeWarning``)
and keeps the bound it reached, never a smaller one.

A questionnaire as fielded is a battery whose items have their own answers
(:attr:`Battery.answers`: their own points, non-substantive options, nominal items):
each item is read over its own answers, the tree branches on each of them, options
included, and an earlier answer is written with its own label
(:func:`~xlikert.kernels.history_tree.answer_pmf`).

Examples
--------
>>> battery = Battery("Rate 1-7.", ("I like tea.", "I like coffee."), ("1", "2", "3"))
>>> res = administer(model, battery, tol=1e-4)  # doctest: +SKIP
>>> res.marginals()["pmf"].shape  # doctest: +SKIP
(2, 3)
"""

from __future__ import annotations

import heapq
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.errors import CollectionError
from ...kernels.history_tree import (
    HistoryTree,
    answer_pmf,
    certified_fill,
    item_marginals,
    pairwise_joints,
)
from ..progress import CellClock, CellProgressFn
from ..protocol import ContextReader, CountingReader, Model, conversation_model

__all__ = [
    "CONVERSATION_RULE",
    "DEFAULT_MAX_PASSES",
    "EXPANSION_RULE",
    "Battery",
    "SequentialResult",
    "administer",
]

#: What the model sees; stored with every sequential result.
CONVERSATION_RULE = (
    "one conversation per condition: the framing as the system prompt; each earlier item as a "
    "user turn and the model's answer as its reply (the answer label of that score, rendered "
    "by the chat template as an assistant message with its end of turn; in the plain format "
    "'Answer: <label>'); the item asked as the last user turn with the generation prompt; the "
    "answer read exactly after it, from its token ids, as in isolation. An item with its own "
    "options is read over its own answers (its points and the non-substantive options it "
    "offers, each with its own answer label, as in isolation), and its earlier answer is "
    "written with that answer's own label (a point's, or an option's such as 'Don't know' "
    "or its code)"
)

#: How the tree is read; stored with every sequential result.
EXPANSION_RULE = (
    "histories are read best first: the unread history of largest probability first (ties: "
    "the one created first), in batches of up to `batch` histories, one forward pass each, "
    "until the certified error of every item's PMF is at most tol, or every history of "
    "positive probability is read (tol = 0: exact), or max_passes passes are spent (then the "
    "error reached is stored and a RuntimeWarning says so)"
)

#: Forward passes one conversation may spend unless told otherwise.
DEFAULT_MAX_PASSES = 10_000


@dataclass(frozen=True)
class Battery:
    """Items asked in one conversation, in the order asked.

    Parameters
    ----------
    system : str
        The framing, sent as the system prompt.
    questions : tuple of str
        The items' texts, one user turn each, in the order asked.
    replies : tuple of str
        The model's reply for each score, in score order: the answer labels (the
        digits by default), written into the conversation as its earlier answers.
    items : tuple of str, optional
        The items' ids (default ``"1", "2", ...``).
    scores : tuple of int, optional
        The scale values of the replies (default ``1, 2, ...``).
    options : tuple of str, optional
        The non-substantive options any item offers (the results' ``option`` axis:
        ``"Don't know"``, ``"Refused"``).
    answers : tuple of tuple of str, optional
        Each item's own answer labels (a questionnaire as fielded): one per score, then
        one per option, ``""`` off the item's support and for an option it does not
        offer (the layout of :attr:`~xlikert.collect.options.CollectOptions.answer_labels`).
        Each item is then read over its own answers, the history tree branches on them
        and an earlier answer is written with its own label. Empty: every item answers
        on ``replies``.

    Examples
    --------
    >>> b = Battery("Rate 1-3.", ("Tea?", "Coffee?"), ("1", "2", "3"))
    >>> b.items, b.scores
    (('1', '2'), (1, 2, 3))
    >>> b.turns([2])
    [('Tea?', '3')]

    A 1..3 item with a "Don't know" (code 8) and an item on 0..2 (the scores' union 0..3):

    >>> q = Battery("Rate.", ("Tea?", "Coffee?"), ("0", "1", "2", "3"), scores=(0, 1, 2, 3),
    ...             options=("Don't know",),
    ...             answers=(("", "1", "2", "3", "8"), ("0", "1", "2", "", "")))
    >>> q.turns([4]), q.offered(1)
    ([('Tea?', '8')], (0, 1, 2))
    """

    system: str
    questions: tuple[str, ...]
    replies: tuple[str, ...]
    items: tuple[str, ...] = ()
    scores: tuple[int, ...] = ()
    options: tuple[str, ...] = ()
    answers: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "questions", tuple(str(q) for q in self.questions))
        object.__setattr__(self, "replies", tuple(str(r) for r in self.replies))
        if not self.items:
            object.__setattr__(self, "items", tuple(str(i + 1) for i in range(len(self.questions))))
        object.__setattr__(self, "items", tuple(str(i) for i in self.items))
        if not self.questions:
            raise CollectionError("a battery needs at least one item")
        if len(self.items) != len(self.questions):
            raise CollectionError(
                f"a battery of {len(self.questions)} questions has {len(self.items)} item ids"
            )
        if len(self.replies) < 2:
            raise CollectionError(f"a battery needs two answers or more, got {self.replies}")
        scores = self.scores or range(1, len(self.replies) + 1)
        object.__setattr__(self, "scores", tuple(int(y) for y in scores))
        if len(self.scores) != len(self.replies):
            raise CollectionError(
                f"a battery of {len(self.replies)} replies has {len(self.scores)} scores"
            )
        object.__setattr__(self, "options", tuple(str(o) for o in self.options))
        answers = tuple(tuple(str(x) for x in row) for row in self.answers)
        object.__setattr__(self, "answers", answers)
        if not answers:
            if self.options:
                raise CollectionError(
                    f"a battery with non-substantive options {list(self.options)} needs each "
                    "item's own answers (answers=...): which item offers which, with its label"
                )
            return
        S, A = len(self.scores), len(self.scores) + len(self.options)
        if len(answers) != len(self.questions):
            raise CollectionError(
                f"a battery of {len(self.questions)} questions has answers for {len(answers)}"
            )
        for item, row in zip(self.items, answers, strict=True):
            if len(row) != A:
                raise CollectionError(
                    f"item {item!r}: {len(row)} answer labels; the battery has {S} scores "
                    f"and {len(self.options)} options ({A} labels, '' where not offered)"
                )
            if sum(1 for x in row[:S] if x) < 2:
                raise CollectionError(
                    f"item {item!r}: answer labels {list(row)} label fewer than two points"
                )

    def reply(self, item: int, answer: int) -> str:
        """The reply written for answer index ``answer`` (a score, then an option) of the
        item at position ``item``."""
        return self.answers[item][answer] if self.answers else self.replies[answer]

    def offered(self, item: int) -> tuple[int, ...]:
        """The answer indices the item at position ``item`` offers (its points, its options)."""
        if not self.answers:
            return tuple(range(len(self.replies)))
        return tuple(a for a, x in enumerate(self.answers[item]) if x)

    def labels(self, item: int) -> tuple[str, ...] | None:
        """The answer labels the item at position ``item`` is read with (None: the model's)."""
        return self.answers[item] if self.answers else None

    def turns(self, path: Sequence[int]) -> list[tuple[str, str]]:
        """The earlier turns of a history: ``(question, reply)`` for each answer."""
        return [(self.questions[i], self.reply(i, a)) for i, a in enumerate(path)]


@dataclass
class SequentialResult:
    """A conversation's history tree and how it was read.

    Attributes
    ----------
    battery : Battery
    tree : HistoryTree
    tol : float
        The error asked for (0: exact).
    max_passes : int
        The forward passes allowed.
    passes : int
        Forward passes spent (histories read).
    tol_met : bool
        Whether the certified error of every item's PMF and valid mass is at most ``tol``.
    seconds : float
        Time spent reading.
    info : dict
        What the backend's reader reports (e.g. ``tokens_run``).
    decoding_grid : tuple
        ``(temperatures, top_ps)`` of the tree's ``decoding_pmf``.
    """

    battery: Battery
    tree: HistoryTree
    tol: float
    max_passes: int
    passes: int
    tol_met: bool
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    decoding_grid: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())

    def marginals(self) -> dict[str, np.ndarray]:
        """:func:`~xlikert.kernels.history_tree.item_marginals` of the tree."""
        return item_marginals(self.tree)

    def joints(self) -> dict[str, np.ndarray]:
        """:func:`~xlikert.kernels.history_tree.pairwise_joints` of the tree."""
        return pairwise_joints(self.tree)

    def conversation(self, model: Model, path: Sequence[int]) -> str:
        """The exact text the model read for the history ``path`` (score indices)."""
        b = self.battery
        text, _ = conversation_model(model).conversation(
            b.system, b.turns(path), b.questions[len(path)]
        )
        return text


class _Growing:
    """The tree while it is read: nodes appended, the errors of the raw PMFs kept up to date."""

    #: The readout every node keeps (the others, e.g. ``script_mass``, are not mixed).
    KEYS = ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass", "nonsubstantive_mass",
            "decoding_nonsubstantive_mass")  # fmt: skip

    def __init__(self, n_items: int, n_scores: int, n_options: int = 0):
        self.K, self.S, self.n_opt = n_items, n_scores, n_options
        self.parent: list[int] = []
        self.item: list[int] = []
        self.answer: list[int] = []
        self.prob: list[float] = []
        self.out: dict[int, dict[str, np.ndarray]] = {}
        self.known = np.zeros((n_items, n_scores))  # the PMFs of the histories read
        # their valid mass, each option's mass and the failed mass
        self.known_v = np.zeros((n_items, 2 + n_options))
        # what the histories read within a bound leave (READING_BOUND_RULE): of their own
        # item's PMF and valid mass, and of their branches (for every later item)
        self.eps: dict[int, float] = {}
        self.slack = np.zeros((3, n_items))

    def add(self, parent: int, item: int, answer: int, prob: float) -> int:
        self.parent.append(parent)
        self.item.append(item)
        self.answer.append(answer)
        self.prob.append(prob)
        return len(self.parent) - 1

    def path(self, n: int) -> list[int]:
        out = []
        while self.parent[n] >= 0:
            out.append(self.answer[n])
            n = self.parent[n]
        return out[::-1]

    def read(self, n: int, row: dict[str, np.ndarray]) -> np.ndarray:
        """Record the readout of node ``n``; returns the answer distribution its branches
        take (:func:`~xlikert.kernels.history_tree.answer_pmf`: lower ends where the
        reading is bounded)."""
        eps = float(row.pop("answer_error", 0.0))
        self.out[n] = row
        j, p = self.item[n], self.prob[n]
        self.known[j] += p * row["pmf"]
        vm = float(row["valid_mass"])
        options = np.nan_to_num(row["nonsubstantive_mass"], nan=0.0) if self.n_opt else np.zeros(0)
        rest = vm + options.sum()
        q = answer_pmf(row["pmf"], row["valid_mass"], row.get("nonsubstantive_mass"),
                       np.array(eps) if eps > 0 else None)  # fmt: skip
        failed = 1.0 - rest
        if eps > 0:
            self.eps[n] = eps
            failed = max(failed - eps, 0.0)
            self.slack[0, j] += p * max(1.0 - float(row["pmf"].sum()), 0.0)
            self.slack[1, j] += p * max(1.0 - rest - failed, 0.0)
            self.slack[2, j] += p * max(1.0 - float(q.sum()), 0.0) if j < self.K - 1 else 0.0
        self.known_v[j] += p * np.array([vm, *options, failed])
        return q

    def errors(self) -> np.ndarray:
        """The certified error of every item's PMF and valid mass now."""
        prob, item = np.asarray(self.prob), np.asarray(self.item)
        waiting = np.ones(prob.size, dtype=bool)
        waiting[list(self.out)] = False
        u = np.cumsum(np.bincount(item[waiting], prob[waiting], minlength=self.K))
        later = np.concatenate([[0.0], np.cumsum(self.slack[2])[:-1]])
        return np.maximum(certified_fill(self.known, u + self.slack[0] + later)[1],
                          certified_fill(self.known_v, u + self.slack[1] + later)[1])  # fmt: skip

    def tree(self) -> HistoryTree:
        N = len(self.parent)
        read = np.zeros(N, dtype=bool)
        read[list(self.out)] = True
        first = next(iter(self.out.values()))
        arrays = {}
        for key, val in first.items():
            arrays[key] = np.full((N, *val.shape), np.nan)
            for n, row in self.out.items():
                arrays[key][n] = row[key]
        return HistoryTree(
            self.K, self.S, np.asarray(self.parent, dtype=np.int64),
            np.asarray(self.item, dtype=np.int64), np.asarray(self.answer, dtype=np.int64),
            read, arrays["pmf"], arrays["valid_mass"], arrays.get("decoding_pmf"),
            arrays.get("decoding_valid_mass"), arrays.get("nonsubstantive_mass"),
            arrays.get("decoding_nonsubstantive_mass"), self._answer_error(N),
        )  # fmt: skip

    def _answer_error(self, N: int) -> np.ndarray | None:
        """Each node's reading width (NaN where not read); None: every reading exact."""
        if not self.eps:
            return None
        out = np.full(N, np.nan)
        out[list(self.out)] = 0.0
        out[list(self.eps)] = list(self.eps.values())
        return out


def administer(
    model: Model,
    battery: Battery,
    *,
    tol: float = 0.0,
    max_passes: int = DEFAULT_MAX_PASSES,
    batch: int = 64,
    session: str | None = None,
    progress: CellProgressFn | None = None,
) -> SequentialResult:
    """Ask a battery in one conversation; read its answer-history tree exactly or certified.

    Parameters
    ----------
    model
        A model that reads conversations exactly
        (:class:`~xlikert.collect.protocol.ConversationModel`: the transformers or
        the in-process vLLM backend).
    battery
        The items, in the order asked, and the replies; with its items' own answers
        (:attr:`Battery.answers`), each item is read over its own answers (the model
        relabelled to them, :meth:`~xlikert.collect.protocol.Model.relabel`, and set
        back after) and the tree branches on them, options included.
    tol : float, keyword-only
        The certified error asked of every item's PMF and valid mass:
        ``|returned - exact| <= tol`` per score (:data:`~xlikert.kernels.history_tree.CERTIFIED_BOUND_RULE`);
        0 reads every history of positive probability (exact).
    max_passes : int, keyword-only
        The forward passes (histories read) allowed. Reached before ``tol`` is
        met, the tree is returned with the error it reached (``tol_met`` False)
        and a ``RuntimeWarning`` says so.
    batch : int, keyword-only
        Histories read per call to the backend (it batches them further).
    session : str, optional
        Names the tree for the backend's reader (vLLM: its cache salt); default the
        battery's texts.
    progress : callable, optional
        Called after each round of histories read with the passes, the certified error
        reached (the largest item's), the unread probability and the time spent
        (:class:`~xlikert.collect.progress.CellProgress`).

    Returns
    -------
    SequentialResult

    Raises
    ------
    CollectionError
        A backend that cannot read conversations exactly; a history after which
        the model gives no valid answer at all (no history can continue from it), or
        only non-substantive ones (the item's PMF over its points is undefined there);
        a battery with its own answers on other scores or options than the model's.
    XlikertError
        ``tol`` negative or not a number, ``max_passes`` or ``batch`` below 1.

    Warns
    -----
    RuntimeWarning
        ``max_passes`` spent before ``tol`` was met.
    """
    tol, max_passes, batch = _check_args(tol, max_passes, batch)
    conv = conversation_model(model)
    _check_answers(model, battery)
    K, S, n_opt = len(battery.questions), len(battery.scores), len(battery.options)
    grow = _Growing(K, S, n_opt)
    heap = [(-1.0, grow.add(-1, 0, -1, 1.0))]
    passes, t0 = 0, time.perf_counter()
    clock = CellClock(progress, "sequential", budget=max_passes, tol=tol)
    reader = conv.context_reader(session or "\0".join((battery.system, *battery.questions)))
    before = model.options.answer_labels
    try:
        while heap and passes < max_passes and grow.errors().max() > tol:
            take = [
                heapq.heappop(heap)[1] for _ in range(min(batch, max_passes - passes, len(heap)))
            ]
            paths = [grow.path(n) for n in take]
            ids = [
                conv.conversation(battery.system, battery.turns(p), battery.questions[len(p)])[1]
                for p in paths
            ]
            rows = _read(model, reader, battery, paths, ids)
            passes += len(take)
            for n, p, row in zip(take, paths, rows, strict=True):
                _check_row(row, battery, p, S, n_opt)
                q = grow.read(n, row)
                if len(p) == K - 1:
                    continue
                for a in range(q.size):
                    w = grow.prob[n] * float(q[a])
                    if w > 0:
                        heapq.heappush(heap, (-w, grow.add(n, len(p) + 1, a, w)))
            clock(passes=passes, bound=float(grow.errors().max()),
                  unread=-float(sum(h[0] for h in heap)))  # fmt: skip
        info = {"tokens_run": reader.tokens_run} if isinstance(reader, CountingReader) else {}
    finally:
        reader.close()
        if battery.answers and model.options.answer_labels != before:
            model.relabel(before)
    error = grow.errors()
    met = bool(error.max() <= tol)
    if not met:
        _say_short(battery, error, tol, max_passes, spent=bool(heap))
    opts = model.options
    grid = (tuple(map(float, opts.temperatures)), tuple(map(float, opts.top_ps)))
    return SequentialResult(
        battery, grow.tree(), tol, max_passes, passes, met, time.perf_counter() - t0, info, grid
    )


def _say_short(battery: Battery, error: np.ndarray, tol: float, max_passes: int,
               spent: bool) -> None:  # fmt: skip
    """Warn that the certified error did not meet ``tol``: the budget was ``spent``, or
    every history was read and the answers' own readings (the labels' walk) leave more."""
    worst = [battery.items[j] for j in np.flatnonzero(error > tol)]
    why = (
        f"max_passes={max_passes} forward passes were spent before the certified error "
        f"met tol={tol:g}"
        if spent
        else "every history was read, and the answers' own readings (word labels read by "
        f"the labels' walk to answer_tol) leave more than tol={tol:g}"
    )
    warnings.warn(
        f"sequential administration: {why}: items {worst} keep an error of up to "
        f"{float(error.max()):.3g} (stored with the result). Raise max_passes or tol "
        "(or lower answer_tol).",
        RuntimeWarning,
        stacklevel=3,
    )


def _check_args(tol: float, max_passes: int, batch: int) -> tuple[float, int, int]:
    from ...core.errors import XlikertError

    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise XlikertError(f"tol must be a number >= 0, got {tol!r}") from None
    if not (np.isfinite(tol) and tol >= 0):
        raise XlikertError(f"tol must be a finite number >= 0 (0: exact), got {tol!r}")
    for name, val in (("max_passes", max_passes), ("batch", batch)):
        if not (isinstance(val, int | np.integer) and val >= 1):
            raise XlikertError(f"{name} must be an integer >= 1, got {val!r}")
    return tol, int(max_passes), int(batch)


def _check_answers(model: Model, battery: Battery) -> None:
    """A battery with its items' own answers is read on the model's scale and options."""
    if not battery.answers:
        return
    opts = model.options
    scale = tuple(int(y) for y in opts.scale or ())
    if scale != battery.scores or tuple(opts.nonsubstantive) != battery.options:
        raise CollectionError(
            f"model {getattr(model, 'name', model)!r} reads the scores {list(scale)} and "
            f"the options {list(opts.nonsubstantive)}; the battery's items answer on the "
            f"scores {list(battery.scores)} and the options {list(battery.options)}: open the "
            "model with CollectOptions(scale=..., nonsubstantive=...) of the battery"
        )


def _read(
    model: Model,
    reader: ContextReader,
    battery: Battery,
    paths: list[list[int]],
    ids: list[list[int]],
) -> list[dict[str, np.ndarray]]:
    """The readout after each history, one row each: the histories of the items that share
    answer labels read together, the model relabelled to them (a battery with its own
    answers), every row with the same keys (:attr:`_Growing.KEYS`)."""
    K = len(battery.questions)
    groups: dict[tuple[str, ...] | None, list[int]] = {}
    for b, p in enumerate(paths):
        groups.setdefault(battery.labels(len(p)), []).append(b)
    rows: list[dict[str, np.ndarray]] = [{} for _ in paths]
    n_opt = len(battery.options)
    for labels, members in groups.items():
        if labels is not None:
            model.relabel(labels)
        out = reader.read([ids[b] for b in members], keep=[len(paths[b]) < K - 1 for b in members])
        for r, b in enumerate(members):
            row = _lower_ends(out, r)
            if n_opt:  # NaN: the item offers none of the options
                row.setdefault("nonsubstantive_mass", np.full(n_opt, np.nan))
                if "decoding_pmf" in row:
                    row.setdefault("decoding_nonsubstantive_mass",
                                   np.full((*row["decoding_valid_mass"].shape, n_opt), np.nan))  # fmt: skip
            else:
                row.pop("nonsubstantive_mass", None)
                row.pop("decoding_nonsubstantive_mass", None)
            rows[b] = row
    return rows


def _lower_ends(out: dict[str, np.ndarray], r: int) -> dict[str, np.ndarray]:
    """Row ``r`` of a readout (:attr:`_Growing.KEYS`); where the answers were read within
    a bound (``answer_error`` > 0: the labels' walk), its certified lower ends
    (:data:`~xlikert.kernels.history_tree.READING_BOUND_RULE`): the PMF's lower ends, the
    masses read, and under the decoding grid each point's mass read over the valid mass
    read plus the width. ``answer_error`` is kept where the readout has it."""
    row = {k: np.asarray(v[r], dtype=np.float64) for k, v in out.items() if k in _Growing.KEYS}
    if "answer_error" not in out:
        return row
    eps = float(out["answer_error"][r])
    row["answer_error"] = np.asarray(eps)
    if eps > 0:
        row["pmf"] = np.asarray(out["pmf_lower"][r], dtype=np.float64)
        if "decoding_pmf" in row:
            dvm = row["decoding_valid_mass"][..., None]
            with np.errstate(invalid="ignore"):
                row["decoding_pmf"] = np.where(dvm > 0, row["decoding_pmf"] * dvm / (dvm + eps),
                                               0.0)  # fmt: skip
    return row


def _check_row(
    row: dict[str, np.ndarray], battery: Battery, path: list[int], S: int, n_opt: int = 0
) -> None:
    """A history read must give a PMF over the battery's scores (no valid answer: no history
    can continue from it, and the conversation's PMFs are undefined)."""
    pmf = row["pmf"]
    if pmf.shape != (S,):
        raise CollectionError(
            f"the backend read {pmf.shape[-1]} scores; the battery has {S} replies"
        )
    if n_opt and row["nonsubstantive_mass"].shape != (n_opt,):
        raise CollectionError(
            f"the backend read {row['nonsubstantive_mass'].shape[-1]} non-substantive options; "
            f"the battery has {n_opt}"
        )
    if not np.isfinite(pmf).all():
        said = ", ".join(f"{battery.items[i]}: {battery.reply(i, a)!r}" for i, a in enumerate(path))
        if n_opt and np.nansum(row["nonsubstantive_mass"]) > 0:
            raise CollectionError(
                f"item {battery.items[len(path)]!r} after the answers ({said or 'none'}): the "
                "model gives only non-substantive answers (substantive mass 0), so the item's "
                "PMF over its points is undefined after this history; sequential "
                "administration mixes each item's PMF over its histories"
            )
        raise CollectionError(
            f"item {battery.items[len(path)]!r} after the answers ({said or 'none'}): the model "
            "gives no valid answer at all (valid mass 0), so no history continues from here; "
            "sequential administration conditions each answer on being valid"
        )
