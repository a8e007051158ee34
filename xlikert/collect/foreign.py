"""The foreign objects the collection layer handles, each by a name of its own.

The libraries that make them (torch, transformers, vLLM, gguf) are not followed by the
type check (``[tool.mypy]`` of ``pyproject.toml`` skips them: following them multiplies
mypy's time, and their own types are not what the check is about), so each object is
:data:`typing.Any` to mypy; the aliases say which object a parameter is. The bottom of
:mod:`xlikert.collect`: it imports nothing of the package.
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = [
    "Engine", "GenerationConfig", "KVCache", "ModelConfig", "ModelOutput", "Tensor", "Tokenizer", "TorchModule",
]  # fmt: skip

#: A tokenizer: Hugging Face's (``PreTrainedTokenizerBase``) or a GGUF file's.
Tokenizer: TypeAlias = Any
#: A model's configuration (transformers' ``PretrainedConfig``).
ModelConfig: TypeAlias = Any
#: A model's generation defaults (transformers' ``GenerationConfig``; may be None).
GenerationConfig: TypeAlias = Any
#: A torch tensor (``torch.Tensor``).
Tensor: TypeAlias = Any
#: A torch model (``torch.nn.Module``: a transformers ``PreTrainedModel``).
TorchModule: TypeAlias = Any
#: A vLLM engine (``vllm.LLM``) or a part of it.
Engine: TypeAlias = Any
#: What a transformers model's forward pass returns (``ModelOutput``: logits, cache, ...).
ModelOutput: TypeAlias = Any
#: A model's key-value cache (transformers' ``Cache``, or the legacy tuple of tensors).
KVCache: TypeAlias = Any
