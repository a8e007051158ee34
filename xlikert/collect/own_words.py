"""The elicitation level ``own_words``: the first answer of a sampled reply, an exact mixture.

A reply is sampled at a temperature and top-p (:data:`~xlikert.collect.readout.DECODING_TIE_RULE`)
up to ``cap`` tokens. Its answer is its first valid answer token
(:data:`~xlikert.design.elicitation.ANSWER_PARSE_RULE`). The distribution of that
answer is a mixture over the reply's answer-free prefixes (:data:`REPLY_TREE_RULE`):
one forward pass after a prefix ``h`` of probability ``w(h)`` gives the sampler's
next-token distribution ``q(. | h)``; ``w(h) q(t | h)`` goes to the answer of ``t``
where ``t`` is an answer token, to "no answer" where ``t`` ends the turn or ``h t``
reaches the cap, and to the child ``h t`` otherwise. Reading every prefix of positive
probability is exact; prefixes are read best first (largest ``w`` first) and the
reading stops when the certified bound (:data:`OWN_WORDS_BOUND_RULE`) is at most
``tol`` or ``max_passes`` prefixes were read. The bound reached is stored, never a
smaller one.

:func:`reply_tree` is the tree's maths on any reader (``contexts -> next-token
log-probabilities``); :func:`score_own_words` runs it for a unit of prompts on any
:class:`~xlikert.collect.protocol.ElicitingModel`, each prompt's tree on one reader of
the model's (``next_token_reader``): the transformers backend runs each prefix from its
parent's kept KV cache (:class:`~.backends.transformers.tree.TreeReader`), the vLLM
backend sends every prefix of a tree under one cache salt (vLLM's prefix caching).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..core.codecs import encode_token_ids
from ..core.errors import CollectionError
from ..kernels.readout import nucleus_logprobs
from .answers.trie import LabelTrie, spelling_pieces
from .answers.walk import walk_labels
from .options import CollectOptions
from .progress import CellClock, CellProgressFn
from .record import UnitResult

if TYPE_CHECKING:
    from .answers.walk import LabelWalk
    from .protocol import ContextReader, ElicitingModel, MultiTokenModel

__all__ = [
    "MAX_CHILDREN",
    "OWN_WORDS_BOUND_RULE",
    "REPLY_TREE_RULE",
    "ROUND",
    "WORD_REPLY_RULE",
    "ReplyTree",
    "answer_token_scores",
    "bound",
    "parse_label",
    "reply_tree",
    "reply_trie",
    "sampler_probabilities",
    "score_own_words",
]

#: How the mixture is formed; stored with every file that reads ``own_words``.
REPLY_TREE_RULE = (
    "own_words: after each answer-free reply prefix h (probability w(h), the root the "
    "empty reply with w = 1) one forward pass gives the sampler's next-token distribution "
    "q(.|h) (DECODING_TIE_RULE at own_words_temperature, own_words_top_p); w(h) q(t|h) goes "
    "to the score of t where t is a valid answer token (answer_parse_rule), to no_answer_mass "
    "where t ends the turn or h t has reply_tokens tokens, else to the child prefix h t. "
    "Prefixes are read best first, in rounds of up to ROUND (the ROUND largest unread w "
    "at once, whatever the backend or its batch size; of each read prefix at most "
    "MAX_CHILDREN children, the rest stays unread); valid_mass is the total answer mass, pmf the answer "
    "mass renormalised over it"
)

#: How a reply's answer is parsed where the answers are spelled with several tokens (word
#: labels, numbers of several digits); stored with every file that reads ``own_words``.
WORD_REPLY_RULE = (
    "answers of several tokens: the reply's answer starts at its first token that begins a "
    "label's spelling (a token whose bytes, one leading space stripped, are a prefix of some "
    "label: the labels' trie's first tokens, bare space tokens left out, so a reply's space "
    "does not start one); the labels' walk from the prefix before that token (WALK_RULE, "
    "under the sampler's temperature and top-p at every token, to answer_tol within "
    "answer_max_passes) gives the mass of each label the reply then completes (stop check "
    "included; the label's tokens after its first are not counted against reply_tokens); the mass of starts that complete no label goes to no_answer_mass (the reply's "
    "first label start is no answer); the walk's unread mass (counted once per label "
    "consistent with a node where labels overlap) is added to U. The greedy reply is parsed "
    "by the same rule: its first label start, and the label its tokens then complete"
)

#: The certified bound; stored with every file that reads ``own_words``.
OWN_WORDS_BOUND_RULE = (
    "U = the probability of the reply prefixes not read (pruned); the exact answer masses "
    "are the ones returned plus a share of U, so |valid_mass - exact| <= U, |no_answer_mass - "
    "exact| <= U and |pmf - exact| <= U / (valid_mass + U); elicitation_error = U / "
    "(valid_mass + U) (>= U; 0: every prefix read, exact)"
)

#: Prefixes read per round (one call of the reader): fixed, so that which prefixes a pruned
#: tree reads does not depend on the backend or its batch size (a cell's key does not hold
#: either).
ROUND = 8

#: The most children a read prefix offers for reading (the largest; the others' mass is
#: counted in the bound as unread).
MAX_CHILDREN = 4096


def sampler_probabilities(logprobs: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """The sampler's next-token distribution over the full vocabulary (:data:`DECODING_TIE_RULE`).

    Parameters
    ----------
    logprobs : np.ndarray
        ``(..., V)`` log-probabilities (or logits) of the whole vocabulary.
    temperature, top_p : float
        The sampler.

    Returns
    -------
    np.ndarray
        ``(..., V)`` float64 probabilities, 0 outside the nucleus.

    Examples
    --------
    >>> sampler_probabilities(np.log([0.5, 0.3, 0.2]), 1.0, 0.8).round(3)
    array([0.625, 0.375, 0.   ])
    """
    z = np.asarray(logprobs, dtype=np.float64)
    lp = nucleus_logprobs(z, np.arange(z.shape[-1]), [temperature], [top_p])[..., 0, 0, :]
    return np.exp(lp)


@dataclass
class ReplyTree:
    """What :func:`reply_tree` read for one prompt.

    Attributes
    ----------
    answer_mass : np.ndarray
        ``(S,)`` probability that the reply's first answer is each score (read so far).
    no_answer : float
        Probability that the reply writes no answer (read so far).
    unread : float
        ``U``: the probability of the prefixes not read.
    passes : int
        Prefixes read (forward passes).
    tol_met : bool
        Whether the bound met ``tol`` (else ``max_passes`` was spent first).
    """

    answer_mass: np.ndarray
    no_answer: float
    unread: float
    passes: int
    tol_met: bool

    @property
    def valid_mass(self) -> float:
        """The probability that the reply writes an answer (read so far)."""
        return float(self.answer_mass.sum())

    @property
    def pmf(self) -> np.ndarray:
        """The first answer's distribution given one is written (NaN where none is)."""
        m = self.valid_mass
        return self.answer_mass / m if m > 0 else np.full_like(self.answer_mass, np.nan)

    @property
    def error(self) -> float:
        """The certified bound :data:`OWN_WORDS_BOUND_RULE`."""
        return bound(self.valid_mass, self.unread)


