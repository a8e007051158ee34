"""Reading a tree of conversations on a transformers model, each from its longest kept prefix.

Sequential administration (:mod:`xlikert.collect.context`) reads the answer after
every conversation of an answer-history tree. :class:`TreeReader` is the
transformers backend's :class:`~xlikert.collect.protocol.ContextReader`: it keeps
the KV cache of each conversation it read (in a token trie, least recently used
first out under a memory budget) and runs a later conversation only from the
longest prefix it shares with a kept one, usually its parent's whole prompt. A
batch of conversations with different parents runs as one pass: each row's kept
prefix is left padded inside the batch's cache and hidden by the attention mask,
with each row's own positions (:meth:`Scorer.forward_on_cache`). The first reused
prefix of a loaded model is checked against an uncached pass
(:meth:`Scorer.check_prefix_cache`, path ``"tree"``); a model whose cache is not
a plain full-attention cache (sliding windows, recurrent layers) is read
without reuse, every conversation in full.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ....core.errors import CollectionError
from ...foreign import KVCache
from .scorer import Scorer, empty_cache, in_batches, output_cache

__all__ = ["DEFAULT_TREE_BYTES", "TreeReader"]

#: Largest memory the kept KV caches of one tree may take on the CPU (on a GPU: a
#: third of the free memory when the reader opens).
DEFAULT_TREE_BYTES = 2 << 30

_Kv = list[tuple[Any, Any]]  # per layer: keys, values (1, heads, tokens, head dim)


class _Trie:
    """Token trie of the kept contexts: the longest kept prefix of a query in O(its length)."""

    def __init__(self):
        self.root: dict[Any, Any] = {}

    def add(self, key: tuple[int, ...]) -> None:
        node = self.root
        for t in key:
            node = node.setdefault(t, {})
            node[None] = key  # a kept context passing through (its KV covers this prefix)

    def longest(self, ids: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        """A kept context sharing the longest prefix with ``ids``, and that length."""
        node: Any = self.root
        best, n = None, 0
        for t in ids:
            node = node.get(t)
            if node is None:
                break
            best, n = node[None], n + 1
        return best, n


class TreeReader:
    """A :class:`~xlikert.collect.protocol.ContextReader` for a transformers model.

    Parameters
    ----------
    scorer
        The model's :class:`~xlikert.collect.backends.transformers.scorer.Scorer`.
    leaves
        The answer rule's teacher-forced leaves (one row per context and leaf).
    keep
        How many last positions of each row the readout needs.
    readout
        ``(logits (n * len(leaves), keep, V), n) -> dict``: the model's readout of
        ``n`` contexts (:meth:`LocalModel._readout`).
    batch_size
        Rows per pass (halved out of memory, down to one context).
    max_bytes
        Memory the kept caches may take (default :data:`DEFAULT_TREE_BYTES`).
    rule
        ``() -> (leaves, keep)``: the answer rule's leaves and kept positions now, asked
        at every :meth:`read` (a conversation whose items have their own answers is read
        with the model relabelled between reads; the kept caches are of the contexts
        alone, so they serve any rule). None: ``leaves`` and ``keep`` stay.
    """

    def __init__(
        self,
        scorer: Scorer,
        leaves: list[list[int]],
        keep: int,
        readout: Callable[[Any, int], dict[str, np.ndarray]],
        batch_size: int,
        max_bytes: int | None = None,
        rule: Callable[[], tuple[list[list[int]], int]] | None = None,
    ):
        self.scorer, self.leaves, self.keep, self._readout = scorer, leaves, keep, readout
        self._rule = rule
        self.batch_size = max(1, int(batch_size))
        self.max_bytes = _budget(scorer) if max_bytes is None else int(max_bytes)
        self.kept: OrderedDict[tuple[int, ...], _Kv] = OrderedDict()
        self.bytes = 0
        self.trie = _Trie()
        self.reuse: bool | None = None  # decided on the first pass (the cache's layer types)
        #: Tokens run through the model (all rows, padding excluded) and contexts read.
        self.tokens_run = 0
        self.contexts_read = 0

    def __enter__(self) -> TreeReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Drop every kept cache."""
        self.kept.clear()
        self.trie = _Trie()
        self.bytes = 0
        empty_cache()

    def retain(self, keys: Sequence[Sequence[int]]) -> None:
        """Drop every kept cache but those of the contexts ``keys`` (a prompt's walk is
        done: its nodes' caches go, the unit's shared prefix stays)."""
        want = {tuple(k) for k in keys}
        for key in [k for k in self.kept if k not in want]:
            self.bytes -= _nbytes(self.kept.pop(key))
        self.trie = _Trie()
        for k in self.kept:
            self.trie.add(k)

    # ------------------------------------------------------------------ reading
    def read(
        self, contexts: Sequence[Sequence[int]], keep: Sequence[bool] | None = None
    ) -> dict[str, np.ndarray]:
        """The readout after each context, in batches, each context from its longest kept
        prefix; the caches of the contexts with ``keep`` True are kept for later ones."""
        rows_ids = [list(c) for c in contexts]
        if self._rule is not None:
            self.leaves, self.keep = self._rule()
        if any(not c for c in rows_ids):
            raise CollectionError(f"model {self.scorer.lm.name!r}: an empty context to read")
        keep = [True] * len(rows_ids) if keep is None else list(keep)
        res: dict[str, np.ndarray] = {}

        def step(rows: list[int]) -> None:
            out = self._batch([rows_ids[r] for r in rows], [keep[r] for r in rows])
            for key, val in out.items():
                if key not in res:
                    res[key] = np.zeros((len(rows_ids), *val.shape[1:]), dtype=val.dtype)
                res[key][rows] = val

        in_batches(
            len(rows_ids), lambda left: min(left, max(1, self.batch_size // len(self.leaves))),
            step, self._halve,
            lambda rows: CollectionError(
                f"model {self.scorer.lm.name!r} runs out of memory reading one conversation "
                f"of {len(rows_ids[rows[0]])} tokens; use a smaller dtype or a bigger device"
            ),
        )  # fmt: skip
        self.contexts_read += len(rows_ids)
        return res

    def prefill(self, contexts: Sequence[Sequence[int]]) -> bool:
        """Run ``contexts`` and keep their caches, reading nothing: the prefixes that later
        contexts (:meth:`read`) are read from. Each runs from its longest kept prefix, so a
        list whose later contexts extend earlier ones is run in order of length.

        Returns whether the caches are kept (False: this model's cache cannot be reused,
        :attr:`reuse`, and nothing is kept).
        """
        rows_ids = [list(c) for c in contexts if c]

        def step(rows: list[int]) -> None:
            if self.reuse is not False:  # else nothing is kept: the rest is skipped
                self._prefill([rows_ids[r] for r in rows])

        in_batches(
            len(rows_ids), lambda left: min(left, max(1, self.batch_size)), step, self._halve,
            lambda rows: CollectionError(
                f"model {self.scorer.lm.name!r} runs out of memory on a shared prefix "
                f"of {len(rows_ids[rows[0]])} tokens; use a smaller dtype or a bigger device"
            ),
        )  # fmt: skip
        return self.reuse is not False

    def adopt(self, context: Sequence[int], cache: KVCache | None) -> bool:
        """Keep ``cache``, a one-row cache of ``context`` run elsewhere (the scorer's shared
        prefix, :meth:`Scorer.prefix_state`, kept across units), as if :meth:`prefill` had
        run it. Returns whether it is kept (False: no cache, or not plain full attention
        and so not paddable; the caller prefills)."""
        if cache is None or self.reuse is False or not _plain_cache(cache):
            return False
        n = len(context)
        kv = [(layer.keys[:1, :, :n], layer.values[:1, :, :n]) for layer in cache.layers]
        if not kv or kv[0][0].shape[2] != n:
            return False
        self.reuse = True
        self._store(tuple(context), kv)
        return tuple(context) in self.kept

    def _halve(self) -> None:
        """Out of memory: half the rows per pass from now on."""
        self.batch_size = max(1, self.batch_size // 2)

    def _prefill(self, contexts: list[list[int]]) -> None:
        """One pass over ``contexts`` (no leaves, one logits row each), their caches kept."""
        keep = [True] * len(contexts)
        found = [self._prefix(c) for c in contexts] if self.reuse is not False else []
        if not any(n for _, n in found):
            self.tokens_run += sum(len(c) for c in contexts)
            _, past = self._run_uncached(contexts, keep_cache=True, logits=1)
            if past is not None:
                self._keep(contexts, keep, past, [0] * len(contexts), 0,
                           _logits_width(contexts), per=1, tail=0)  # fmt: skip
            return
        lcp = [n for _, n in found]
        rows = [c[n:] for c, n in zip(contexts, lcp, strict=True)]
        past, seen, n_real = self._padded_past(found, 1)
        self.tokens_run += sum(len(r) for r in rows)
        self.scorer.forward_on_cache(past, seen, n_real, rows, keep=1)
        self._keep(contexts, keep, past, lcp, seen.shape[1], _logits_width(rows), per=1, tail=0)

    def _batch(self, contexts: list[list[int]], keep: list[bool]) -> dict[str, np.ndarray]:
        """One pass over ``contexts`` (each with every leaf), from their kept prefixes."""
        L = len(self.leaves)
        found = [self._prefix(c) for c in contexts] if self.reuse is not False else []
        if not any(n for _, n in found):
            rows = [c + leaf for c in contexts for leaf in self.leaves]
            self.tokens_run += sum(len(r) for r in rows)
            logits, past = self._run_uncached(rows, keep_cache=any(keep))
            if past is not None:
                C, W = 0, _logits_width(rows)
                self._keep(contexts, keep, past, [0] * len(contexts), C, W)
            return self._readout(logits, len(contexts))
        lcp = [n for _, n in found]
        rows = [c[n:] + leaf for c, n in zip(contexts, lcp, strict=True) for leaf in self.leaves]
        past, seen, n_real = self._padded_past(found, L)
        self.tokens_run += sum(len(r) for r in rows)
        logits = self.scorer.forward_on_cache(past, seen, n_real, rows, keep=self.keep)
        if self.scorer.needs_check("tree"):
            b = next(i for i, n in enumerate(lcp) if n)
            self.scorer.check_prefix_cache(
                contexts[b][: lcp[b]], logits[b * L, -1], rows[b * L], path="tree"
            )
            if not self.scorer.prefix_cache:  # differs: no reuse from now on
                self.reuse = False
                self.close()
                return self._batch(contexts, keep)
        self._keep(contexts, keep, past, lcp, seen.shape[1], _logits_width(rows))
        return self._readout(logits, len(contexts))

    def _run_uncached(self, rows: list[list[int]], keep_cache: bool, logits: int | None = None):
        """Logits of ``rows`` from scratch (at the last ``logits`` positions, default
        :attr:`keep`), and the batch's cache where it may be reused."""
        import torch

        keep = self.keep if logits is None else logits
        reuse = self.reuse is not False and self.scorer.prefix_cache and keep_cache
        if not reuse:
            return self.scorer.forward_rows([], None, rows, keep=keep), None
        ids, att = self.scorer.left_pad(rows)
        with torch.inference_mode():
            out = self.scorer.lm.model(
                input_ids=ids,
                attention_mask=att,
                position_ids=(att.cumsum(-1) - 1).clamp(min=0),
                use_cache=True,
                **self.scorer.keep_kwargs(keep),
            )
        past = output_cache(out)
        if self.reuse is None:
            self.reuse = _plain_cache(past)
        return out.logits[:, -keep:, :], (past if self.reuse else None)

    # ------------------------------------------------------------------ the kept caches
    def _prefix(self, ids: list[int]) -> tuple[tuple[int, ...] | None, int]:
        """The kept context sharing the longest prefix with ``ids`` (at least one token of
        ``ids`` is left to run), and the length reused."""
        key, n = self.trie.longest(ids)
        n = min(n, len(ids) - 1)
        if key is None or n <= 0:
            return None, 0
        self.kept.move_to_end(key)
        return key, n

    def _padded_past(self, found, L: int):
        """The batch's cache: each row's kept prefix left padded to the longest, repeated
        for the ``L`` leaves; the attention mask over it and each row's real length."""
        import torch
        from transformers import DynamicCache

        dev = self.scorer.input_device
        C = max(n for _, n in found)
        lcp = [n for _, n in found]
        first = next(self.kept[k] for k, n in found if n)
        past = DynamicCache()
        for layer, (k0, v0) in enumerate(first):
            shape = (len(found) * L, k0.shape[1], C, k0.shape[3])
            keys = torch.zeros(shape, dtype=k0.dtype, device=k0.device)
            values = torch.zeros((*shape[:3], v0.shape[3]), dtype=v0.dtype, device=v0.device)
            for i, (key, n) in enumerate(found):
                if n:
                    k, v = self.kept[key][layer]
                    keys[i * L : (i + 1) * L, :, C - n :] = k[0, :, :n]
                    values[i * L : (i + 1) * L, :, C - n :] = v[0, :, :n]
            past.update(keys, values, layer)
        seen = torch.zeros((len(found) * L, C), dtype=torch.long, device=dev)
        for i, n in enumerate(lcp):
            seen[i * L : (i + 1) * L, C - n :] = 1
        n_real = torch.tensor(np.repeat(lcp, L), device=dev)
        return past, seen, n_real

    def _keep(
        self, contexts, keep, past, lcp, C: int, W: int,
        per: int | None = None, tail: int | None = None,
    ) -> None:  # fmt: skip
        """Keep the cache of each context marked ``keep``: from its first leaf row, the
        real positions of its prefix and of its own tokens (the leaf's left out).

        ``per`` rows a context in the batch (default: one per leaf) and ``tail`` tokens
        after the context in its first row (default: the first leaf's); a prefill has one
        row per context and nothing after it."""
        import torch

        L = len(self.leaves) if per is None else per
        first_leaf = len(self.leaves[0]) if tail is None else tail
        for i, (ids, n) in enumerate(zip(contexts, lcp, strict=True)):
            key = tuple(ids)
            if not keep[i] or key in self.kept:
                continue
            r = i * L
            start = C + W - (len(ids) - n + first_leaf)  # where the row's tokens begin
            own = slice(start, start + len(ids) - n)
            kv = []
            for layer in past.layers:
                k = torch.cat(
                    [layer.keys[r : r + 1, :, C - n : C], layer.keys[r : r + 1, :, own]], 2
                )
                v = torch.cat(
                    [layer.values[r : r + 1, :, C - n : C], layer.values[r : r + 1, :, own]], 2
                )
                kv.append((k, v))  # torch.cat copied them out of the batch
            self._store(key, kv)

    def _store(self, key: tuple[int, ...], kv: _Kv) -> None:
        size = _nbytes(kv)
        if size > self.max_bytes:
            return
        self.kept[key] = kv
        self.bytes += size
        self.trie.add(key)
        evicted = False
        while self.bytes > self.max_bytes:
            _, old = self.kept.popitem(last=False)
            self.bytes -= _nbytes(old)
            evicted = True
        if evicted:  # rebuilt from the contexts still kept
            self.trie = _Trie()
            for k in self.kept:
                self.trie.add(k)


def _nbytes(kv: _Kv) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


def _logits_width(rows: list[list[int]]) -> int:
    """The width of a batch of left-padded rows."""
    return max(len(r) for r in rows)


def _plain_cache(past: KVCache) -> bool:
    """Whether a KV cache is plain full attention (every layer a ``DynamicLayer``), the only
    kind whose kept prefixes can be padded and stacked into a new batch."""
    layers = getattr(past, "layers", None) or ()
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


def _budget(scorer: Scorer) -> int:
    """:data:`DEFAULT_TREE_BYTES` on the CPU; a third of the free memory on a GPU."""
    import torch

    dev = scorer.input_device
    if getattr(dev, "type", "cpu") == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return int(free // 3)
    return DEFAULT_TREE_BYTES
