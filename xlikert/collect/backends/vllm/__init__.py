"""The in-process vLLM backend (``backend = "vllm"``): the paper's large models on GPUs, exactly.

The engine, the requests and the provenance are in :mod:`.model`; the logits
processor and worker extension that read each answer context's full logits row
inside the engine are in :mod:`.readout` (it imports vLLM, so only the engine
loads it). Importing this package does not import vLLM.
"""

from __future__ import annotations

from .model import (
    KEYS,
    READOUT,
    VLLM_TRACE_SAMPLER,
    VLLMModel,
    check,
    inputs,
    open,
    unguarded_main_script,
)

__all__ = [
    "KEYS",
    "READOUT",
    "VLLM_TRACE_SAMPLER",
    "VLLMModel",
    "check",
    "inputs",
    "open",
    "unguarded_main_script",
]