def bound(valid_mass: float, unread: float) -> float:
    """``U / (M + U)``: the certified bound on ``pmf``, ``valid_mass`` and ``no_answer_mass``.

    Examples
    --------
    >>> bound(0.5, 0.0), bound(0.3, 0.1)
    (0.0, 0.25)
    """
    if unread <= 0:
        return 0.0
    return float(unread / (valid_mass + unread))


def reply_tree(
    read: Callable[[list[tuple[int, ...]], list[bool]], np.ndarray],
    token_score: dict[int, int],
    scale: Sequence[int],
    stop: frozenset[int] | set[int],
    *,
    cap: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    tol: float = 0.0,
    max_passes: int = 10_000,
    batch: int = 8,
    max_children: int = MAX_CHILDREN,
    progress: CellProgressFn | None = None,
    words: ReplyLabels | None = None,
) -> ReplyTree:
    """The first answer of a sampled reply as an exact mixture over reply prefixes.

    Parameters
    ----------
    read : callable
        ``(prefixes, keep) -> (n, V)`` next-token log-probabilities after the prompt
        followed by each reply prefix (a tuple of token ids, ``()`` the prompt itself);
        ``keep[i]`` False: no later prefix extends prefix ``i``.
    token_score : dict of int to int
        Each valid answer token's score.
    scale : sequence of int
        The scores, in the order of ``answer_mass``.
    stop : set of int
        The tokens that end the turn.
    cap : int
        The most tokens of a reply (>= 1).
    temperature, top_p : float
        The sampler (:func:`sampler_probabilities`).
    tol : float
        The certified error asked (:data:`OWN_WORDS_BOUND_RULE`); 0: every prefix of
        positive probability is read.
    max_passes : int
        The most prefixes read.
    batch : int
        Prefixes read per call of ``read``.
    max_children : int
        Of each read prefix at most this many children (the most probable) are offered
        for reading; the others stay unread (their mass is in the bound).
    progress : callable, optional
        Called after each round of passes with the passes read, the bound reached, the
        unread mass and the time spent (:class:`~xlikert.collect.progress.CellProgress`).
    words : ReplyLabels, optional
        Answers of several tokens (:data:`WORD_REPLY_RULE`; :func:`score_own_words` builds it): a token
        of ``words.starts`` starts the answer, read by ``words.walk`` from the prefix
        before it (its reads counted in the passes); ``token_score`` is then empty.

    Returns
    -------
    ReplyTree
        The answer masses, the "no answer" mass, the unread mass and the passes.
    """
    if cap < 1:
        raise CollectionError(f"reply_tokens must be >= 1, got {cap}")
    index = {int(y): n for n, y in enumerate(scale)}
    answer_ids = np.array(sorted(token_score), dtype=np.int64)
    answer_col = np.array([index[token_score[int(t)]] for t in answer_ids], dtype=np.int64)
    stop_ids = np.array(sorted(stop), dtype=np.int64)
    mass = np.zeros(len(scale))
    none = walked = 0.0  # walked: the labels' walks' unread mass
    frontier = _Frontier(max_children)
    todo: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    passes = 0
    clock = CellClock(progress, "own words", budget=max_passes, tol=tol)
    while True:
        if todo:
            prefixes = [p for p, _ in todo]
            keep = [len(p) + 1 < cap for p in prefixes]
            logp = np.asarray(read(prefixes, keep), dtype=np.float64)
            passes += len(prefixes)
            q = sampler_probabilities(logp, temperature, top_p)
            for (prefix, w), qi, row in zip(todo, q, logp, strict=True):
                if words is not None:
                    m, gone, unread, n = words.read(prefix, row, qi)
                    mass += w * m
                    none += w * gone
                    walked += w * unread
                    passes += n
                if answer_ids.size:
                    np.add.at(mass, answer_col, w * qi[answer_ids])
                    qi[answer_ids] = 0.0
                if stop_ids.size:
                    none += w * float(qi[stop_ids].sum())
                    qi[stop_ids] = 0.0
                if len(prefix) + 1 >= cap:  # every other token reaches the cap: no answer
                    none += w * float(qi.sum())
                    continue
                frontier.offer(prefix, w, qi)
        U = frontier.unread() + walked
        reached = bound(float(mass.sum()), U)
        clock(passes=passes, bound=reached, unread=U)
        met = reached <= tol
        if met or not frontier.heap or passes >= max_passes:
            return ReplyTree(mass, none, U, passes, bool(met))
        todo = frontier.take(min(batch, max_passes - passes))


