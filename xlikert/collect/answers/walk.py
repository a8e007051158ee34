"""The best-first certified walk over the labels' trie: word answers read exactly and fast.

The multi-token rule sums, over every spelling of a label, the spelling's probability
times the probability that the next token does not go on with it. Listing the
spellings is hopeless in a large vocabulary ("Strongly disagree" has 43,596 in Qwen
2.5's), yet almost all of a label's mass sits on a handful. The walk reads the tree of
spellings (:class:`~xlikert.collect.answers.trie.LabelTrie`) from the root (the prompt)
down, one next-token read a node, the nodes of largest unread mass first:

* a read splits the node's mass ``m`` three ways: ``m * P(t)`` to each child (a token
  ``t`` that keeps the bytes a label prefix), ``m * P(next token does not go on)`` to
  the label the node completes (if any), the rest to failure;
* an unread node's mass is certified: each label's mass lies in ``[read, read + the
  unread mass of the nodes consistent with it]`` (:func:`mass_bounds`);
* the first round reads the root and the nodes of the labels' canonical tokenizations and
  of their tokenizations after a space
  (:meth:`_Walker.canonical_nodes`: read in any case, and most of the mass), so that no
  round is spent per token of the longest label;
* nodes are read in rounds, the frontier's largest first (ties by token ids), each the
  fewest that could meet ``tol`` (at most :data:`ROUND_NODES`; :meth:`_Walker.round_size`),
  so a backend of any batch size reads the same nodes; below each of them, the paths on
  to the canonical spellings it begins are read in the same pass
  (:meth:`_Walker.lookahead`: a label's mass mostly goes down its tokens, so a round
  goes several tokens deep); the walk stops when
  the certified width is at most ``tol`` or the pass budget is spent. ``tol = 0`` reads
  every node of positive mass: the exhaustive rule itself.

The numbers are pure numpy; a backend only supplies the next-token rows (a
:class:`NodeReader`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...kernels.readout import next_token_readout
from ..progress import CellClock, CellProgressFn
from .layout import AnswerLayout
from .numerals import scripts as all_scripts
from .trie import LabelTrie

__all__ = [
    "ROUND_NODES",
    "WALK_ROUNDS",
    "WALK_RULE",
    "LabelWalk",
    "NodeReader",
    "RoundAsk",
    "UnitNodeReader",
    "mass_bounds",
    "run_walks",
    "walk_labels",
    "walk_readout",
    "walk_steps",
]

#: The most nodes one round reads (fewer where fewer could meet ``answer_tol``, and in the
#: last round of a budget): the rounds depend on the masses read alone, so that every
#: backend and batch size reads the same nodes.
ROUND_NODES = 64

#: The version of the rule that picks each round's nodes (:data:`WALK_RULE`), part of
#: every cell's key (:func:`~xlikert.collect.run.identity.numbers_options`): 1 read
#: rounds of 64 nodes always; 2 reads the fewest that could meet ``answer_tol``; 3 reads
#: ahead, below each node a round reads, the paths on to the canonical spellings it begins
#: (:meth:`_Walker.lookahead`), and the first round the labels' spellings after a space too.
WALK_ROUNDS = 3

#: How the walk reads a rule's labels; stored in the results' attrs.
WALK_RULE = (
    "word answers by a best-first walk over the labels' token trie: a node is a token prefix "
    "whose bytes are a prefix of some label; a read (log-softmax over the whole vocabulary) "
    "gives each child token's mass, the completed label's mass times P(next token does not "
    "go on) and failure; the first round reads the root and, in the same pass, every node "
    "of the labels' canonical tokenizations and of their tokenizations after a space (each "
    "split after its parent); then in rounds of "
    "the nodes of largest unread mass (any column of the "
    "decoding grid; ties by token ids), each round the fewest of them whose reading could "
    "bring the unread mass to answer_tol in every column (at temperature 1, answer_tol times "
    "the valid mass's upper end), were their children of mass 0: at least 1, at most "
    f"{ROUND_NODES}, all {ROUND_NODES} at answer_tol = 0; in the same pass, below each of "
    "them, for each label's canonical tokenization (and after a space) "
    "whose bytes it begins, every prefix of the path on to its end (the lowest-id token "
    "that brings the node's bytes to the tokenization's next token boundary, none where "
    "they end on one, then its tokens after it; shortest first, then by ids, at most "
    f"{ROUND_NODES} and within answer_max_passes), each split after its parent "
    f"(rounds version {WALK_ROUNDS}); "
    "until the unread mass (counted once per label "
    "consistent with a node where labels overlap) is <= answer_tol in every column and the "
    "pmf's interval at temperature 1 is no wider, or "
    "answer_max_passes nodes are read; each mass lies in [read, read + unread mass of the "
    "nodes consistent with it]; pmf bounds: [lo_y / (lo_y + hi_rest), hi_y / (hi_y + "
    "lo_rest)]; the stored point is the read mass (the lower end)"
)


class NodeReader(Protocol):
    """Reads the next token after nodes: the walk's one call into a backend."""

    def __call__(self, nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
        """``(len(nodes), V)`` next-token logits (or log-probabilities) over the whole
        vocabulary after the prompt followed by each node's tokens (``()``: the prompt);
        ``keep[i]`` False: no later node extends node ``i`` (its state need not be kept)."""
        ...


class UnitNodeReader(Protocol):
    """Reads the next token after nodes below several prompts at once: the call of walks
    read together (:func:`run_walks`)."""

    def __len__(self) -> int:
        """The prompts."""
        ...

    def __call__(
        self, asks: Sequence[tuple[int, Sequence[tuple[int, ...]], Sequence[bool]]]
    ) -> Sequence[np.ndarray]:
        """Per ask ``(prompt, nodes, keep)`` (``prompt`` an index): what a
        :class:`NodeReader` after that prompt gives for ``nodes`` and ``keep``."""
        ...


@dataclass(frozen=True)
class LabelWalk:
    """What a walk read: the completed masses, the unread frontier and the cost.

    Attributes
    ----------
    read
        ``(G, S)``: each answer's mass read (column 0 at temperature 1 with no nucleus,
        then each setting of the decoding grid, temperatures outer).
    word_read
        ``(G, W)``: the same per word of the trie (a number once per numeral script).
    frontier_mass, frontier_mask
        ``(N, G)`` masses and ``(N, S)`` consistent answers of the unread nodes.
    disjoint
        :attr:`LabelTrie.disjoint <xlikert.collect.answers.trie.LabelTrie.disjoint>`.
    passes, rounds
        Nodes read and rounds.
    width
        The certified width reached: the largest of the unread mass over the columns and
        of the PMF's interval widths at temperature 1.
    tol_met
        Whether ``width <= tol``.
    canonical
        ``(S,)``: the probability of each label's canonical tokenization (the tokens
        alone, no stop check: what lm-evaluation-harness computes); NaN where unknown.
    topk_id, topk_logprob
        The most probable tokens after the prompt.
    """

    read: np.ndarray
    word_read: np.ndarray
    frontier_mass: np.ndarray
    frontier_mask: np.ndarray
    disjoint: bool
    passes: int
    rounds: int
    width: float
    tol_met: bool
    canonical: np.ndarray
    topk_id: np.ndarray
    topk_logprob: np.ndarray

    def bounds(self, group: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """:func:`mass_bounds` of this walk over the answers ``group`` (default all)."""
        return mass_bounds(
            self.read, self.frontier_mass, self.frontier_mask, group, disjoint=self.disjoint
        )


def mass_bounds(
    read: np.ndarray,
    frontier_mass: np.ndarray,
    frontier_mask: np.ndarray,
    group: np.ndarray | None = None,
    *,
    disjoint: bool = True,
) -> dict[str, np.ndarray]:
    """Certified bounds on each answer's mass, the group's valid mass and its PMF.

    With ``lo_y`` the mass read for answer ``y`` and ``u_n`` the mass of unread node ``n``:

    * ``mass_y`` lies in ``[lo_y, hi_y]``, ``hi_y = lo_y + sum of u_n over the nodes
      consistent with y`` (one answer's spellings through a node are disjoint events);
    * the group's valid mass lies in ``[sum lo, sum lo + sum of u_n * w_n]``, ``w_n = 1``
      for a node consistent with some answer of the group (``disjoint``), else the number
      of such answers (labels that overlap: each may take the node's whole mass);
    * ``pmf_y = mass_y / (mass_y + rest_y)`` grows with ``mass_y`` and falls with the
      group's other mass ``rest_y`` in ``[lo_rest, hi_rest]``, so it lies in
      ``[lo_y / (lo_y + hi_rest), hi_y / (hi_y + lo_rest)]`` (0/0: 0 below; above, 1
      where ``hi_y > 0``, else 0).

    Parameters
    ----------
    read : np.ndarray
        ``(G, S)`` masses read, per column ``G``.
    frontier_mass : np.ndarray
        ``(N, G)`` unread nodes' masses.
    frontier_mask : np.ndarray
        ``(N, S)`` True where node ``n`` is consistent with answer ``s``.
    group : np.ndarray, optional
        ``(S,)`` bool: the answers of the PMF (an item's points); default all.
    disjoint : bool
        Whether the answers' spellings are disjoint events.

    Returns
    -------
    dict
        ``mass_lower``, ``mass_upper``, ``pmf_lower``, ``pmf_upper`` ``(G, S)`` (the PMF
        0 off the group) and ``valid_lower``, ``valid_upper`` ``(G,)``.

    Examples
    --------
    >>> b = mass_bounds(np.array([[0.5, 0.2]]), np.array([[0.1], [0.05]]),
    ...                 np.array([[True, False], [True, True]]))
    >>> b["mass_upper"].round(3).tolist(), b["valid_upper"].round(3).tolist()
    ([[0.65, 0.25]], [0.85])
    >>> b["pmf_lower"].round(4).tolist(), b["pmf_upper"].round(4).tolist()
    ([[0.6667, 0.2353]], [[0.7647, 0.3333]])
    """
    read = np.asarray(read, dtype=np.float64)
    fm = np.asarray(frontier_mass, dtype=np.float64).reshape(-1, read.shape[0])
    mask = np.asarray(frontier_mask, dtype=bool).reshape(fm.shape[0], read.shape[1])
    g = np.ones(read.shape[1], dtype=bool) if group is None else np.asarray(group, dtype=bool)
    hi = read + fm.T @ mask
    count = mask[:, g].sum(1)  # answers of the group consistent with each node
    others = count[:, None] - (mask & g[None, :])
    w_valid = (count > 0) if disjoint else count
    w_others = (others > 0) if disjoint else others
    lo_valid = read[:, g].sum(1)
    lo_rest = lo_valid[:, None] - np.where(g, read, 0.0)
    hi_rest = lo_rest + fm.T @ w_others
    with np.errstate(invalid="ignore", divide="ignore"):
        p_lo = np.where(read > 0, read / (read + hi_rest), 0.0)
        p_hi = np.where(hi > 0, hi / (hi + lo_rest), 0.0)
    return {
        "mass_lower": read,
        "mass_upper": hi,
        "pmf_lower": np.where(g, p_lo, 0.0),
        "pmf_upper": np.where(g, p_hi, 0.0),
        "valid_lower": lo_valid,
        "valid_upper": lo_valid + fm.T @ w_valid,
    }


@dataclass
class _Node:
    tokens: tuple[int, ...]
    data: bytes
    root: bool
    mass: np.ndarray  # (G,)


class _Frontier:
    """The unread nodes, largest mass (over the columns) first, ties by token ids."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, tuple[int, ...]]] = []
        self.live: dict[tuple[int, ...], _Node] = {}

    def push(self, node: _Node) -> None:
        self.live[node.tokens] = node
        heapq.heappush(self.heap, (-float(node.mass.max()), node.tokens))

    def pop(self, n: int) -> list[_Node]:
        out: list[_Node] = []
        while self.heap and len(out) < n:
            _, key = heapq.heappop(self.heap)
            node = self.live.pop(key, None)
            if node is not None:
                out.append(node)
        return out

    def take(self, keys: Sequence[tuple[int, ...]]) -> list[_Node]:
        """The nodes ``keys`` (those unread), out of the frontier, in key order."""
        return [self.live.pop(k) for k in sorted(keys) if k in self.live]

    def ordered_arrays(self, trie: LabelTrie, G: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`arrays` in the order :meth:`pop` takes the nodes."""
        nodes = sorted(self.live.values(), key=lambda n: (-float(n.mass.max()), n.tokens))
        mass = np.array([n.mass for n in nodes]).reshape(len(nodes), G)
        mask = np.array([trie.mask(n.data) for n in nodes]).reshape(len(nodes), len(trie.scale))
        return mass, mask

    def arrays(self, trie: LabelTrie, G: int) -> tuple[np.ndarray, np.ndarray]:
        nodes = list(self.live.values())
        mass = np.array([n.mass for n in nodes]).reshape(len(nodes), G)
        mask = np.array([trie.mask(n.data) for n in nodes]).reshape(len(nodes), len(trie.scale))
        return mass, mask


def _width(
    trie: LabelTrie, frontier: _Frontier, read: np.ndarray, G: int, disjoint: bool,
    points: np.ndarray | None,
) -> float:  # fmt: skip
    """The certified width: the largest of the frontier's mass (once per consistent label
    where labels overlap) over the columns, and of the PMF's interval widths over the
    points at temperature 1 (:func:`mass_bounds`; 0 where nothing is unread)."""
    mass, mask = frontier.arrays(trie, G)
    if not len(mass):
        return 0.0
    w = np.ones(len(mass)) if disjoint else mask.sum(1).astype(float)
    code = np.zeros((1, len(trie.scale)))
    np.add.at(code[0], trie.word_code, read[0])
    b = mass_bounds(code, mass[:, :1], mask, points, disjoint=disjoint)
    pmf = float((b["pmf_upper"] - b["pmf_lower"]).max())
    return max(float((mass * w[:, None]).sum(0).max()), pmf)


def walk_labels(
    trie: LabelTrie,
    read: NodeReader,
    *,
    tol: float = 0.0,
    max_passes: int = 1024,
    temperatures: Sequence[float] = (1.0,),
    top_ps: Sequence[float] = (1.0,),
    top_k: int = 0,
    canonical: Sequence[tuple[int, ...] | None] = (),
    spaced: Sequence[tuple[int, ...] | None] = (),
    points: np.ndarray | None = None,
    round_nodes: int = ROUND_NODES,
    progress: CellProgressFn | None = None,
) -> LabelWalk:
    """Walk the labels' trie after one prompt until the unread mass is at most ``tol``.

    Parameters
    ----------
    trie
        The rule's :class:`~xlikert.collect.answers.trie.LabelTrie`.
    read
        The backend's :class:`NodeReader` for this prompt.
    tol
        The certified width asked: of every mass (each answer's and the valid mass, in every
        column of the grid) and of the PMF over ``points`` at temperature 1 (its interval,
        :func:`mass_bounds`); 0: every node of positive mass, exact.
    max_passes
        The most nodes read in the walk (the canonical spellings' prefixes, read after it
        for their mass, may add a few).
    temperatures, top_ps
        The decoding grid, read from the same rows (its columns follow column 0).
    top_k
        How many of the most probable tokens after the prompt to list.
    points
        ``(S,)`` bool: the answers of the PMF (an item's points; default all).
    canonical
        Per answer, the token ids of its label's canonical tokenization (None: none):
        the prefixes the walk did not read are read after it, so that their mass is known.
    spaced
        Per answer, the token ids of its label after a space
        (:meth:`~xlikert.collect.answers.trie.LabelTrie.spaced`; None: none): read ahead
        as the canonical ones are (in the first round, and on below a node that begins
        them), their mass not reported.
    round_nodes
        The most nodes a round reads (:data:`ROUND_NODES`).
    progress
        Told after each round how far the walk is (passes out of ``max_passes``, the
        width reached, the unread mass at temperature 1, the time since it started:
        :class:`~xlikert.collect.progress.CellProgress`, reading ``"word labels"``).

    Returns
    -------
    LabelWalk
    """
    steps = walk_steps(
        trie, tol=tol, max_passes=max_passes, temperatures=temperatures, top_ps=top_ps,
        top_k=top_k, canonical=canonical, spaced=spaced, points=points, round_nodes=round_nodes,
        progress=progress,
    )  # fmt: skip
    return run_walks([steps], lambda asks: [read(nodes, keep) for _, nodes, keep in asks])[0]


#: What a walk asks for in a round: the nodes to read and, per node, whether a later node
#: extends it (:class:`NodeReader`'s arguments).
RoundAsk = tuple[list[tuple[int, ...]], list[bool]]


def walk_steps(
    trie: LabelTrie,
    *,
    tol: float = 0.0,
    max_passes: int = 1024,
    temperatures: Sequence[float] = (1.0,),
    top_ps: Sequence[float] = (1.0,),
    top_k: int = 0,
    canonical: Sequence[tuple[int, ...] | None] = (),
    spaced: Sequence[tuple[int, ...] | None] = (),
    points: np.ndarray | None = None,
    round_nodes: int = ROUND_NODES,
    progress: CellProgressFn | None = None,
) -> Generator[RoundAsk, np.ndarray, LabelWalk]:
    """:func:`walk_labels` as a generator: it yields each round's :data:`RoundAsk`, is sent the
    rows read (``(len(nodes), V)`` logits), and returns the :class:`LabelWalk`. So several
    prompts' walks may be read together (:func:`run_walks`), each reading its own nodes."""
    clock = CellClock(progress, "word labels", budget=max_passes, tol=tol)
    w = _Walker(trie, temperatures, top_ps, top_k, canonical, spaced)
    w.points = None if points is None else np.asarray(points, dtype=bool)
    width = 1.0
    while True:
        width = w.width() if w.rounds else 1.0
        left = max_passes - w.passes
        if w.rounds:
            unread = sum(float(n.mass[0]) for n in w.frontier.live.values())
            clock(passes=w.passes, bound=width, unread=unread)
        if (w.rounds and width <= tol) or left <= 0 or not w.frontier.live:
            break
        if not w.rounds:  # the root, and with it every canonical spelling's nodes
            yield from w.run(w.frontier.pop(1), w.canonical_nodes()[: left - 1])
            continue
        nodes = w.frontier.pop(min(w.round_size(tol, round_nodes), left))
        yield from w.run(nodes, w.lookahead(nodes, min(round_nodes, left - len(nodes))))
    yield from w.read_canonical()  # reads only narrow the bound
    width = w.width()
    return w.result(width, width <= tol)


def run_walks(
    steps: Sequence[Generator[RoundAsk, np.ndarray, LabelWalk]],
    read: Callable[[list[tuple[int, list[tuple[int, ...]], list[bool]]]], Sequence[np.ndarray]],
) -> list[LabelWalk]:
    """Run walks (:func:`walk_steps`) in lockstep: each round, every walk not yet over asks
    for its nodes, and one call ``read(asks)`` (``(walk index, nodes, keep)`` each: a
    :class:`UnitNodeReader`'s call) gives each its rows, in the asks' order. Each walk
    reads the nodes it would read alone.

    Returns
    -------
    list of LabelWalk
        One per walk, in ``steps``' order.
    """
    out: list[LabelWalk | None] = [None] * len(steps)
    asks: dict[int, RoundAsk] = {}

    def advance(i: int, rows: np.ndarray | None) -> None:
        try:
            asks[i] = next(steps[i]) if rows is None else steps[i].send(rows)
        except StopIteration as stop:
            out[i] = stop.value
            asks.pop(i, None)

    for i in range(len(steps)):
        advance(i, None)
    while asks:
        order = sorted(asks)
        for i, rows in zip(order, read([(i, *asks[i]) for i in order]), strict=True):
            advance(i, np.asarray(rows))
    return [w for w in out if w is not None]


class _Walker:
    """The state of one walk: the frontier, the masses read, the cost."""

    def __init__(self, trie, temperatures, top_ps, top_k, canonical, spaced=()) -> None:
        self.trie = trie
        self.temperatures, self.top_ps, self.top_k = temperatures, top_ps, top_k
        self.G = 1 + len(temperatures) * len(top_ps)
        self.cont = np.asarray(trie.pieces.continuation, dtype=np.intp)
        self.disjoint = trie.disjoint
        self.read = np.zeros((self.G, len(trie.pieces.words)))
        self.passes = self.rounds = 0
        self.top: tuple[np.ndarray, np.ndarray] | None = None
        self.canonical = list(canonical)
        self.wanted = {c[:k] for c in self.canonical if c for k in range(len(c) + 1)}
        #: The spellings read ahead (the canonical ones, then those after a space), each
        #: with the bytes of its nodes (:func:`_ends`).
        self.spelled = [(c, _ends(trie, c)) for c in dict.fromkeys([*self.canonical, *spaced]) if c]
        self.seen: dict[tuple[int, ...], float] = {}
        self.frontier = _Frontier()
        self.frontier.push(_Node((), b"", True, np.ones(self.G)))
        self.points: np.ndarray | None = None

    def width(self) -> float:
        return _width(self.trie, self.frontier, self.read, self.G, self.disjoint, self.points)

    def round_size(self, tol: float, cap: int) -> int:
        """How many of the frontier's largest nodes (in the order :meth:`_Frontier.pop` takes
        them) the next round reads: the fewest whose reading could bring the unread mass
        within ``tol`` in every column (at temperature 1 within ``tol`` times the valid
        mass's upper end, as the PMF's interval asks), were their children all of mass 0;
        at least 1, at most ``cap``; ``cap`` at ``tol = 0``."""
        if tol <= 0:
            return cap
        mass, mask = self.frontier.ordered_arrays(self.trie, self.G)
        if not self.disjoint:
            mass = mass * mask.sum(1)[:, None]
        target = np.full(self.G, tol)
        unread = mass[:, 0].sum()
        if self.points is not None:  # the valid mass: read, and unread on the item's points
            unread = mass[mask[:, self.points].any(1), 0].sum()
        code = np.zeros(len(self.trie.scale))
        np.add.at(code, self.trie.word_code, self.read[0])
        valid = code[self.points].sum() if self.points is not None else code.sum()
        target[0] *= min(1.0, float(valid + unread))
        rest = mass.sum(0) - np.cumsum(mass, 0)  # (N, G): unread after the first k + 1
        ok = np.flatnonzero((rest <= target).all(1))
        k = int(ok[0]) + 1 if ok.size else len(mass)
        return max(1, min(cap, k))

    def canonical_nodes(self) -> list[tuple[tuple[int, ...], bytes]]:
        """The nodes of the canonical spellings below the root, whole spellings included,
        and of the labels' spellings after a space (token ids and bytes; shortest first,
        then by ids): read with the root, before their masses are known, for the canonical
        ones are read in any case (their proper prefixes for the canonical mass, the whole
        for its stop check where the walk goes on) and hold most of the mass, and a space
        before an answer is the commonest other spelling; the walk then needs no round per
        token of the longest label."""
        out = {ids[: k + 1]: data for ids, ends in self.spelled for k, data in enumerate(ends)}
        return [(key, out[key]) for key in sorted(out, key=lambda k: (len(k), k))]

    def lookahead(self, nodes: Sequence[_Node], cap: int) -> list[tuple[tuple[int, ...], bytes]]:
        """The nodes read ahead in a round after the root's: below each node of ``nodes``,
        for each canonical spelling whose bytes it
        begins, the path on to that spelling's end: the one token (lowest id) that brings
        the node's bytes to the spelling's next token boundary (none where the node ends on
        a boundary), then the spelling's own tokens; every prefix of the path (token ids and
        bytes; shortest first, then by ids; at most ``cap``). The rounds then go down a
        label's tokens several at a time, where a label's mass usually lies."""
        out: dict[tuple[int, ...], bytes] = {}
        for node in nodes:
            if node.root:
                continue
            for ids, ends in self.spelled:
                path = _path_on(self.trie, node.data, ids, ends)
                key, data = node.tokens, node.data
                for t in path:
                    data = dict(self.trie.children(data, False))[t]
                    key = (*key, t)
                    out[key] = data
        keys = sorted(out, key=lambda k: (len(k), k))[: max(0, cap)]
        return [(k, out[k]) for k in keys]

    def run(
        self, nodes: list[_Node], ahead: Sequence[tuple[tuple[int, ...], bytes]] = ()
    ) -> Generator[RoundAsk, np.ndarray, None]:
        """Read ``nodes`` (one round): completions, children, the rest failure; with
        ``ahead`` (descendants of ``nodes``, parents first): those too, in the same pass,
        each split once its parent's read has given its mass (:meth:`canonical_nodes`)."""
        kids = [self.trie.children(n.data, n.root) for n in nodes]
        kids += [self.trie.children(data, False) for _, data in ahead]
        tokens = [n.tokens for n in nodes] + [key for key, _ in ahead]
        rows = np.asarray((yield tokens, [bool(k) for k in kids]))
        need = np.array(sorted({t for k in kids for t, _ in k}), dtype=np.intp)
        raw, grid, ids, lps = next_token_readout(
            rows, need, self.temperatures, self.top_ps, self.top_k if self.top is None else 0,
            pooled=self.cont if self.cont.size else None,
        )  # fmt: skip
        if self.top is None:
            self.top = (ids, lps)
        lp = np.concatenate([raw[:, None], grid.reshape(len(tokens), self.G - 1, -1)], 1)
        p = np.nan_to_num(np.exp(lp), nan=0.0)
        col = {int(t): j for j, t in enumerate(need)}
        for i, children in enumerate(kids):
            if i < len(nodes):
                self._split(nodes[i], children, p[i], col)
                continue
            # read ahead: its parent, split before it, put it on the frontier (else mass 0)
            for node in self.frontier.take([ahead[i - len(nodes)][0]]):
                self._split(node, children, p[i], col)
        self.passes += len(tokens)
        self.rounds += 1

    def _split(
        self, node: _Node, children: Sequence[tuple[int, bytes]], p: np.ndarray,
        col: dict[int, int],
    ) -> None:  # fmt: skip
        """Split a read node's mass: ``p`` ``(G, columns)`` its next-token probabilities
        (the pooled stop column last) to its label and its children."""
        w = self.trie.completes(node.data)
        if w >= 0:
            stop = 1.0 - np.minimum(p[:, -1], 1.0) if self.cont.size else 1.0
            self.read[:, w] += node.mass * stop
        for t, data in children:
            m = node.mass * p[:, col[t]]
            key = (*node.tokens, t)
            if key in self.wanted:
                self.seen[key] = float(m[0])
            if m.max() > 0:
                self.frontier.push(_Node(key, data, False, m))

    def read_canonical(self) -> Generator[RoundAsk, np.ndarray, None]:
        """Read the canonical spellings' unread proper prefixes, shortest first."""
        while True:
            keys = [k for k in self.wanted if k in self.frontier.live and any(
                len(c) > len(k) and c[: len(k)] == k for c in self.canonical if c)]  # fmt: skip
            if not keys:
                return
            short = min(len(k) for k in keys)
            yield from self.run(self.frontier.take([k for k in keys if len(k) == short]))

    def result(self, width: float, tol_met: bool) -> LabelWalk:
        trie, S = self.trie, len(self.trie.scale)
        fmass, fmask = self.frontier.arrays(trie, self.G)
        code = np.zeros((self.G, S))
        np.add.at(code.T, trie.word_code, self.read.T)
        seen = {**self.seen, (): 1.0}
        canon = np.array([seen.get(tuple(c), 0.0 if _dead(c, seen) else np.nan) if c else np.nan
                          for c in self.canonical] or [np.nan] * S)  # fmt: skip
        ids, lps = self.top if self.top is not None else (np.empty(0, int), np.empty(0))
        return LabelWalk(
            read=code, word_read=self.read, frontier_mass=fmass, frontier_mask=fmask,
            disjoint=self.disjoint, passes=self.passes, rounds=self.rounds, width=width,
            tol_met=tol_met, canonical=canon, topk_id=ids, topk_logprob=lps,
        )  # fmt: skip


def _ends(trie: LabelTrie, ids: tuple[int, ...]) -> list[bytes]:
    """The bytes of a spelling's nodes below the root, one per token (shorter where the
    spelling leaves the trie: the rest is not a node, and not read ahead)."""
    out: list[bytes] = []
    data, root = b"", True
    for t in ids:
        got = dict(trie.children(data, root)).get(t)
        if got is None:
            break
        data, root = got, False
        out.append(data)
    return out


def _path_on(trie: LabelTrie, data: bytes, ids: tuple[int, ...], ends: list[bytes]) -> list[int]:
    """The tokens from a node of bytes ``data`` to the end of the canonical spelling ``ids``
    (node bytes ``ends``): a bridge token to the spelling's first boundary past ``data``
    (none where ``data`` is a boundary), then the spelling's tokens after it; ``[]`` where
    the spelling does not go on from ``data`` or no one token bridges."""
    for i, end in enumerate(ends):
        if len(end) < len(data) or not end.startswith(data):
            continue
        if end == data:
            return list(ids[i + 1 : len(ends)])
        bridge = [t for t, d in trie.children(data, False) if d == end]
        return [bridge[0], *ids[i + 1 : len(ends)]] if bridge else []
    return []


def _dead(tokens: tuple[int, ...], seen: dict[tuple[int, ...], float]) -> bool:
    """Whether a prefix of ``tokens`` was found of mass 0 (then so is the whole)."""
    return any(seen.get(tokens[:k], 1.0) == 0.0 for k in range(1, len(tokens)))


def walk_readout(
    walks: Sequence[LabelWalk],
    trie: LabelTrie,
    layout: AnswerLayout | None,
    grid: tuple[int, int],
) -> dict[str, Any]:
    """The results row of each prompt's walk: the readout of every multi-token rule, the
    certified bounds and the walk's record beside it.

    Parameters
    ----------
    walks
        One :class:`LabelWalk` per prompt.
    trie
        The rule's trie.
    layout
        Where the rule's answer codes go in a results row (None: they are the ``score``
        axis; :mod:`xlikert.collect.answers.layout`).
    grid
        ``(T, P)``: the decoding grid's shape.

    Returns
    -------
    dict
        The keys of :meth:`AnswerSequences.readout
        <xlikert.collect.answers.sequences.AnswerSequences.readout>` from the masses read
        (the lower ends), ``topk_id``, ``topk_logprob``, the bound variables
        (``pmf_lower``, ``pmf_upper``, ``valid_mass_lower``, ``valid_mass_upper`` and,
        with options, ``nonsubstantive_mass_lower``/``_upper``; with scripts,
        ``script_mass_lower``/``_upper``) and the walk's (``answer_error``,
        ``answer_passes``, ``answer_tol_met``, ``canonical_pmf``, ``canonical_valid_mass``).
    """
    B, S = len(walks), len(trie.scale)
    T, P = grid
    read = np.stack([w.read for w in walks])  # (B, G, S)
    raw, tp = read[:, 0], read[:, 1:].reshape(B, T, P, S)
    if layout is None:
        points = np.ones(S, dtype=bool)
        out: dict[str, Any] = _plain_readout(raw, tp)
    else:
        points = np.asarray(layout.columns) < layout.n_scores
        out = layout.readout(raw, tp)
    bounds = [w.bounds(points) for w in walks]
    lo = np.stack([b["pmf_lower"][0] for b in bounds])
    hi = np.stack([b["pmf_upper"][0] for b in bounds])
    m_hi = np.stack([b["mass_upper"][0] for b in bounds])
    canon = np.stack([w.canonical for w in walks])
    canon_valid = np.where(points, canon, 0.0).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        canon_pmf = np.where(points, canon, 0.0) / canon_valid[:, None]
    if layout is not None:
        (lo, _), (hi, _) = layout.split(lo), layout.split(hi)
        canon_pmf = layout.split(canon_pmf)[0]
        if layout.n_options:
            out["nonsubstantive_mass_lower"] = out["nonsubstantive_mass"]
            out["nonsubstantive_mass_upper"] = layout.split(m_hi)[1]
    out.update(
        pmf_lower=lo, pmf_upper=hi,
        valid_mass_lower=np.array([b["valid_lower"][0] for b in bounds]),
        valid_mass_upper=np.array([b["valid_upper"][0] for b in bounds]),
        answer_error=np.array([w.width for w in walks]),
        answer_passes=np.array([w.passes for w in walks], dtype=np.int64),
        answer_tol_met=np.array([int(w.tol_met) for w in walks], dtype=np.int64),
        canonical_pmf=canon_pmf, canonical_valid_mass=canon_valid,
        topk_id=[w.topk_id for w in walks], topk_logprob=[w.topk_logprob for w in walks],
    )  # fmt: skip
    script = _script_mass(walks, trie, points)
    out["script_mass"] = script
    out["script_mass_lower"] = script
    out["script_mass_upper"] = script + np.array([w.width for w in walks])[:, None]
    return out


def _plain_readout(raw: np.ndarray, grid: np.ndarray) -> dict[str, np.ndarray]:
    """PMFs and valid masses of answers that are the ``score`` axis (no layout)."""
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["valid_mass"] = raw.sum(-1)
        out["pmf"] = raw / out["valid_mass"][..., None]
        gm = grid.sum(-1)
        out["decoding_valid_mass"] = gm
        out["decoding_pmf"] = np.where(gm[..., None] > 0, grid / gm[..., None], np.nan)
    return out


def _script_mass(walks: Sequence[LabelWalk], trie: LabelTrie, points: np.ndarray) -> np.ndarray:
    """``(B, len(numerals.scripts()))``: the points' mass read per numeral script (NaN for a
    script the rule did not read), as :meth:`AnswerSequences.script_mass
    <xlikert.collect.answers.sequences.AnswerSequences.script_mass>` sums it."""
    names = all_scripts()
    out = np.full((len(walks), len(names)), np.nan)
    p = trie.pieces
    if not p.numeral_scripts:
        return out
    index = {s: i for i, s in enumerate(names)}
    out[:, [index[s] for s in p.numeral_scripts]] = 0.0
    for k, (c, s) in enumerate(zip(trie.word_code, p.scripts, strict=True)):
        if s and points[c]:
            out[:, index[s]] += [w.word_read[0, k] for w in walks]
    return out
