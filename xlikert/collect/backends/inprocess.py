"""What the in-process backends share: dtype rules, end of turn, provenance, scoring outline.

The transformers backend (:mod:`xlikert.collect.backends.transformers`) and the
in-process vLLM backend (:mod:`xlikert.collect.backends.vllm`) run the same token ids through a model in
this process and read them with the same numpy rules. What they share is
written once here, as :class:`InProcessModel` (their common base, in the manner
of a template method: the outline of a unit's scoring is here, the engine work
in the backends) and a few functions:

* the dtype rule (:func:`resolve_dtype`; the names are checked by
  :func:`xlikert.collect.entries.check_dtype`);
* the end-of-turn rule (:func:`_end_of_turn_ids`, :data:`END_OF_TURN_RULE`);
* the entry keys both know (:data:`ENTRY_KEYS`) and the provenance both record
  (:func:`model_provenance`, :meth:`InProcessModel.provenance`);
* the outline of a unit in exact mode and in reasoning mode
  (:meth:`InProcessModel.score`);
* the labels' walk of a unit's prompts (:func:`walk_prompts`: the certified walk over
  the answer labels' trie, :mod:`xlikert.collect.answers.walk`, one node reader per
  prompt; the openai backend's server walk reads through it too);
* what an entry resolves to before it loads (:class:`ModelFiles`: the folder, the
  checksum of its weights, the tokenizer) and the backend's ``inputs`` built from it
  (:func:`in_process_inputs`: the identity and token ids a run keys its cells by,
  :mod:`xlikert.collect.run.identity`).

Neither torch nor vLLM is imported here at module level.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.codecs import encode_token_ids
from ...core.errors import CollectionError
from ...core.schema import (
    BOUND_VARIABLES,
    NONSUBSTANTIVE_BOUND_VARIABLES,
    SCRIPT_BOUND_VARIABLES,
    WALK_VARIABLES,
)
from ...kernels.readout import DECODING_TIE_RULE
from ..answers.sequences import AnswerSequences
from ..answers.spellings import answer_rule
from ..answers.tokens import ValidTokens
from ..answers.vocabulary import token_text
from ..answers.walk import (
    ROUND_NODES,
    LabelWalk,
    NodeReader,
    UnitNodeReader,
    run_walks,
    walk_labels,
    walk_readout,
    walk_steps,
)
from ..entries import check_dtype
from ..foreign import GenerationConfig, ModelConfig, Tokenizer
from ..options import labels_key
from ..progress import CellProgressFn
from ..protocol import AnswerArrays, CellInputs
from ..reasoning import (
    ReasoningFormat,
    check_reasoning,
    reasoning_format,
    reasoning_provenance,
    store_traces,
    trace_seed,
)
from ..record import UnitResult

if TYPE_CHECKING:
    from ..options import CollectOptions
    from ..templates import PromptTemplate

__all__ = [
    "END_OF_TURN_RULE",
    "ENTRY_KEYS",
    "WALK_GROUP",
    "WALK_ROWS_BYTES",
    "InProcessModel",
    "ModelFiles",
    "in_process_inputs",
    "model_provenance",
    "resolve_dtype",
    "walk_group",
    "walk_prompts",
]

#: Model-entry keys both in-process backends know (each adds its own).
ENTRY_KEYS = frozenset(
    {"name", "source", "backend", "revision", "sha256", "gguf_file", "dtype",
     "trust_remote_code", "prompt_format", "reasoning"}
)  # fmt: skip


def resolve_dtype(dtype: object, *, gpu: bool, on_gpu_auto: str, where: str) -> str:
    """The dtype a model is loaded in.

    ``auto`` is float32 without a GPU in both backends (the softmax is float64
    anyway; a float32 checkpoint is not downcast). On a GPU the backends differ,
    and the difference is this parameter: ``on_gpu_auto`` is the transformers
    backend's choice (bfloat16 where supported, else float16), or ``"auto"``
    for vLLM, which then applies its own rule (the checkpoint's dtype, float32
    checkpoints downcast), as every vLLM user expects.

    Examples
    --------
    >>> resolve_dtype("auto", gpu=False, on_gpu_auto="bfloat16", where="m")
    'float32'
    >>> resolve_dtype(None, gpu=True, on_gpu_auto="auto", where="m")
    'auto'
    >>> resolve_dtype("fp16", gpu=False, on_gpu_auto="auto", where="m")
    'float16'
    """
    name = check_dtype(dtype, where)
    if name != "auto":
        return name
    return on_gpu_auto if gpu else "float32"


#: The most prompts whose walks the in-process backends read together, a round of all of
#: them in one pass or one ``generate`` call (:func:`walk_prompts`' ``groups``): a pass
#: costs its weights' reading more than its rows, so rounds of several prompts cost little
#: more than one prompt's.
WALK_GROUP = 8

#: The most bytes of logits rows one read of walks read together may hold (float32 rows
#: and the readout's float64 copy): :func:`walk_group` keeps a group under it.
WALK_ROWS_BYTES = 1 << 30


def walk_group(n_vocab: int, batch_size: int) -> int:
    """How many prompts' walks to read together: at most :data:`WALK_GROUP` and the batch
    size, and few enough that a round of all of them (at most twice
    :data:`~xlikert.collect.answers.walk.ROUND_NODES` rows each: the round's nodes and
    those read ahead) holds at most :data:`WALK_ROWS_BYTES` of logits; at least 1.

    Examples
    --------
    >>> walk_group(151_936, 16), walk_group(262_144, 16), walk_group(32_000, 2)
    (4, 2, 2)
    """
    per_prompt = 2 * ROUND_NODES * n_vocab * 12  # float32 rows and a float64 copy
    return max(1, min(WALK_GROUP, batch_size, WALK_ROWS_BYTES // per_prompt))


def walk_prompts(
    name: str, options: CollectOptions, answers: AnswerSequences, tokenizer: Tokenizer,
    readers: Iterable[NodeReader], progress: CellProgressFn | None = None,
    grid: tuple[Sequence[float], Sequence[float]] | None = None,
    finish: Callable[[NodeReader, LabelWalk], LabelWalk] | None = None,
    groups: Iterable[UnitNodeReader] = (),
) -> tuple[AnswerArrays, list[LabelWalk]]:  # fmt: skip
    """Each prompt's answers by the certified walk over the labels' trie
    (:func:`~xlikert.collect.answers.walk.walk_labels`), one :class:`NodeReader` a prompt.

    The walk's settings are the run's (``answer_tol``, ``answer_max_passes``, the decoding
    grid, ``top_k``); a walk that spent its budget before ``answer_tol`` is told by name
    (a ``RuntimeWarning``: the bound reached is stored, ``answer_tol_met`` 0).

    Parameters
    ----------
    name : str
        The model's name, for the warning.
    options : CollectOptions
        The run's options.
    answers : AnswerSequences
        The rule read now (its :attr:`~AnswerSequences.trie` set).
    tokenizer : Tokenizer
        The model's tokenizer (the labels' canonical tokenizations).
    readers : iterable of NodeReader
        One reader per prompt, in the prompts' order (each made when its walk starts).
    groups : iterable of UnitNodeReader
        Instead of ``readers``: one reader per group of consecutive prompts, in order,
        whose walks are read together, a round of all of them in one call
        (:func:`~xlikert.collect.answers.walk.run_walks`; each walk reads the nodes it
        would read alone).
    progress : callable, optional
        Told after each round of each walk how far it is.
    grid : (temperatures, top_ps), optional
        The decoding grid the walks read (default the run's).
    finish : callable, optional
        Applied to each prompt's reader and walk as the walk ends, before anything is told
        or stored (a server's reader widens the bounds by what it could not read).

    Returns
    -------
    (dict, list of LabelWalk)
        :func:`~xlikert.collect.answers.walk.walk_readout` of the walks, and the walks.
    """
    trie, layout = answers.trie, answers.layout
    assert trie is not None, "a rule read by the walk carries its trie"
    temperatures, top_ps = grid or (options.temperatures, options.top_ps)
    canonical, spaced = trie.canonical(tokenizer), trie.spaced(tokenizer)
    points = None if layout is None else np.asarray(layout.columns) < layout.n_scores
    settings = dict(
        tol=options.answer_tol, max_passes=options.answer_max_passes,
        temperatures=temperatures, top_ps=top_ps, top_k=options.top_k,
        canonical=canonical, spaced=spaced, points=points, progress=progress,
    )  # fmt: skip
    walks = []
    for read in readers:
        walk = walk_labels(trie, read, **settings)  # type: ignore[arg-type]
        walks.append(walk if finish is None else finish(read, walk))
    for unit in groups:
        steps = [walk_steps(trie, **settings) for _ in range(len(unit))]  # type: ignore[arg-type]
        walks += run_walks(steps, unit)
    short = [w for w in walks if not w.tol_met]
    spent = sum(w.passes >= options.answer_max_passes for w in short)
    if short:
        why = (f"answer_max_passes={options.answer_max_passes} reads were spent first in {spent}"
               if spent else "no read was left to spend in any")  # fmt: skip
        warnings.warn(
            f"model {name!r}: the answers' certified width did not meet "
            f"answer_tol={options.answer_tol:g} in {len(short)} of {len(walks)} prompts (widths "
            f"up to {max(w.width for w in short):.3g}, stored as answer_error with "
            f"answer_tol_met = 0): {why}. Raise answer_max_passes or answer_tol"
            + ("" if spent == len(short) else "; mass the backend cannot read (a server's "
               "unlisted tokens) stays in the bound: raise walk_logprobs")
            + ".",
            RuntimeWarning,
            stacklevel=3,
        )  # fmt: skip
    return walk_readout(walks, trie, layout, (len(temperatures), len(top_ps))), walks


#: The end-of-turn rule of both in-process backends; stored with each reasoning model.
END_OF_TURN_RULE = (
    "a trace ends at any eos_token_id of the tokenizer, the model config (config.json) or the "
    "generation config (generation_config.json, else derived from config.json): the "
    "transformers backend's sampler stops there, and the vLLM backend passes the same ids to "
    "the engine as stop_token_ids (vLLM alone would stop at the tokenizer's and the "
    "generation config's only)"
)


def _end_of_turn_ids(
    tokenizer: Tokenizer, model_config: ModelConfig, generation_config: GenerationConfig
) -> set[int]:
    """Token ids that end the model's turn (:data:`END_OF_TURN_RULE`).

    Each argument is an object with an ``eos_token_id`` (an id, a list of ids
    or None), or None where the model has no such file.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> sorted(_end_of_turn_ids(NS(eos_token_id=2), NS(eos_token_id=[2, 7]), None))
    [2, 7]
    """
    ids: set[int] = set()
    for src in (tokenizer, model_config, generation_config):
        eos = getattr(src, "eos_token_id", None)
        if eos is not None:
            ids.update(int(x) for x in (eos if isinstance(eos, list | tuple) else [eos]))
    return ids


def model_provenance(
    source: str,
    folder_provenance: dict[str, Any],
    *,
    backend: str,
    tokenizer: Tokenizer,
    tokenizer_fallback: str,
    dtype: str,
    template: PromptTemplate,
    answers: str,
    collection_protocol: str,
) -> dict[str, Any]:
    """The provenance keys both in-process backends record for a loaded model.

    ``folder_provenance`` is :func:`~xlikert.collect.zoo.model_folder`'s
    (revision, sha256 and maybe the tokenizer's name); the tokenizer is
    recorded as ``Class:name`` (``tokenizer_fallback`` without a recorded name).
    The decoding grid of both is xlikert's rule on the full vocabulary
    (``decoding_rule``).
    """
    prov = {k: v for k, v in folder_provenance.items() if k != "tokenizer_name"}
    name = folder_provenance.get("tokenizer_name") or tokenizer_fallback
    return {
        "source": source,
        **prov,
        "backend": backend,
        "tokenizer": f"{type(tokenizer).__name__}:{name}",
        "dtype": dtype,
        "prompt_format": template.format,
        "prompt_template": template.description,
        "answers": answers,
        "collection_protocol": collection_protocol,
        "decoding_rule": DECODING_TIE_RULE,
    }


class InProcessModel:
    """The common base of the in-process backends' models (:class:`~xlikert.collect.protocol.Model`).

    It holds the outline of scoring a unit and the provenance; a backend supplies

    * ``name``, ``options``, ``tokenizer``, ``template``, ``valid``, ``answers``
      and ``reasoning`` (the checked table or None), then calls
      :meth:`_start_reasoning`;
    * :meth:`read_prompts`: the readout after each prompt's token ids (exact mode);
    * :meth:`_sample_and_read`: the traces of each prompt and the readout after
      each closed trace (reasoning mode);
    * :meth:`_provenance`: its provenance (from :func:`model_provenance`);
    * :attr:`TRACE_SAMPLER`: how it samples a trace.
    """

    mode = "exact"
    #: Whether the backend reads answers of several tokens by the certified walk over the
    #: labels' trie (:mod:`xlikert.collect.answers.walk`) rather than every spelling listed.
    walks_labels = False
    #: Told after each round of a prompt's label walk (a run may show progress).
    walk_progress: CellProgressFn | None = None
    #: Trie nodes the label walks read, and the walks that spent their budget first.
    walk_passes = 0
    walks_short = 0
    #: How the backend samples a trace; stored in the model's provenance.
    TRACE_SAMPLER = ""
    name: str
    options: CollectOptions
    reasoning: dict[str, Any] | None = None
    format: ReasoningFormat | None = None
    stop_ids: set[int]
    #: Answer labels -> (valid tokens, answer spellings, the rule's description; None for
    #: the rule the model was opened with, its ``answers``): each label set the model has
    #: read with (:meth:`relabel`); None until the first relabel.
    _rules: dict[tuple[str, ...] | None, tuple[ValidTokens, AnswerSequences, str | None]] | None = (
        None
    )

    if TYPE_CHECKING:  # a backend sets them (attributes, or properties of its loaded model)

        @property
        def tokenizer(self) -> Tokenizer: ...
        @property
        def template(self) -> PromptTemplate: ...
        @property
        def valid(self) -> ValidTokens: ...
        @property
        def answers(self) -> AnswerSequences: ...

    def _start_reasoning(
        self, reasoning: dict[str, Any] | None, tokenizer: Tokenizer, model_config: ModelConfig,
        generation_config: GenerationConfig,
    ) -> None:  # fmt: skip
        """Set the reasoning format and the end-of-turn ids (reasoning mode only)."""
        self.reasoning = reasoning
        self.format = None
        if reasoning is not None:
            self.format = reasoning_format(tokenizer, reasoning, self.name)
            self.stop_ids = _end_of_turn_ids(tokenizer, model_config, generation_config)

    @staticmethod
    def _turn_end_ids(
        tokenizer: Tokenizer, model_config: ModelConfig, generation_config: GenerationConfig
    ) -> frozenset[int]:
        """The token ids that end the model's turn (:data:`END_OF_TURN_RULE`): what a reply
        stops at (the elicitation levels ``greedy`` and ``own_words``)."""
        return frozenset(_end_of_turn_ids(tokenizer, model_config, generation_config))

    # ------------------------------------------------------------------ answer labels
    def relabel(self, labels: tuple[str, ...] | None) -> None:
        """Read the answers of the next units with these answer labels (a response format).

        ``labels``: one per scale value, in score order, then one per
        non-substantive option of the run (``""`` where the item has no such point
        or option; None: the digits). The answer rule
        (:func:`~xlikert.collect.answers.spellings.answer_rule`) is resolved once per label set
        and kept; :meth:`_use_answers` hands it to the backend.

        Raises
        ------
        AnswerLabelError
            Labels that are not single tokens for the model's tokenizer.
        """
        if self._rules is None:  # the rule the model was opened with
            self._rules = {self.options.answer_labels: (self.valid, self.answers, None)}
        rules = self._rules
        if labels == self.options.answer_labels:
            return
        options = self.options.replace(where=f"model {self.name!r}", answer_labels=labels)
        if labels not in rules:
            valid, answers, text = answer_rule(
                self.tokenizer, list(options.known_scale), split_space=options.split_space,
                labels=options.labels_by_score, nonsubstantive=options.nonsubstantive_labels,
                scripts=options.numeral_scripts, max_positions=options.max_answer_positions,
                walk=self.walks_labels,
            )  # fmt: skip
            rules[labels] = (valid, answers, text)
        self.options = options
        self._use_answers(*rules[labels][:2])

    def _use_answers(self, valid: ValidTokens, answers: AnswerSequences) -> None:
        """Score the next units with this answer rule (the backend's hook)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the outline
    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Score ``(system, user)`` prompts: one row per prompt (reasoning: M traces each)."""
        if self.reasoning is not None:
            return self._score_reasoning(prompts)
        texts = [self.template.render(s, u) for s, u in prompts]
        encoded = [self.template.encode(t) for t in texts]
        out = self.read_prompts(texts, encoded)
        walked = "answer_passes" in out  # read by the walk: its bounds and record too
        res = UnitResult.empty(len(prompts), self.options.sizes, walk=walked)
        for key in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass"):
            res.data[key][:] = out[key]
        for key in (*BOUND_VARIABLES, *NONSUBSTANTIVE_BOUND_VARIABLES, *SCRIPT_BOUND_VARIABLES,
                    *WALK_VARIABLES):  # fmt: skip
            if walked and key in res.data:
                res.data[key][:] = out[key]
        if "nonsubstantive_mass" in out:  # else NaN: the item offers no option
            res.data["nonsubstantive_mass"][:] = out["nonsubstantive_mass"]
        if "script_mass" in res.data and "script_mass" in out:
            res.data["script_mass"][:] = out["script_mass"]
        tok = self.tokenizer
        for b, (ids, lps) in enumerate(zip(out["topk_id"], out["topk_logprob"], strict=True)):
            k = len(ids)  # fewer than top_k only for a tiny vocabulary
            res.data["topk_token"][b, :k] = [token_text(tok, int(i)) for i in ids]
            res.data["topk_token_id"][b, :k] = np.asarray(ids, dtype=np.int64)[:k]
            res.data["topk_logprob"][b, :k] = np.asarray(lps)[:k]
        res.data["prompt_text"][:] = texts
        res.data["prompt_token_ids"][:] = [encode_token_ids(e) for e in encoded]
        return res

    def conversation(
        self, system: str, turns: Sequence[tuple[str, str]], user: str
    ) -> tuple[str, list[int]]:
        """The exact text and token ids of a conversation (sequential administration;
        :meth:`~xlikert.collect.protocol.ConversationModel.conversation`)."""
        if self.reasoning is not None:
            raise CollectionError(
                f"model {self.name!r}: sequential administration reads the answer right after "
                "each question; it does not combine with reasoning mode (an entry with "
                "reasoning = {...})"
            )
        text = self.template.render_conversation(system, turns, user)
        return text, self.template.encode(text)

    def _score_reasoning(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Sample the M traces of every prompt (each from its own seed), close each, read
        the answer after it exactly, and store traces and reads
        (:func:`~xlikert.collect.reasoning.store_traces`)."""
        cfg, fmt, tok = self.reasoning, self.format, self.tokenizer
        assert cfg is not None and fmt is not None, "called in reasoning mode only"
        M = cfg["traces"]
        texts = [fmt.prompt(self.template, s, u) for s, u in prompts]
        encoded = [self.template.encode(t) for t in texts]
        seeds = [[trace_seed(cfg["seed"], t, k) for k in range(M)] for t in texts]
        closing = fmt.closing_ids(tok)
        res = UnitResult.empty(len(prompts), self.options.sizes, traces=M)
        reads = self._sample_and_read(texts, encoded, seeds, closing)
        for b, (traces, ends, read) in enumerate(reads):
            words = [tok.decode(t, skip_special_tokens=False) for t in traces]
            store_traces(res, b, read, traces, ends, seeds[b], words, closing)
        res.data["prompt_text"][:] = texts
        res.data["prompt_token_ids"][:] = [encode_token_ids(e) for e in encoded]
        return res

    def _walk_readout(
        self, readers: Iterable[NodeReader] = (), groups: Iterable[UnitNodeReader] = ()
    ) -> AnswerArrays:
        """The readout after each context by the labels' walk (:func:`walk_prompts`: one
        node reader a context, or ``groups`` of contexts read together), the walks' passes
        and short walks counted (:attr:`walk_passes`, :attr:`walks_short`)."""
        out, walks = walk_prompts(self.name, self.options, self.answers, self.tokenizer,
                                  readers, self.walk_progress, groups=groups)  # fmt: skip
        self.walk_passes += sum(w.passes for w in walks)
        self.walks_short += sum(not w.tol_met for w in walks)
        return out

    # ------------------------------------------------------------------ the backend's part
    def read_prompts(self, texts: list[str], encoded: list[list[int]]) -> AnswerArrays:
        """The readout after each prompt's token ids: the step of :meth:`score` that runs
        the model (exact mode).

        Returns ``pmf``, ``valid_mass``, ``decoding_pmf``, ``decoding_valid_mass`` (one
        row per prompt) and ``topk_id``, ``topk_logprob`` (a sequence per prompt);
        ``texts``: the prompts' texts (one unit's prompts, as :meth:`score` gets them).
        Public so that a caller can run prompts through a backend exactly as a
        collection does (the benchmarks do); a backend implements it."""
        raise NotImplementedError

    def _sample_and_read(
        self,
        texts: list[str],
        encoded: list[list[int]],
        seeds: list[list[int]],
        closing: dict[bool, list[int]],
    ) -> Iterable[tuple[list[list[int]], list[str], dict[str, np.ndarray]]]:
        """Per prompt, in order: its traces' token ids (an ending end-of-turn token
        dropped), how each ended (``"marker"``, ``"eos"``, ``"length"``) and the readout
        after each closed trace (``closing[ended on the marker]`` appended)."""
        raise NotImplementedError

    def _provenance(self) -> dict[str, Any]:
        raise NotImplementedError

    # ------------------------------------------------------------------ provenance
    def provenance(self) -> dict[str, Any]:
        """What to record about the model: the backend's keys, the reasoning settings,
        the answer rule's tokens."""
        info = {k: v for k, v in self._provenance().items() if k != "load_seconds"}
        if self.reasoning is not None and self.format is not None:
            info.update(reasoning_provenance(self.reasoning, self.format, self.TRACE_SAMPLER))
            info["end_of_turn_ids"] = sorted(self.stop_ids)
            info["end_of_turn_rule"] = END_OF_TURN_RULE
        if self.template.system_merged:
            info["system_merged_into_user"] = "true"
        rules = self._rules or {self.options.answer_labels: (self.valid, self.answers, None)}
        first_valid, first_answers, _ = next(iter(rules.values()))
        info["valid_tokens"] = first_valid.as_records(self.tokenizer)
        if not first_answers.is_one_token:
            info["answer_spellings"] = first_answers.as_records(self.tokenizer)
        if len(rules) > 1 or None not in rules:  # a response format: each label set's tokens
            scale = self.options.known_scale
            info["valid_tokens_by_labels"] = {
                labels_key(labels, scale): valid.as_records(self.tokenizer)
                for labels, (valid, _, _) in rules.items()
            }
            texts = {labels_key(labels, scale): text or info.get("answers")
                     for labels, (_, _, text) in rules.items()}  # fmt: skip
            if len(set(texts.values())) > 1:  # the label sets read under different rules
                info["answers_by_labels"] = texts
        return info


# ------------------------------------------------------------ what an entry resolves to
#: Entry fields that say where and how an engine runs, not what it reads (not identity).
_PLACEMENT = ("name", "device", "device_map", "dtype", "trust_remote_code")


def _hub_commit(source: str, revision: str | None) -> str:
    """The commit a Hugging Face id (at ``revision``, default its main branch) resolves
    to now, read from the local cache or the Hub (``config.json`` only); empty when it
    cannot be resolved."""
    try:
        from transformers.utils import cached_file

        path = cached_file(source, "config.json", revision=revision)
    except Exception:  # offline and not cached, gated, ...: loading would fail too
        return ""
    parts = Path(str(path)).parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else ""


@dataclass
class ModelFiles:
    """What an in-process model entry resolves to before it loads, resolved once per run.

    The folder (or Hugging Face id) an engine loads and the provenance that
    identifies it (:func:`~xlikert.collect.zoo.model_folder`: the revision, the
    sha256 of the weights, which hashing a large model's files takes long), and
    the tokenizer, loaded on first use. A run's keys
    (:func:`in_process_inputs`) and the backend's ``open`` share one object (a
    :class:`~xlikert.collect.protocol.CellInputs`' ``prepared``), so nothing is
    hashed or loaded twice; it lives as long as the run's :class:`RunKeys`.

    Attributes
    ----------
    folder
        What the engine loads: a local folder, a dequantised GGUF folder or a Hub id.
    provenance
        ``revision``, ``sha256`` (and ``gguf_file``, ``upstream``, ...) of the weights;
        copy it before changing it.
    trust_remote_code
        Whether the entry's tokenizer and model may run the repository's code.
    revision
        The entry's ``revision`` (a Hub branch, tag or commit), None: the default.
    """

    folder: str
    provenance: dict[str, str]
    trust_remote_code: bool = False
    revision: str | None = None
    _tokenizer: Tokenizer = field(default=None, repr=False, compare=False)

    @classmethod
    def resolve(cls, spec: dict[str, Any], trust_remote_code: bool = False) -> ModelFiles:
        """Resolve a model entry (a built-in name's checked GGUF, a GGUF file's
        dequantised folder, a local folder's weights hashed, a Hub id as given).

        Raises
        ------
        CollectionError
            An unknown source, a missing file or a checksum mismatch.

        Examples
        --------
        >>> ModelFiles.resolve({"name": "m", "source": "owner/model"}).folder
        'owner/model'
        """
        from ..zoo import model_folder

        folder, prov = model_folder(spec)
        trc = bool(spec.get("trust_remote_code", trust_remote_code))
        return cls(folder, prov, trc, spec.get("revision"))

    def tokenizer(self) -> Any:
        """The entry's tokenizer (``AutoTokenizer``), loaded on the first call only."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(
                self.folder, trust_remote_code=self.trust_remote_code, revision=self.revision
            )
        return self._tokenizer


def in_process_inputs(
    spec: dict[str, Any], options: CollectOptions, *, checked: dict[str, Any], backend: str,
    dtype: str,
) -> CellInputs:  # fmt: skip
    """The :class:`~xlikert.collect.protocol.CellInputs` of an in-process backend's entry.

    The identity is the checked entry without its name and placement, with the
    folder's revision and checksum (:class:`ModelFiles`; a Hugging Face id's
    commit, :func:`_hub_commit`), the ``dtype`` the weights load in and
    ``trust_remote_code``. ``sent`` renders and tokenises the prompts as both
    in-process backends do (:class:`~xlikert.collect.templates.PromptTemplate`;
    in reasoning mode the reasoning prompt), loading only the tokenizer. The
    :class:`ModelFiles` are the inputs' ``prepared``, for the backend's ``open``.
    """
    files = ModelFiles.resolve(spec, options.trust_remote_code)
    folder, prov = files.folder, files.provenance
    revision = prov.get("revision") or ""
    if folder == str(spec["source"]) and not Path(folder).expanduser().exists():  # a Hub id
        revision = _hub_commit(folder, spec.get("revision")) or revision
    identity = {k: v for k, v in checked.items() if k not in _PLACEMENT}
    identity.update(
        backend=backend, dtype=dtype, trust_remote_code=files.trust_remote_code,
        revision=revision, sha256=prov.get("sha256", ""),
        **{k: prov[k] for k in ("gguf_file", "upstream", "sha256_of") if prov.get(k)},
    )  # fmt: skip
    state: dict[str, Any] = {}

    def sent(prompts: Sequence[tuple[str, str]]) -> list[list[int]]:
        if not state:
            state.update(_prompt_encoder(files, spec))
        template, fmt = state["template"], state["format"]
        texts = [fmt.prompt(template, s, u) if fmt else template.render(s, u) for s, u in prompts]
        return [template.encode(t) for t in texts]

    return CellInputs(identity, sent, prepared=files)


def _prompt_encoder(files: ModelFiles, spec: dict[str, Any]) -> dict[str, Any]:
    """The tokenizer's template (and reasoning format) of an in-process entry."""
    from ..templates import PromptTemplate

    name = str(spec["name"])
    tok = files.tokenizer()
    reasoning = check_reasoning(spec)
    fmt = reasoning_format(tok, reasoning, name) if reasoning is not None else None
    return {"template": PromptTemplate(tok, name, spec.get("prompt_format")), "format": fmt}