@dataclass
class ReplyLabels:
    """How a reply tree reads answers of several tokens (:data:`WORD_REPLY_RULE`).

    Attributes
    ----------
    starts
        The token ids that start an answer (the labels' trie's first tokens, no bare space).
    walk
        ``(prefix, its next-token log-probabilities) -> LabelWalk``: the labels' walk
        after the prompt and the reply prefix, under the sampler (its column 1).
    """

    starts: np.ndarray
    walk: Callable[[tuple[int, ...], np.ndarray], LabelWalk]

    def read(
        self, prefix: tuple[int, ...], row: np.ndarray, qi: np.ndarray
    ) -> tuple[np.ndarray, float, float, int]:
        """``(each label's mass, the starts' mass that completes none, the walk's unread
        mass, its reads)`` after ``prefix`` (``qi``: the sampler's next-token distribution
        there, its starts set to 0 on the way: they leave the reply tree)."""
        started = float(qi[self.starts].sum()) if self.starts.size else 0.0
        qi[self.starts] = 0.0
        if started <= 0:
            return np.zeros(()), 0.0, 0.0, 0
        w = self.walk(prefix, row)
        m = w.read[1]
        per = np.ones(len(w.frontier_mass)) if w.disjoint else w.frontier_mask.sum(1)
        unread = float(w.frontier_mass[:, 1] @ per) if len(w.frontier_mass) else 0.0
        gone = max(started - float(m.sum()) - float(w.frontier_mass[:, 1].sum()), 0.0)
        return m, gone, unread, w.passes - 1  # the root is the prefix's own row


