"""Word answers on a server: the certified walk over the labels' trie, read from top-k listings.

Answers of several tokens (word labels; numbers of several digits in top-k mode) are read
by the best-first walk of the in-process backends
(:mod:`xlikert.collect.answers.walk`): each trie node (the prompt followed by a
token prefix of some label) is one teacher-forced ``/completions`` request, ``max_tokens=1``
and ``logprobs=walk_logprobs``, whose listing is the node's next-token row. A server lists
only the ``k`` most probable tokens, so a node's read is certified, not exact:

* every listed token's probability is taken as ``p (1 - logprob_rtol)`` (a lower end: a
  server's float32 log-probabilities are off by at most that relative error);
* the rest, ``u = 1 - (1 - logprob_rtol) * sum of the listed p``, is mass the server did not
  name: it may go to a child (a spelling), to the label the node completes, or anywhere.
  It is put on one *sink* token, a token that goes on with a word and is no child of the
  node, so the walk reads it as neither a spelling nor a stop (the read masses stay lower
  ends), and after the walk it is added to the certified bound as an unread node's mass
  (``node mass * u``, consistent with every label the node is consistent with). So the
  unlisted mass widens the stored bound; nothing is dropped.
* a node the server cannot be made to read (its tokens are not what the server makes of
  the text, or they end inside a character) is wholly unlisted: its whole mass stays in
  the bound, as an unread node's.

Servers (:data:`WALK_SERVERS`): ``vllm`` (the prompt's ids from ``POST /tokenize``, each
node sent as token ids, listings by id) and ``llama-cpp-python`` (no token ids in a
request: the prompt rendered with the entry's tokenizer's chat template, each node's text
appended, and read only where the server's ``/extras/tokenize`` of that text is the prompt's
ids followed by the node's; listings by text, a text counted only where one token of the
vocabulary has it). Elsewhere word labels of several tokens are refused by name before
anything runs. Only temperature 1 with no nucleus is measured (the listings do not give the
rest of the grid); every other grid point is NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ....core.errors import CollectionError
from ...answers.trie import LabelTrie
from ...answers.vocabulary import vocabulary
from ...answers.walk import LabelWalk, mass_bounds
from ...foreign import Tokenizer
from .plan import RequestPlan
from .readout import PADDED_LOGPROB, token_id

__all__ = ["SERVER_WALK_PROTOCOL", "WALK_SERVERS", "NodeListing", "ServerWalk", "WalkSetup"]

#: Server kinds whose node reads the walk certifies.
WALK_SERVERS = ("vllm", "llama-cpp-python")

#: What the openai backend does for answers read by the walk, recorded per model.
SERVER_WALK_PROTOCOL = (
    "word answers by the certified walk over the labels' trie on the server: one "
    "/completions request per node (the prompt's token ids and the node's, max_tokens=1, "
    "logprobs=walk_logprobs; llama-cpp-python: the prompt rendered by the tokenizer's chat "
    "template and the node's text, read only where /extras/tokenize gives the prompt's ids "
    "and the node's); each listed probability times (1 - logprob_rtol), the unlisted rest "
    "put on a sink token that goes on with a word (neither a spelling nor a stop) and added "
    "after the walk to the certified bound as an unread node of that mass; temperature 1 "
    "only (the rest of the decoding grid NaN)"
)


@dataclass(frozen=True)
class NodeListing:
    """One node's read on a server: the listed tokens' log-probabilities (lowered by the
    relative error) and the mass the server did not name (``unlisted``; 1: not read)."""

    logprobs: Mapping[int, float]
    unlisted: float


@dataclass
class WalkSetup:
    """What every prompt's walk on one server shares: the requests, the vocabulary, the rule.

    ``by_text``: a listed text -> the one token of the vocabulary that has it (texts of
    several tokens are left out: their probability cannot be told apart, so it is unlisted).
    """

    plan: RequestPlan
    pool: ThreadPoolExecutor
    trie: LabelTrie
    tokenizer: Tokenizer
    k: int
    rtol: float
    n_vocab: int

    def __post_init__(self) -> None:
        data = vocabulary(self.tokenizer).data
        self.data = data
        seen: dict[str, list[int]] = {}
        for i, b in data.items():
            seen.setdefault(b.decode("utf-8", "ignore"), []).append(i)
        self.by_text = {t: ids[0] for t, ids in seen.items() if len(ids) == 1 and t}
        self.cont = np.asarray(self.trie.pieces.continuation, dtype=np.intp)
        if not self.cont.size:
            raise CollectionError(
                "the labels' walk on a server puts the unlisted mass on a token that goes on "
                "with a word, and this tokenizer has none: word answers of several tokens "
                "cannot be bounded on a server; use the transformers or vllm backend"
            )
        self.root = self.plan.spec.public_url.rstrip("/").removesuffix("/v1")
        specials = getattr(self.tokenizer, "all_special_ids", None) or []
        self.ban = {str(int(i)): -100.0 for i in specials}

    def server_ids(self, text: str) -> list[int]:
        """The token ids the server makes of ``text`` (llama-cpp-python: ``/extras/tokenize``)."""
        obj = self.plan.told("POST /extras/tokenize", self.plan.transport.request, "POST",
                             f"{self.root}/extras/tokenize", {"input": text})  # fmt: skip
        tokens = obj.get("tokens") if isinstance(obj, dict) else None
        if not isinstance(tokens, list):
            raise CollectionError(
                f"model {self.plan.spec.name!r}: server {self.plan.spec.public_url} answered "
                f"/extras/tokenize without token ids ({str(obj)[:200]})"
            )
        return [int(t) for t in tokens]

    def check_names(self) -> None:
        """Check that the server names tokens as the vocabulary spells them (llama-cpp-python
        lists tokens by text): its ``/extras/detokenize`` of the first tokens of the labels'
        spellings (leading spaces included) is their bytes, else refused by name."""
        ids = [t for t, _ in self.trie.children(b"", True) if _is_text(self.data.get(t))][:256]
        want = b"".join(self.data[t] for t in ids).decode("utf-8")
        obj = self.plan.told("POST /extras/detokenize", self.plan.transport.request, "POST",
                             f"{self.root}/extras/detokenize", {"tokens": ids})  # fmt: skip
        got = obj.get("text") if isinstance(obj, dict) else None
        if got != want:
            raise CollectionError(
                f"model {self.plan.spec.name!r}: server {self.plan.spec.public_url} spells the "
                f"labels' tokens otherwise than the entry's tokenizer ({str(got)[:80]!r} for "
                f"{want[:80]!r}); the labels' walk reads its listings by text and needs both "
                "to agree: give the served model's own tokenizer"
            )

    def listing(self, obj: dict) -> dict[int, float]:
        """The ``/completions`` answer's listing at the generated position, by token id
        (ids where the server names them, else the texts one token has)."""
        try:
            top = obj["choices"][0]["logprobs"]["top_logprobs"][0]
        except (KeyError, IndexError, TypeError):
            raise CollectionError(
                f"model {self.plan.spec.name!r}: server {self.plan.spec.public_url} returned no "
                "logprobs for a /completions request of the labels' walk (a server that "
                "ends the completion at once, at an end-of-turn token, lists nothing): "
                f"{str(obj)[:200]}"
            ) from None
        out: dict[int, float] = {}
        for key, lp in (top or {}).items():
            i = token_id(str(key)) if self.plan.kind == "vllm" else self.by_text.get(str(key))
            if i is not None and PADDED_LOGPROB < float(lp) <= 0.0 and i < self.n_vocab:
                out[i] = float(lp)
        return out


class ServerWalk:
    """One prompt's walk on a server: its node reader (:meth:`__call__`, a
    :class:`~xlikert.collect.answers.walk.NodeReader`) and :meth:`widen`."""

    def __init__(self, setup: WalkSetup, prompt: str | list[int]):
        self.setup = setup
        self.prompt = prompt  # the rendered text (llama-cpp-python) or the prompt's ids
        self.head = setup.server_ids(prompt) if isinstance(prompt, str) else list(prompt)
        self.read: dict[tuple[int, ...], NodeListing] = {}
        self.data: dict[tuple[int, ...], bytes] = {(): b""}

    def __call__(self, nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
        """The rows of ``nodes``: listed log-probabilities, the unlisted mass on a sink."""
        s = self.setup
        got = list(s.pool.map(self._one, nodes))
        rows = np.full((len(nodes), s.n_vocab), -np.inf)
        for r, (node, lst) in enumerate(zip(nodes, got, strict=True)):
            self.read[node] = lst
            kids = s.trie.children(self.data[node], not node)
            self.data.update({(*node, t): d for t, d in kids})
            ids = np.fromiter(lst.logprobs, dtype=np.intp, count=len(lst.logprobs))
            rows[r, ids] = np.fromiter(lst.logprobs.values(), dtype=float, count=len(ids))
            if lst.unlisted > 0:  # on a token that goes on with a word and is no child
                taken = {t for t, _ in kids}
                sink = next((int(t) for t in s.cont if int(t) not in taken), None)
                if sink is None:
                    raise CollectionError(
                        f"model {s.plan.spec.name!r}: every token that goes on with a word spells "
                        "a label after some node: the unlisted mass of a server's node cannot "
                        "be bounded; use the transformers or vllm backend"
                    )
                rows[r, sink] = np.logaddexp(rows[r, sink], np.log(lst.unlisted))
        return rows

    def _one(self, node: tuple[int, ...]) -> NodeListing:
        """One node's request and its listing (wholly unlisted where it cannot be sent)."""
        s = self.setup
        if isinstance(self.prompt, str):
            try:
                text = self.prompt + b"".join(s.data[t] for t in node).decode("utf-8")
            except (UnicodeDecodeError, KeyError):
                return NodeListing({}, 1.0)  # ends inside a character: cannot be sent as text
            if node and s.server_ids(text) != self.head + list(node):
                return NodeListing({}, 1.0)  # the server makes other tokens of that text
            # it lists nothing when the completion ends at once: never sample an end of turn
            # (the bias acts in the sampler; the listed log-probabilities are the raw logits')
            body: dict[str, Any] = {"prompt": text, "temperature": 0.0, "logit_bias": s.ban}
        else:
            body = {"prompt": self.head + [int(t) for t in node], "add_special_tokens": False,
                    "return_tokens_as_token_ids": True}  # fmt: skip
        body.setdefault("temperature", s.plan.spec.temperature)
        body.update(model=s.plan.spec.model, max_tokens=1, top_p=1.0, logprobs=s.k, n=1,
                    stream=False)  # fmt: skip
        listed = s.listing(s.plan.complete(body, "a node of the labels' walk"))
        low = np.log1p(-s.rtol)
        lps = {i: lp + low for i, lp in listed.items()}
        u = 1.0 - float(np.exp(np.fromiter(lps.values(), dtype=float)).sum())
        return NodeListing(lps, max(u, 0.0))

    def widen(self, walk: LabelWalk, tol: float, points: np.ndarray | None) -> LabelWalk:
        """``walk`` with the unlisted mass of every node read added to its unread frontier
        (so to every bound), its width and ``tol_met`` again, the canonical spellings'
        probabilities known only where every token of them was listed, and the top-k
        listing the server's after the prompt."""
        trie, G = self.setup.trie, walk.read.shape[0]
        mass = self._masses()
        extra = [(mass[n] * lst.unlisted, trie.mask(self.data[n]))
                 for n, lst in self.read.items() if lst.unlisted > 0 and mass.get(n, 0) > 0]  # fmt: skip
        fm = np.concatenate(
            [walk.frontier_mass, np.array([[m] * G for m, _ in extra]).reshape(-1, G)]
        )
        fk = np.concatenate([walk.frontier_mask,
                             np.array([k for _, k in extra], dtype=bool).reshape(-1, len(trie.scale))])  # fmt: skip
        width = _width(walk.read, fm, fk, walk.disjoint, points)
        canon = np.array([self._canonical(c) for c in trie.canonical(self.setup.tokenizer)])
        root = self.read.get((), NodeListing({}, 1.0)).logprobs
        top = sorted(root, key=lambda i: (-root[i], i))[: len(walk.topk_id)]
        return replace(
            walk, frontier_mass=fm, frontier_mask=fk, width=width, tol_met=width <= tol,
            canonical=canon, topk_id=np.array(top, dtype=np.int64),
            topk_logprob=np.array([root[i] for i in top], dtype=float),
        )  # fmt: skip

    def _masses(self) -> dict[tuple[int, ...], float]:
        """Each node read's mass (the product of its tokens' listed probabilities), a hair
        high (the walk multiplies the same numbers, perhaps in another rounding)."""
        out: dict[tuple[int, ...], float] = {(): 1.0}
        for node in sorted(self.read, key=len):
            if node:
                parent = self.read.get(node[:-1])
                p = 0.0 if parent is None else np.exp(parent.logprobs.get(node[-1], -np.inf))
                out[node] = out.get(node[:-1], 0.0) * float(p) * (1 + 1e-9)
        return out

    def _canonical(self, tokens: tuple[int, ...] | None) -> float:
        """A canonical tokenization's probability where each of its tokens was listed."""
        if not tokens:
            return np.nan
        lp = 0.0
        for k, t in enumerate(tokens):
            lst = self.read.get(tuple(tokens[:k]))
            if lst is None or t not in lst.logprobs:
                return np.nan
            lp += lst.logprobs[t]
        return float(np.exp(lp))


def _is_text(data: bytes | None) -> bool:
    """Whether ``data`` is whole UTF-8 text (a token not cut inside a character).

    Examples
    --------
    >>> _is_text(b" Agree"), _is_text(b"\\xe4"), _is_text(None)
    (True, False, False)
    """
    if not data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _width(read: np.ndarray, fm: np.ndarray, fk: np.ndarray, disjoint: bool,
           points: np.ndarray | None) -> float:  # fmt: skip
    """The certified width as the walk measures it: the unread mass (once per consistent
    label where labels overlap) in any column, and the PMF's interval widths at temperature 1
    (:func:`~xlikert.collect.answers.walk.mass_bounds`)."""
    if not len(fm):
        return 0.0
    w = np.ones(len(fm)) if disjoint else fk.sum(1).astype(float)
    b = mass_bounds(read[:1], fm[:, :1], fk, points, disjoint=disjoint)
    return max(
        float((fm * w[:, None]).sum(0).max()), float((b["pmf_upper"] - b["pmf_lower"]).max())
    )
