"""The transformers backend's model: :class:`LocalModel`, one unit of prompts at a time."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ....core.errors import CollectionError
from ...answers.sequences import AnswerSequences
from ...answers.tokens import ValidTokens
from ...answers.walk import ROUND_NODES, NodeReader
from ...foreign import KVCache, Tensor
from ...options import CollectOptions
from ...prefixes import common_prefix, prefix_groups
from ...reasoning import sample_tokens
from ...templates import PromptTemplate
from ..inprocess import InProcessModel, walk_group
from .device_readout import next_token_readout_torch
from .loading import LoadedModel
from .packed import PackedUnitReader, packable
from .scorer import (
    Scorer,
    context_readout,
    empty_cache,
    finish_readout,
    in_batches,
    is_oom,
)
from .tree import TreeReader

__all__ = ["LOGITS_BYTES", "TRACE_SAMPLER", "WALK_BYTES", "LocalModel", "WalkingTreeReader"]

#: The most logits (float32 bytes) one prompt's teacher-forced leaves hold at once: an
#: answer rule of more (a word label of many spellings in a large vocabulary: 1,012
#: leaves of 非常不同意 / 非常同意 in Qwen 2.5's, 11 GB) is read a chunk of leaves at a time.
LOGITS_BYTES = 1 << 30

#: The most memory the KV caches kept by one unit's label walks may take (each node's
#: cache is its parent's for its children; a prompt's are dropped when its walk ends).
WALK_BYTES = 1 << 29

#: How the transformers backend samples a trace; stored in the model's provenance.
TRACE_SAMPLER = (
    "transformers backend: the M traces of a prompt in one batch with a KV cache (a finished "
    "trace stays in it, fed padding hidden by the attention mask, and the answer after it is "
    "read on that cache); each draws from its own numpy PCG64 stream seeded with trace_seed("
    "seed, prompt text, index): u ~ U[0, 1), token = inverse CDF of nucleus_logprobs(logits, "
    "temperature, top_p) over the full vocabulary in float64 (DECODING_TIE_RULE)"
)


def _logits_rows(logits, n: int) -> dict[str, np.ndarray]:
    """A :class:`TreeReader` readout: each context's last logits row, float32 on the host
    (the walk takes the log-softmax over the whole vocabulary in float64)."""
    return {"logits": logits[:, -1, :].float().cpu().numpy()}


def _on_tree(tr: TreeReader, prompt: list[int]) -> NodeReader:
    """The walk's :class:`~xlikert.collect.answers.walk.NodeReader` of one prompt on ``tr``."""

    def read(nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
        return tr.read([prompt + list(n) for n in nodes], keep)["logits"]

    return read


class LocalModel(InProcessModel):
    """A :class:`~xlikert.collect.protocol.Model` running a transformers model in process.

    Each call to :meth:`score` runs one unit: the prompts' shared prefix once
    (KV cache), then length-sorted batches of teacher-forced rows, one per answer
    context leaf; out of memory, the batch size halves (down to one prompt). The
    outline of a unit and the provenance are the in-process backends' common
    :class:`~xlikert.collect.backends.inprocess.InProcessModel`.
    """

    TRACE_SAMPLER = TRACE_SAMPLER
    walks_labels = True

    def __init__(
        self,
        lm: LoadedModel,
        options: CollectOptions,
        reasoning: dict[str, Any] | None = None,
    ):
        self.lm = lm
        self.name = lm.name
        self.options = options
        #: The checked ``reasoning`` table (None: the answer is read right after the prompt).
        self._start_reasoning(
            reasoning, lm.tokenizer, lm.model.config, getattr(lm.model, "generation_config", None)
        )
        self.scorer = Scorer(lm, prefix_cache=options.prefix_cache)
        bs = options.batch_size
        # CPU: 16 prompts per batch beat 8 on Qwen2.5-0.5B (51% against 48% of the
        # useful-FLOP bound, benchmarks/bench_collect.py, 2 cores); wider batches pad more
        self.batch_size = (
            (64 if str(lm.device).startswith("cuda") else 16) if bs == "auto" else int(bs)
        )
        self.initial_batch_size = self.batch_size
        self.backoffs = 0
        self.walk_passes = self.walks_short = 0
        self._use_answers(lm.valid, lm.answers)
        if options.answer_labels is not None:  # the loaded model's rule reads the digits
            labels, self.options = options.answer_labels, options.replace(answer_labels=None)
            self.relabel(labels)

    def _use_answers(self, valid: ValidTokens, answers: AnswerSequences) -> None:
        """Read with this answer rule: its teacher-forced leaves and where each context is
        (none where only the walk reads the rule: its spellings too many to list)."""
        n_vocab = self.lm.model.get_output_embeddings().weight.shape[0]
        ids = (*answers.need, *(answers.pooled or ()))
        if answers.trie is not None:
            p = answers.trie.pieces
            ids += (*p.spaces, *(t for v in p.first.values() for t in v))
        if max(ids) >= n_vocab:
            raise CollectionError(f"model {self.name!r}: answer token ids exceed the vocabulary")
        self._valid, self._answers = valid, answers
        if not answers.sequences:
            self.leaves, self.keep = [], 1
            self.where: list[tuple[int, int]] = []
            return
        self.leaves = [list(leaf) for leaf in answers.leaves]
        self.keep = max(len(leaf) for leaf in self.leaves) + 1
        # context -> (leaf row, kept position) holding the logits after prompt + context
        self.where = []
        for c in answers.contexts:
            li = next(i for i, leaf in enumerate(self.leaves) if tuple(leaf[: len(c)]) == c)
            self.where.append((li, self.keep - 1 - len(self.leaves[li]) + len(c)))

    def __repr__(self) -> str:
        return f"<LocalModel {self.lm!r} batch_size={self.batch_size}>"

    # the loaded model's parts, as the common base reads them
    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def template(self) -> PromptTemplate:
        return self.lm.template

    @property
    def valid(self) -> ValidTokens:
        return self._valid

    @property
    def answers(self) -> AnswerSequences:
        return self._answers

    def read_prompts(self, texts: list[str], encoded: list[list[int]]) -> dict[str, np.ndarray]:
        """The unit's shared prefix (same system prompt; >= 1 suffix token kept) once on
        the KV cache, then :meth:`_read` of every prompt; where groups of the prompts share
        a longer prefix (each respondent's persona and the text up to where their items
        differ, :func:`~xlikert.collect.prefixes.prefix_groups`), each group's prefix is also
        run once (:meth:`read_groups`). Answers of several tokens are read by the certified
        walk over their labels' trie (:meth:`_walk_prompts`)."""
        if self.answers.trie is not None:
            return self._walk_prompts(encoded)
        P = common_prefix(encoded)
        if self.scorer.prefix_cache and len(encoded) > 2:
            groups = prefix_groups(encoded, P)
            if any(n > P for n, _ in groups):
                out = self.read_groups(encoded, P, groups)
                if out is not None:
                    return out
        prefix = encoded[0][:P]
        try:
            cache = self.scorer.prefix_state(prefix)
        except Exception as exc:
            if not is_oom(exc):
                raise
            raise self._oom(f"shared prefix of {P} tokens") from exc
        return self._read(prefix, cache, [e[P:] for e in encoded])

    def read_groups(
        self, encoded: list[list[int]], P: int, groups: list[tuple[int, list[int]]]
    ) -> dict[str, np.ndarray] | None:
        """Every prompt read from its group's prefix, run once a group on a
        :class:`TreeReader` (the conversations' reader): the unit's common prefix first,
        then every group's prefix from it, then the prompts, sorted by group and length,
        in batches that mix groups (each row's prefix left padded in the batch's cache).
        None where this model's cache cannot be kept and padded (sliding windows,
        recurrent layers), or where a prompt's leaves are read a chunk at a time: the
        caller reads the unit from its common prefix alone."""
        if self._leaf_chunks():
            return None
        with TreeReader(self.scorer, self.leaves, self.keep, self.readout, self.batch_size) as tr:
            if P and not tr.prefill([encoded[0][:P]]):
                return None
            if not tr.prefill([encoded[g[0]][:n] for n, g in groups if n > P]):
                return None
            order = [r for n, g in groups for r in sorted(g, key=lambda r: len(encoded[r]))]
            out = tr.read([encoded[r] for r in order], keep=[False] * len(order))
            if tr.batch_size < self.batch_size:  # halved out of memory
                self.batch_size = tr.batch_size
                self.backoffs += 1
        if not self.scorer.prefix_cache:  # the check turned caching off: read as every
            return None  # later unit is, uncached in the fixed batches (the same numbers)
        back = np.argsort(order)
        return {key: val[back] for key, val in out.items()}

    def _read(
        self, prefix: list[int], cache: KVCache, suffixes: list[list[int]]
    ) -> dict[str, np.ndarray]:
        """:func:`read_logits` of ``prefix + suffix`` for every suffix, in batches.

        Sorted by length (fewer pads) and split into equal batches; the order and
        the split are fixed, so a resumed run batches exactly as an uninterrupted
        one. Out of memory, the batch size halves (down to one suffix).
        """
        order = sorted(range(len(suffixes)), key=lambda r: (len(suffixes[r]), r))
        L = len(self.leaves)
        res: dict[str, np.ndarray] = {}
        state = {"cache": cache}

        def size(left: int) -> int:  # equal batches of at most batch_size // L suffixes
            bs = max(1, self.batch_size // L)  # one teacher-forced row per (suffix, leaf)
            return -(-left // -(-left // bs))

        def step(at: list[int]) -> bool:
            rows = [order[i] for i in at]
            if self._leaf_chunks():  # one prompt per batch: its leaves a chunk at a time
                if state["cache"] is not None and self.scorer.needs_check("prefix"):
                    row = suffixes[rows[0]] + self.leaves[0]
                    one = self.scorer.forward_rows(prefix, state["cache"], [row], keep=self.keep)
                    self.scorer.check_prefix_cache(prefix, one[0, -1], row)
                    if not self.scorer.prefix_cache:
                        state["cache"] = None
                each = [self._read_in_leaf_chunks(prefix, state["cache"], suffixes[r])
                        for r in rows]  # fmt: skip
                out = {key: np.concatenate([o[key] for o in each]) for key in each[0]}
            else:
                batch = [suffixes[r] + leaf for r in rows for leaf in self.leaves]
                logits = self.scorer.forward_rows(prefix, state["cache"], batch, keep=self.keep)
                if state["cache"] is not None and self.scorer.needs_check("prefix"):
                    self.scorer.check_prefix_cache(prefix, logits[0, -1], batch[0])
                    if not self.scorer.prefix_cache:
                        state["cache"] = None
                        return False  # recompute this batch without the cache
                out = self.readout(logits, len(rows))
            for key, val in out.items():
                if key not in res:
                    res[key] = np.zeros((len(suffixes), *val.shape[1:]), dtype=val.dtype)
                res[key][rows] = val
            return True

        def halve() -> None:
            self.batch_size = max(1, self.batch_size // 2)  # prompts, not rows
            self.backoffs += 1

        in_batches(len(order), size, step, halve,
                   lambda at: self._oom(f"{len(prefix) + len(suffixes[order[at[0]]])} tokens"))  # fmt: skip
        return res

    def _walk_prompts(self, encoded: list[list[int]]) -> dict[str, np.ndarray]:
        """Each prompt's answers by the certified walk over the labels' trie
        (:func:`~xlikert.collect.answers.walk.walk_labels`): where the model's cache is
        plain full attention, the walks of a few prompts together
        (:func:`~xlikert.collect.backends.inprocess.walk_group`), a
        round of all of them as one tree-masked row on one growing cache, copied from the
        unit's shared prefix
        (:class:`~xlikert.collect.backends.transformers.packed.PackedUnitReader`: nothing
        copied or padded per node); else each node read from its parent's KV cache on one
        :class:`TreeReader` (the unit's shared prefix run once and kept; a prompt's nodes'
        caches dropped once its walk is done, so memory is bounded by :data:`WALK_BYTES`
        and one round's logits)."""
        P = common_prefix(encoded) if self.scorer.prefix_cache else 0
        shared = [encoded[0][:P]] if P else []
        state = self.scorer.prefix_state(shared[0]) if P else None
        if state is not None and packable(self.scorer, state):  # a packed tree a round
            n_vocab = self.lm.model.get_output_embeddings().weight.shape[0]
            size = walk_group(n_vocab, self.batch_size)
            groups = (PackedUnitReader(self.scorer, encoded[a : a + size], (state, P))
                      for a in range(0, len(encoded), size))  # fmt: skip
            return self._walk_readout(groups=groups)
        # a round in one pass: a forward's cost on a CPU is mostly reading the weights
        with TreeReader(self.scorer, [[]], 1, _logits_rows, max(self.batch_size, ROUND_NODES),
                        max_bytes=WALK_BYTES) as tr:  # fmt: skip
            # the shared prefix from the scorer's (kept across units, as codes read it)
            if P and not tr.adopt(shared[0], self.scorer.prefix_state(shared[0])):
                tr.prefill(shared)
            out = self._walk(lambda n: _on_tree(tr, n), encoded, lambda _: tr.retain(shared))
            if tr.batch_size < self.batch_size:  # halved out of memory
                self.batch_size = tr.batch_size
                self.backoffs += 1
        return out

    def _walk(
        self,
        reader: Callable[[list[int]], NodeReader],
        contexts: Sequence[Sequence[int]],
        done: Callable[[int], None],
    ) -> dict[str, np.ndarray]:
        """The walk's readout after each context (``reader(ids)``: its node reader;
        ``done(i)`` told when context ``i``'s walk is over, to drop its nodes' caches), by
        the in-process backends' one driver
        (:meth:`~..inprocess.InProcessModel._walk_readout`, which says the walks that spent
        their budget first: a ``RuntimeWarning``)."""

        def readers() -> Iterator[NodeReader]:
            for i, ids in enumerate(contexts):
                yield reader(list(ids))
                done(i)  # the driver asks for the next reader once walk i is over

        return self._walk_readout(readers())

    def node_reader(self, prompt: Sequence[int]) -> tuple[NodeReader, Callable[[], None]]:
        """A reader of the next-token logits after ``prompt`` and each node's tokens, each
        node run from its parent's kept KV cache (:class:`TreeReader`), and its ``close``
        (:meth:`~xlikert.collect.protocol.LabelWalkingModel.node_reader`)."""
        bs = max(self.batch_size, ROUND_NODES)
        tr = TreeReader(self.scorer, [[]], 1, _logits_rows, bs, max_bytes=WALK_BYTES)
        return _on_tree(tr, list(prompt)), tr.close

    def _refuse_leaf_chunks(self, what: str) -> None:
        """``what`` reads every leaf of a context at once: refused, by name, where they
        hold more logits than :data:`LOGITS_BYTES` (the prompt reader takes them in chunks),
        or where the rule's spellings are too many to list (only the walk reads them)."""
        if not self.answers.sequences:
            raise CollectionError(
                f"model {self.name!r}: {what} reads every spelling of the answers, and these "
                "labels have more than max_answer_positions tokens of spellings (the walk "
                "that reads them for a prompt does not yet serve this path): answer with "
                "codes or letters, use shorter labels, or raise max_answer_positions"
            )
        if self._leaf_chunks():
            raise CollectionError(
                f"model {self.name!r}: {what} reads every spelling of the answers at once, and "
                f"this rule has {len(self.leaves):,} (more than {LOGITS_BYTES >> 20} MiB of "
                "logits a context): answer with codes or letters, or shorter labels"
            )

    def _listed(self, what: str) -> tuple[list[list[int]], int]:
        """The rule's leaves and kept positions now, for a reader that reads every spelling
        (refused, by name, where they are not listed or too many to hold at once)."""
        self._refuse_leaf_chunks(what)
        return self.leaves, self.keep

    def _leaf_chunks(self) -> bool:
        """Whether one prompt's leaves hold more logits than :data:`LOGITS_BYTES` at once."""
        n_vocab = self.lm.model.get_output_embeddings().weight.shape[0]
        return len(self.leaves) * self.keep * n_vocab * 4 > LOGITS_BYTES

    def walks_listing(self) -> bool:
        """Whether the rule read now is read by the labels' walk where a reader of
        contexts would list every spelling: its spellings are too many to list
        (``max_answer_positions``), or to hold at once (:data:`LOGITS_BYTES`)."""
        return self.answers.trie is not None and (not self.answers.sequences or self._leaf_chunks())

    def context_reader(self, session: str) -> TreeReader:
        """A reader of one conversation tree (sequential administration): each conversation
        from the longest prefix it shares with one read before (:class:`TreeReader`); the
        answers after it read by listing every spelling, or, where they are too many
        (:meth:`walks_listing`), by the labels' walk from the conversation's kept cache
        (:class:`WalkingTreeReader`)."""
        return WalkingTreeReader(self, "sequential administration")

    # ------------------------------------------------------------------ replies (elicitation)
    @property
    def end_of_turn(self) -> frozenset[int]:
        """Token ids that end the model's turn (:data:`~..inprocess.END_OF_TURN_RULE`)."""
        model = self.lm.model
        gen = getattr(model, "generation_config", None)
        return self._turn_end_ids(self.lm.tokenizer, model.config, gen)

    def greedy_reply(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], str]:
        """The greedy reply after ``ids`` (elicitation level ``greedy``): one token per pass
        on a KV cache, each the argmax of the float32 logits (no repetition penalty or other
        processor), stopping at an end-of-turn token (left out: ``"eos"``) or after
        ``max_new_tokens`` tokens (``"length"``)."""
        reply, end, _ = self._greedy(ids, max_new_tokens, thought=None)
        return reply, end

    def greedy_thought_reply(
        self, ids: list[int], max_new_tokens: int
    ) -> tuple[list[int], str, int | None]:
        """The greedy reply after ``ids`` of a model in reasoning mode, its thought included
        (elicitation level ``stated``): as :meth:`greedy_reply`, but the thought runs first,
        up to the reasoning entry's ``max_new_tokens``, until the model writes the format's
        end marker; then up to ``max_new_tokens`` more tokens. Returns the whole reply (thought
        included), how it ended (``"eos"``, ``"length"``) and the number of the thought's
        tokens, the marker included (None: the thought did not end: the turn ended, or
        the thought's budget ran out, before the marker)."""
        assert self.reasoning is not None, "called in reasoning mode only"
        return self._greedy(ids, max_new_tokens, thought=int(self.reasoning["max_new_tokens"]))

    def _greedy(
        self, ids: list[int], max_new_tokens: int, thought: int | None
    ) -> tuple[list[int], str, int | None]:
        """Greedy decoding on a KV cache; ``thought``: the thought's budget (None: no thought),
        after whose end marker ``max_new_tokens`` more tokens are written."""
        import torch

        dev, stop = self.scorer.input_device, self.end_of_turn
        past = self.scorer.new_cache()
        limit = int(max_new_tokens) if thought is None else thought
        ended: int | None = None
        try:
            out = self.scorer.run(past, input_ids=torch.tensor([list(ids)], device=dev))
            reply: list[int] = []
            while len(reply) < limit:
                t = int(torch.argmax(out.logits[0, -1].float()).item())
                if t in stop:
                    return reply, "eos", ended
                reply.append(t)
                if thought is not None and ended is None and self._wrote_marker(reply):
                    ended = len(reply)
                    limit = ended + int(max_new_tokens)
                if len(reply) < limit:
                    out = self.scorer.run(past, input_ids=torch.tensor([[t]], device=dev))
        except Exception as exc:
            if not is_oom(exc):
                raise
            raise self._oom(f"a greedy reply of up to {limit} tokens") from exc
        return reply, "length", ended

    def next_token_reader(self, session: str) -> TreeReader:
        """A reader of one reply tree (elicitation level ``own_words``): the float64
        next-token log-probabilities of the whole vocabulary after each context
        (``"logprobs"``, ``(n, V)``), each context run from the longest prefix it shares with
        a kept one (:class:`TreeReader`)."""

        def readout(logits, n: int) -> dict[str, np.ndarray]:
            import torch

            z = logits[:, -1, :].to(torch.float64)
            return {"logprobs": torch.log_softmax(z, -1).cpu().numpy()}

        return TreeReader(self.scorer, [[]], 1, readout, self.batch_size)

    # ------------------------------------------------------------------ reasoning mode
    def _sample_and_read(
        self, texts: list[str], encoded: list[list[int]], seeds: list[list[int]],
        closing: dict[bool, list[int]],
    ) -> Iterator[tuple[list[list[int]], list[str], dict[str, np.ndarray]]]:  # fmt: skip
        """Per prompt: its M traces sampled in one batch (:meth:`_sample`), then the
        answer after each closed trace read on the sampling's KV cache
        (:meth:`_read_after_traces`), or afresh when prefix caching is off."""
        self._refuse_leaf_chunks("the reasoning mode")
        cfg = self.reasoning
        assert cfg is not None, "called in reasoning mode only"
        for ids, ss in zip(encoded, seeds, strict=True):
            try:
                traces, ends, state = self._sample(ids, ss)
                out = None
                if self.scorer.prefix_cache:
                    out = self._read_after_traces(ids, state, traces, ends, closing)
                if out is None:  # prefix caching off: every trace teacher-forced afresh
                    closed = [t + closing[e == "marker"] for t, e in zip(traces, ends, strict=True)]
                    out = self._read(ids, None, closed)
            except Exception as exc:
                if not is_oom(exc):
                    raise
                raise self._oom(
                    f"{cfg['traces']} traces of up to {cfg['max_new_tokens']} tokens"
                ) from exc
            yield traces, ends, out

    def _sample(self, ids: list[int], seeds: list[int]):
        """Sample one trace per seed after the prompt ``ids``, all in one batch.

        Each trace draws its tokens from its own stream (``numpy`` PCG64 seeded
        with its seed) by :func:`~xlikert.collect.reasoning.sample_tokens` at the
        entry's temperature and top-p. A trace ends when the model writes the
        end marker (``"marker"``, the marker kept in the trace), an end-of-turn
        token (``"eos"``, the token dropped) or reaches ``max_new_tokens``
        (``"length"``). A finished trace stays in the batch, fed a padding token
        that the attention mask hides, so that its KV cache is there to read the
        answer after it (:meth:`_read_after_traces`). Returns the traces' token
        ids, how each ended, and the batch's state: the KV cache, the attention
        mask over it and the number of real tokens of each row.
        """
        import torch

        cfg = self.reasoning
        assert cfg is not None, "called in reasoning mode only"
        dev = self.scorer.input_device
        M = len(seeds)
        pad = self.scorer.pad_id
        rngs = [np.random.Generator(np.random.PCG64(s)) for s in seeds]
        past = self.scorer.new_cache()
        out = self.scorer.run(past, input_ids=torch.tensor([ids], device=dev))
        with torch.inference_mode():
            if M > 1:
                past.batch_repeat_interleave(M)
            logits = np.repeat(out.logits[:, -1].float().cpu().numpy(), M, axis=0)
            mask = torch.ones((M, len(ids)), dtype=torch.long, device=dev)
            n_real = np.full(M, len(ids))
            gen: list[list[int]] = [[] for _ in range(M)]
            ends: list[str | None] = [None] * M
            for step in range(cfg["max_new_tokens"]):
                active = [r for r in range(M) if ends[r] is None]
                u = np.array([rngs[r].random() for r in active])
                drawn = sample_tokens(logits[active], u, cfg["temperature"], cfg["top_p"])
                for r, t in zip(active, drawn.tolist(), strict=True):
                    if t in self.stop_ids:
                        ends[r] = "eos"
                        continue
                    gen[r].append(t)
                    if self._wrote_marker(gen[r]):
                        ends[r] = "marker"
                live = [ends[r] is None for r in range(M)]
                if not any(live):
                    break
                if step == cfg["max_new_tokens"] - 1:
                    for r in range(M):
                        if live[r]:
                            ends[r] = "length"
                    break
                nxt = torch.tensor([[gen[r][-1] if live[r] else pad] for r in range(M)],
                                   device=dev)  # fmt: skip
                mask = torch.cat(
                    [mask, torch.tensor(live, device=dev, dtype=mask.dtype)[:, None]], 1
                )
                out = self.scorer.run(past, input_ids=nxt, attention_mask=mask,
                                      position_ids=torch.tensor(n_real, device=dev)[:, None])  # fmt: skip
                n_real += np.asarray(live)
                logits = out.logits[:, -1].float().cpu().numpy()
        return gen, ends, (past, mask, n_real)

    def _read_after_traces(self, ids, state, traces, ends, closing) -> dict[str, np.ndarray] | None:
        """:func:`read_logits` after every closed trace, on the KV cache of its sampling.

        The tokens of a trace are in the cache already (all but a last sampled
        token that was never fed); only that token, the closing text and the
        answer's teacher-forced leaves are run, one row per (trace, leaf), left
        padded and masked like :meth:`Scorer.forward_rows`. The first read of a
        model is checked against an uncached pass of the whole text
        (:meth:`Scorer.check_prefix_cache`); None when that check turned caching off.
        """
        import torch

        past, mask, n_real = state
        dev = self.scorer.input_device
        L = len(self.leaves)
        # never fed: the last token of a trace that ended on the marker or the length
        fresh = [t[-1:] if e != "eos" else [] for t, e in zip(traces, ends, strict=True)]
        rows = [f + closing[e == "marker"] + leaf
                for f, e in zip(fresh, ends, strict=True) for leaf in self.leaves]  # fmt: skip
        if L > 1:
            past.batch_repeat_interleave(L)
        logits = self.scorer.forward_on_cache(
            past, mask.repeat_interleave(L, 0), torch.tensor(np.repeat(n_real, L), device=dev),
            rows, keep=self.keep,
        )  # fmt: skip
        if self.scorer.needs_check("trace read"):
            whole = traces[0][: len(traces[0]) - len(fresh[0])] + rows[0]
            self.scorer.check_prefix_cache(ids, logits[0, -1], whole, path="trace read")
            if not self.scorer.prefix_cache:
                return None
        return self.readout(logits, len(traces))

    @property
    def readout_on_device(self) -> bool:
        """Whether the readout runs where the logits are (every device but the CPU).

        There the rules run in float64 torch on the device
        (:func:`~xlikert.collect.backends.transformers.device_readout.next_token_readout_torch`) and only
        the answer tokens' numbers reach the host; on the CPU, in float64 numpy
        (:func:`read_logits`). The two agree to rounding (tests compare them).
        """
        return not str(self.lm.device).startswith("cpu")

    def readout(self, logits: Tensor, n: int) -> dict[str, np.ndarray]:
        """The next-token readout of a batch: :func:`read_logits` of ``n`` contexts from
        ``(n * L, keep, V)`` logits, one row per (context, teacher-forced leaf), the
        leaves' positions in ``self.where`` (on the device where the logits are,
        :attr:`readout_on_device`).

        Every forward pass of :meth:`read_prompts` and of the reasoning mode ends here:
        a subclass may wrap it (to time it) or replace it (to draw answers from the
        same logits), as the benchmarks do."""
        return finish_readout(self.answers, *self._context_readout(logits, n, self.where))

    def _context_readout(
        self, logits: Tensor, n: int, where: list[tuple[int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(raw, grid, topk_id, topk_logprob)`` of the contexts at ``where`` (leaf row of
        ``logits``, kept position), from ``(n * leaves, positions, V)`` logits
        (:func:`~.scorer.context_readout`, or its torch twin on the device)."""
        n_leaves, keep = logits.shape[0] // n, logits.shape[1]
        if self.readout_on_device:
            import torch

            z = logits.reshape(n, n_leaves, keep, logits.shape[-1])
            z = torch.stack([z[:, li, pos] for li, pos in where], dim=1)
            o = self.options
            return next_token_readout_torch(
                z, np.asarray(self.answers.need), o.temperatures, o.top_ps, o.top_k,
                pooled=self.answers.pooled,
            )  # fmt: skip
        z = logits.float().cpu().numpy().reshape(n, n_leaves, keep, -1)
        z = np.stack([z[:, li, pos] for li, pos in where], axis=1)
        return context_readout(z, self.answers, self.options)

    def _read_in_leaf_chunks(
        self, prefix: list[int], cache: KVCache, suffix: list[int]
    ) -> dict[str, np.ndarray]:
        """One prompt's readout with its teacher-forced leaves run a chunk at a time, each
        chunk's logits (``chunk x keep x V``) within :data:`LOGITS_BYTES`: answers of many
        spellings (a word label in a large vocabulary) would otherwise hold every leaf's
        logits at once. Each context is read from the chunk of its leaf; the numbers are
        those of one batch of every leaf (a test compares them)."""
        n_vocab = self.lm.model.get_output_embeddings().weight.shape[0]
        per = max(1, LOGITS_BYTES // (self.keep * n_vocab * 4))
        parts: list[tuple[list[int], tuple]] = []
        top = None
        for a in range(0, len(self.leaves), per):
            chunk = range(a, min(a + per, len(self.leaves)))
            ctx = [c for c, (li, _) in enumerate(self.where) if li in chunk]
            if not ctx:
                continue
            logits = self.scorer.forward_rows(
                prefix, cache, [suffix + self.leaves[li] for li in chunk], keep=self.keep
            )
            # rows shorter than keep (a chunk of short leaves) return fewer positions: the
            # last ones, where every context of the chunk's leaves is
            shift = self.keep - logits.shape[1]
            where = [(self.where[c][0] - a, self.where[c][1] - shift) for c in ctx]
            raw, grid, topk_id, topk_lp = self._context_readout(logits, 1, where)
            parts.append((ctx, (raw, grid)))
            if ctx[0] == 0:  # the top-k list is of the first context: the prompt alone
                top = (topk_id, topk_lp)
        C = len(self.where)
        raw0, grid0 = parts[0][1]
        raw = np.full((1, C, *raw0.shape[2:]), np.nan)
        grid = np.full((1, C, *grid0.shape[2:]), np.nan)
        for ctx, (r, g) in parts:
            raw[:, ctx], grid[:, ctx] = r, g
        assert top is not None  # context 0 is the empty one, read in some chunk
        return finish_readout(self.answers, raw, grid, *top)

    def _wrote_marker(self, ids: list[int]) -> bool:
        assert self.format is not None, "called in reasoning mode only"
        marker = self.format.marker
        tail = self.lm.tokenizer.decode(ids[-(len(marker) + 1) :], skip_special_tokens=False)
        return tail.endswith(marker)

    def _oom(self, what: str) -> CollectionError:
        return CollectionError(
            f"model {self.name!r} runs out of memory even on a batch of 1 prompt ({what}); "
            "use a smaller dtype, device_map='auto', or a bigger device"
        )

    def _provenance(self) -> dict[str, Any]:
        return self.lm.provenance

    def provenance(self) -> dict[str, Any]:
        info = super().provenance()
        if self.readout_on_device:
            info["readout"] = "on the model's device, float64 torch (device_readout)"
        info["batch_size"] = self.initial_batch_size
        info["oom_backoffs"] = self.backoffs

        return info

    def close(self) -> None:
        """Drop this handle's references to the weights, so their memory can go back
        before the next model loads (a caller holding the :class:`LoadedModel` keeps it)."""
        self.lm = self.scorer = None  # type: ignore[assignment]  # not used after close
        gc.collect()
        empty_cache()


class WalkingTreeReader(TreeReader):
    """The :class:`TreeReader` of a conversation tree on a :class:`LocalModel` whose answer
    rule may need the labels' walk (:meth:`LocalModel.walks_listing`, asked at every read:
    a battery relabels the model between items).

    A listed rule is read as :class:`TreeReader` reads it (every spelling a teacher-forced
    leaf). A rule of too many spellings is read by
    :func:`~xlikert.collect.answers.walk.walk_labels` after each context: its nodes run
    from the context's kept cache on this reader, and dropped when its walk is done (the
    contexts marked ``keep`` stay, for the histories that extend them). The rows are
    :func:`~xlikert.collect.answers.walk.walk_readout`'s: certified bounds and
    ``answer_error`` beside the masses read, which sequential administration keeps
    (:data:`~xlikert.kernels.history_tree.READING_BOUND_RULE`).
    """

    def __init__(self, model: LocalModel, what: str):
        super().__init__(model.scorer, model.leaves, model.keep, model.readout,
                         model.batch_size, rule=lambda: model._listed(what))  # fmt: skip
        self.model = model
        self.held: list[tuple[int, ...]] = []

    def read(
        self, contexts: Sequence[Sequence[int]], keep: Sequence[bool] | None = None
    ) -> dict[str, np.ndarray]:
        """The readout after each context (:meth:`TreeReader.read`), by the walk where
        the rule needs it."""
        keep = [True] * len(contexts) if keep is None else list(keep)
        if not self.model.walks_listing():
            out = super().read(contexts, keep)
        else:
            out = self._walked(contexts, keep)
        self.held += [tuple(c) for c, k in zip(contexts, keep, strict=True) if k]
        return out

    def _walked(self, contexts: Sequence[Sequence[int]], keep: list[bool]) -> dict[str, np.ndarray]:
        saved = self.leaves, self.keep, self._readout, self._rule
        self.leaves, self.keep, self._readout, self._rule = [[]], 1, _logits_rows, None

        def reader(ids: list[int]) -> NodeReader:
            def read(nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
                return TreeReader.read(self, [ids + list(n) for n in nodes], keep)["logits"]

            return read

        def done(i: int) -> None:  # the walk's nodes go; the contexts kept stay
            mine = [tuple(c) for c, k in zip(contexts[: i + 1], keep, strict=False) if k]
            self.retain([*self.held, *mine])

        try:
            return self.model._walk(reader, contexts, done)
        finally:
            self.leaves, self.keep, self._readout, self._rule = saved
