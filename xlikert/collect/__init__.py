"""Collection: exact next-token PMFs from local models, vLLM, or OpenAI-compatible servers.

``collect`` runs a prompts Dataset through one or more models and returns the
results Dataset (:mod:`xlikert.core.schema`); ``merge_shards`` combines ``--shard i/n`` parts.
Every backend implements one small protocol (:mod:`~xlikert.collect.protocol`)
and returns one per-unit record (:mod:`~xlikert.collect.record`):

- ``transformers`` (:mod:`~xlikert.collect.backends.transformers`): built-in offline zoo names,
  Hugging Face ids, local folders or GGUF files;
- ``vllm`` (:mod:`~xlikert.collect.backends.vllm`): the same models in an in-process vLLM
  engine, with tensor/pipeline/data parallelism;
- ``openai`` (:mod:`~xlikert.collect.backends.openai`): a model behind an
  OpenAI-compatible server (vLLM, llama.cpp, hosted APIs).

A model entry with ``reasoning = {traces = 8, max_new_tokens = 256, seed = 0}``
thinks before it answers: its thoughts are sampled, the answer after each is
read exactly (:mod:`~xlikert.collect.reasoning`; transformers and vLLM backends).
The maths they share is in :mod:`xlikert.kernels.readout` (the next-token readout, the
top-k certified intervals, the decoding grid's tie rule), the answer rule in
:mod:`xlikert.collect.answers`. torch, transformers and vLLM are imported on first use,
not by this package.

Examples
--------
>>> import xlikert.collect as xc
>>> xc.builtin_names()
['smollm2-135m-instruct', 'qwen2.5-coder-0.5b-instruct', 'gemma-3-270m']
"""

from __future__ import annotations

from .answers.tokens import ValidTokens, find_valid_tokens
from .options import DEFAULT_TEMPERATURES, DEFAULT_TOP_PS, CollectOptions
from .protocol import BACKENDS, Model
from .reasoning import trace_texts
from .record import ReadSequence, UnitResult, read_sequence
from .run.checked import parse_shard
from .run.cluster import RayExecutor
from .run.cost import cost_plan, cost_spent
from .run.merge import merge_shards
from .run.runner import collect
from .run.store import PartialStore
from .zoo import ZOO, builtin_names, cache_dir, resolve_gguf


def load_model(*args, **kwargs):
    """Load a transformers model for collection (torch and transformers imported on call).

    This is :func:`xlikert.collect.backends.transformers.load_model`, imported when
    called so that ``import xlikert.collect`` does not import torch; the arguments
    are that function's.

    Parameters
    ----------
    *args : Any
        ``spec`` (a built-in zoo name, a Hugging Face id, a local directory or
        ``.gguf`` file, or a model entry dict) and ``scale`` (the scale values whose
        answer tokens are looked up, e.g. ``range(1, 8)``).
    **kwargs : Any
        ``device``, ``dtype``, ``device_map``, ``trust_remote_code`` (off unless
        asked) and ``split_space``: defaults for the keys missing from ``spec``.

    Returns
    -------
    xlikert.collect.backends.transformers.LoadedModel
        The model, its tokenizer, prompt template and valid answer tokens, with
        its provenance; it implements :class:`Model`.

    Raises
    ------
    CollectionError
        A model that cannot be found or loaded, a dtype or device that does not
        apply, a tokenizer without a single-token answer for a scale value.

    Examples
    --------
    >>> lm = load_model("smollm-135m", range(1, 8))
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: unknown model 'smollm-135m'; built-in models are ...

    With the offline models installed (``requirements/offline-models.txt``):

    >>> lm = load_model("smollm2-135m-instruct", range(1, 8))  # doctest: +SKIP
    >>> lm.prompt_format  # doctest: +SKIP
    'chat'
    """
    from .backends.transformers import load_model as _load

    return _load(*args, **kwargs)


__all__ = [
    "BACKENDS",
    "DEFAULT_TEMPERATURES",
    "DEFAULT_TOP_PS",
    "ZOO",
    "CollectOptions",
    "Model",
    "PartialStore",
    "RayExecutor",
    "ReadSequence",
    "UnitResult",
    "ValidTokens",
    "builtin_names",
    "cache_dir",
    "collect",
    "cost_plan",
    "cost_spent",
    "find_valid_tokens",
    "load_model",
    "merge_shards",
    "parse_shard",
    "read_sequence",
    "resolve_gguf",
    "trace_texts",
]