#: A read prefix's offered children: (prefix, ids by weight, weights, suffix sums, [next]).
_Group = tuple[tuple[int, ...], np.ndarray, np.ndarray, np.ndarray, list[int]]


class _Frontier:
    """The children of the read prefixes not read yet, the most probable first.

    Each read prefix's offered children are kept as (ids sorted by weight, weights,
    suffix sums, next index); the heap holds each prefix's next best child. Children
    beyond ``max_children`` are never offered: their mass stays unread.
    """

    def __init__(self, max_children: int):
        self.max_children = max_children
        self.groups: list[_Group] = []
        self.heap: list[tuple[float, int, int]] = []
        self.order = 0  # ties in the heap: first pushed, first read
        self.unread_rest = 0.0  # children never offered (beyond max_children)

    def _push(self, weight: float, group: int) -> None:
        heapq.heappush(self.heap, (-weight, self.order, group))
        self.order += 1

    def offer(self, prefix: tuple[int, ...], w: float, qi: np.ndarray) -> None:
        """The children of ``prefix`` (of probability ``w``): ``w * qi`` each."""
        nz = np.flatnonzero(qi > 0)
        if nz.size > self.max_children:
            top = nz[np.argpartition(-qi[nz], self.max_children - 1)[: self.max_children]]
            self.unread_rest += w * float(qi[np.setdiff1d(nz, top)].sum())
            nz = top
        if nz.size == 0:
            return
        ids = nz[np.argsort(-qi[nz], kind="stable")]
        weights = w * qi[ids]
        suffix = np.append(np.cumsum(weights[::-1])[::-1], 0.0)
        self.groups.append((prefix, ids, weights, suffix, [0]))
        self._push(float(weights[0]), len(self.groups) - 1)

    def unread(self) -> float:
        """The probability of the prefixes not read (offered or not)."""
        return float(sum(g[3][g[4][0]] for g in self.groups) + self.unread_rest)

    def take(self, n: int) -> list[tuple[tuple[int, ...], float]]:
        """The next ``n`` prefixes to read (at most), each with its probability."""
        todo: list[tuple[tuple[int, ...], float]] = []
        while self.heap and len(todo) < n:
            _, _, g = heapq.heappop(self.heap)
            prefix, ids, weights, _, at = self.groups[g]
            k = at[0]
            todo.append(((*prefix, int(ids[k])), float(weights[k])))
            at[0] = k + 1
            if k + 1 < ids.size:
                self._push(float(weights[k + 1]), g)
        return todo


