"""Collection: exact next-token PMFs from local transformers models.

``collect`` runs a prompts Dataset through one or more models (built-in offline
zoo names, Hugging Face ids or local paths) and returns the results Dataset of
DESIGN.md §1; ``merge_shards`` combines ``--shard i/n`` parts. torch and
transformers are imported on first use, not by this package.

Examples
--------
>>> import xlikert.collect as xc
>>> xc.builtin_names()
['smollm2-135m-instruct', 'qwen2.5-coder-0.5b-instruct', 'gemma-3-270m']
"""

from __future__ import annotations

from .merge import merge_shards
from .runner import DEFAULT_TEMPERATURES, DEFAULT_TOP_PS, collect, parse_shard
from .tokens import ValidTokens, find_valid_tokens
from .zoo import ZOO, builtin_names, cache_dir, resolve_gguf


def load_model(*args, **kwargs):
    """Load a model for collection; see :func:`xlikert.collect.backend.load_model`."""
    from .backend import load_model as _load

    return _load(*args, **kwargs)


__all__ = [
    "DEFAULT_TEMPERATURES",
    "DEFAULT_TOP_PS",
    "ZOO",
    "ValidTokens",
    "builtin_names",
    "cache_dir",
    "collect",
    "find_valid_tokens",
    "load_model",
    "merge_shards",
    "parse_shard",
    "resolve_gguf",
]
