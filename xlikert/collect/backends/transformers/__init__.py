"""Transformers backend: exact next-token PMFs, one forward pass per (condition, item).

Protocol (paper §3 "Constraint"; the backend protocol of the docs' architecture page,
``docs/architecture.md``):

* the prompt's token ids come from :class:`~xlikert.collect.templates.PromptTemplate`
  (chat template with the generation prompt, or the plain format for base models);
* left padding with explicit position ids; only the last positions' logits;
* every answer spelling's context (the prompt, or the prompt + a bare space token,
  or + the first tokens of a multi-token answer) is one teacher-forced row, so one
  pass reads every answer (:class:`~xlikert.collect.answers.sequences.AnswerSequences`);
* the logits go to the shared numpy rules of :mod:`xlikert.kernels.readout`:
  log-softmax over the FULL vocabulary in float64, the temperature/top-p rule, the
  token -> scale sum;
* the system-prompt prefix shared by a group of prompts is run once and its KV
  cache reused for every item (checked against an uncached pass at run time);
* out of memory, the batch is halved and retried, down to one prompt.

Reasoning mode (an entry with ``reasoning = {...}``, :mod:`xlikert.collect.reasoning`):
the M traces of a prompt are sampled in one batch with a KV cache, each from its
own seeded stream (:data:`TRACE_SAMPLER`), then each closed trace is read as
above.

torch and transformers are imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

from typing import Any

from ...entries import check_dtype, check_entry_keys
from ...options import CollectOptions
from ...protocol import CellInputs
from ...reasoning import check_reasoning
from ...zoo import check_source
from ..inprocess import ENTRY_KEYS, ModelFiles, in_process_inputs
from .loading import READOUT, LoadedModel, load_dtype, load_model, wrap_model
from .model import TRACE_SAMPLER, LocalModel
from .scorer import Scorer, read_logits

__all__ = [
    "KEYS",
    "READOUT",
    "TRACE_SAMPLER",
    "LoadedModel",
    "LocalModel",
    "Scorer",
    "check",
    "check_elicitation",
    "inputs",
    "load_model",
    "open",
    "read_logits",
    "wrap_model",
]

#: The keys of a transformers model entry (:func:`load_model`).
KEYS = ENTRY_KEYS | {"device", "device_map"}


def check_elicitation(spec: dict[str, Any], levels: tuple[str, ...]) -> None:
    """The transformers backend reads every elicitation level (``prefix``, ``greedy``,
    ``own_words``; :mod:`xlikert.collect.elicitation`): nothing to refuse."""


def check(spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
    """Validate a transformers model entry before anything runs (no heavy imports).

    Keys other than :data:`KEYS` are refused
    (:func:`~xlikert.collect.entries.check_entry_keys`). A ``reasoning`` table
    is checked and completed with its defaults
    (:func:`~xlikert.collect.reasoning.check_reasoning`), so it enters the run's
    fingerprint as it will run.
    """
    check_entry_keys(spec, KEYS, "transformers")
    check_dtype(spec.get("dtype"), f"model {spec['name']!r}")
    check_source(str(spec["source"]), str(spec["name"]), spec.get("gguf_file"))
    out = dict(spec)
    reasoning = check_reasoning(spec)
    if reasoning is not None:
        out["reasoning"] = reasoning
    return out


def inputs(spec: dict[str, Any], options: CollectOptions) -> CellInputs:
    """What determines the entry's numbers, before its weights load: its identity (the
    checked entry, the folder's revision and checksum, the dtype it loads in) and each
    prompt's token ids, from the tokenizer alone
    (:func:`~xlikert.collect.backends.inprocess.in_process_inputs`)."""
    return in_process_inputs(spec, options, checked=check(spec, options), backend="transformers",
                             dtype=load_dtype(spec, options))  # fmt: skip


def open(
    spec: dict[str, Any],
    options: CollectOptions,
    probe: tuple[str, str] | None = None,
    *,
    prepared: ModelFiles | None = None,
) -> LocalModel:
    """Load a model entry into a :class:`LocalModel` (in reasoning mode with ``reasoning``);
    ``prepared``: the entry's files as :func:`inputs` resolved them in this run."""
    lm = load_model(
        spec,
        options.known_scale,
        device=options.device,
        dtype=options.dtype,
        device_map=options.device_map,
        trust_remote_code=options.trust_remote_code,
        split_space=options.split_space,
        files=prepared,
        numerals=options.numerals,
    )
    return LocalModel(lm, options, check_reasoning(spec))