def _reply_labels(
    model: MultiTokenModel, options: CollectOptions, read: Callable[..., np.ndarray]
) -> ReplyLabels | None:
    """How a reply's answer of several tokens is read (:data:`WORD_REPLY_RULE`); None
    where every answer is one token (:func:`answer_token_scores`).

    Parameters
    ----------
    model
        An in-process model: its answer rule (the labels' trie it walks, else one built
        from its tokenizer and labels: the same rule, :mod:`xlikert.collect.answers.trie`).
    options
        The run's options (``own_words_temperature``, ``own_words_top_p``, ``answer_tol``,
        ``answer_max_passes``).
    read
        ``(contexts, keep) -> (n, V)`` next-token log-probabilities after the prompt and
        each token sequence (the reply tree's own reader).
    """
    trie = reply_trie(model)
    if trie is None:
        return None
    starts = np.array(sorted({t for ids in trie.pieces.first.values() for t in ids}), np.int64)
    temps, tops = (options.own_words_temperature,), (options.own_words_top_p,)

    def walk(prefix: tuple[int, ...], row: np.ndarray) -> LabelWalk:
        def node_rows(nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
            out = np.empty((len(nodes), row.shape[-1]))
            fresh = [i for i, n in enumerate(nodes) if n]
            out[[i for i, n in enumerate(nodes) if not n]] = row  # the prefix, read already
            if fresh:
                out[fresh] = read([(*prefix, *nodes[i]) for i in fresh], [keep[i] for i in fresh])
            return out

        return walk_labels(trie, node_rows, tol=options.answer_tol,
                           max_passes=options.answer_max_passes, temperatures=temps, top_ps=tops)  # fmt: skip

    return ReplyLabels(starts, walk)


def reply_trie(model: MultiTokenModel) -> LabelTrie | None:
    """The labels' trie a reply's answer is parsed with where the answers are spelled with
    several tokens (:data:`WORD_REPLY_RULE`: the model's, else built from its tokenizer and
    labels, bare space tokens left out); None: every answer is one token."""
    answers = model.answers
    if answers.continuation is None:
        return None
    trie = answers.trie
    if trie is None:
        o = model.options
        pieces = spelling_pieces(model.tokenizer, list(answers.scale), o.labels_by_score,
                                 scripts=o.numeral_scripts)  # fmt: skip
        trie = LabelTrie(pieces, answers.scale)
    return LabelTrie(replace(trie.pieces, spaces=()), trie.scale)


def parse_label(reply: Sequence[int], trie: LabelTrie) -> tuple[int, int] | None:
    """The answer of a reply whose answers are spelled with several tokens
    (:data:`WORD_REPLY_RULE`): its first token that begins a label, and the label its
    tokens then complete (the next token, if any, not going on with it).

    Returns
    -------
    tuple of (int, int) or None
        ``(position of the label's first token, score)``; None where the reply starts no
        label, or its first start completes none.

    Examples
    --------
    >>> from xlikert.collect.answers.trie import SpellingPieces
    >>> p = SpellingPieces(words=(b"ab", b"b"), codes=(1, 2), scripts=("", ""),
    ...     numeral_scripts=(), first={b"a": (1,), b"ab": (3,), b"b": (2,)},
    ...     inner={b"a": (1,), b"b": (2,), b"ab": (3,)}, spaces=(), continuation=(1, 2, 3),
    ...     numeric=False)
    >>> trie = LabelTrie(p, (1, 2))
    >>> parse_label([7, 1, 2, 9], trie), parse_label([7, 3], trie), parse_label([1, 1], trie)
    ((1, 1), (1, 1), None)
    """
    goes_on = set(trie.pieces.continuation)
    starts = {t for ids in trie.pieces.first.values() for t in ids}
    t = next((k for k, tok in enumerate(reply) if int(tok) in starts), None)
    if t is None:
        return None
    data, root = b"", True
    for k in range(t, len(reply)):
        kids = dict(trie.children(data, root))
        if int(reply[k]) not in kids:
            return None
        data, root = kids[int(reply[k])], False
        w = trie.completes(data)
        if w >= 0 and (k + 1 == len(reply) or int(reply[k + 1]) not in goes_on):
            return t, int(trie.pieces.codes[w])
    return None


def answer_token_scores(model: MultiTokenModel) -> dict[int, int]:
    """The run's one-token rule as :data:`~xlikert.design.elicitation.ANSWER_PARSE_RULE`
    reads it: each valid answer token's score.

    Parameters
    ----------
    model
        An in-process model (:class:`~xlikert.collect.protocol.MultiTokenModel`: its
        ``valid`` tokens and ``answers`` rule).

    Returns
    -------
    dict of int to int
        Token id -> score.

    Raises
    ------
    CollectionError
        Answers spelled with several tokens (two-digit codes, word labels), which the
        parsing rule does not read yet.
    """
    answers = model.answers
    if answers.continuation is not None or any(len(s) > 2 for s in answers.sequences):
        raise CollectionError(
            f"model {model.name!r}: the levels greedy and own_words parse one answer token "
            "of a reply (answer_parse_rule); the run's answers are spelled with several "
            "tokens (two-digit codes or word labels), which that rule does not read yet"
        )
    valid = model.valid
    return {int(i): int(y) for i, y in zip(valid.ids, valid.scores, strict=True)}


def score_own_words(
    model: ElicitingModel, texts: list[str], encoded: list[list[int]], options: CollectOptions,
    res: UnitResult,
    progress: CellProgressFn | None = None,
) -> UnitResult:  # fmt: skip
    """Read the level ``own_words`` for a unit of prompts (:func:`reply_tree` per prompt).

    Parameters
    ----------
    model
        An :class:`~xlikert.collect.protocol.ElicitingModel` (transformers, vLLM).
    texts, encoded
        The prompts' texts and token ids.
    options
        The run's options (``reply_tokens``, ``own_words_*``).
    res
        The unit's record with :data:`~xlikert.core.schema.ELICITATION_VARIABLES`, filled in place.
    progress
        Told each prompt's passes, bound, unread mass and time (:func:`reply_tree`).

    Returns
    -------
    UnitResult
        ``res`` with ``pmf``, ``valid_mass``, ``no_answer_mass``, ``elicitation_error``,
        ``elicitation_passes`` and ``elicitation_tol_met`` of every prompt.
    """
    words = reply_trie(model) is not None
    scores = {} if words else answer_token_scores(model)
    scale = list(model.options.known_scale)
    if model.answers.layout is not None:
        raise CollectionError(
            f"model {model.name!r}: own_words reads the answers on the run's one scale; items "
            "with options of their own are not read by it yet"
        )
    for b, ids in enumerate(encoded):
        reader = model.next_token_reader("own_words\0" + texts[b])
        try:

            def read(
                prefixes: list[tuple[int, ...]], keep: list[bool], ids: list[int] = ids,
                reader: ContextReader = reader,
            ) -> np.ndarray:  # fmt: skip
                return reader.read([list(ids) + list(p) for p in prefixes], keep)["logprobs"]

            tree = reply_tree(
                read, scores, scale, model.end_of_turn, cap=options.reply_tokens,
                temperature=options.own_words_temperature, top_p=options.own_words_top_p,
                tol=options.own_words_tol, max_passes=options.own_words_max_passes,
                batch=ROUND, progress=progress,
                words=_reply_labels(model, options, read) if words else None,
            )  # fmt: skip
        finally:
            reader.close()
        d = res.data
        d["pmf"][b] = tree.pmf
        d["valid_mass"][b] = tree.valid_mass
        d["no_answer_mass"][b] = tree.no_answer
        d["elicitation_error"][b] = tree.error
        d["elicitation_passes"][b] = tree.passes
        d["elicitation_tol_met"][b] = int(tree.tol_met)
        d["prompt_text"][b] = texts[b]
        d["prompt_token_ids"][b] = encode_token_ids(ids)
    return res
