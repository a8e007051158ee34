"""The measurement layer's one seam: how the driver talks to a backend.

A backend is a module with two functions:

``check(spec, options) -> dict``
    Validate a model entry before anything runs (no heavy imports, no network)
    and return the part of it that identifies the results (it goes into the
    run's fingerprint; secrets and transport settings are left out).
``open(spec, options, probe) -> Model``
    Load the model or connect to it; ``probe`` is one ``(system, user)`` prompt
    a backend may use to detect what the engine supports.

A :class:`Model` scores a list of ``(system, user)`` prompts into one
:class:`~xlikert.collect.schema.UnitResult` and describes itself in
:meth:`Model.provenance`. The backends:

============  ==============================================  ===============
``backend``   module                                          selected by
============  ==============================================  ===============
transformers  :mod:`xlikert.collect.local`                    default
vllm          :mod:`xlikert.collect.vllm` (in-process engine) ``backend = "vllm"``
openai        :mod:`xlikert.collect.server` (HTTP server)     ``source = "openai:..."``
============  ==============================================  ===============
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import CollectionError
from .schema import UnitResult

__all__ = ["BACKENDS", "CollectOptions", "Model", "backend_module", "backend_of"]

#: Backend name -> module implementing ``check`` and ``open``.
BACKENDS = {
    "transformers": "xlikert.collect.local",
    "vllm": "xlikert.collect.vllm",
    "openai": "xlikert.collect.server",
}


@dataclass(frozen=True)
class CollectOptions:
    """Run-wide settings every backend reads (model entries may override the local ones)."""

    scale: tuple[int, ...]
    top_k: int = 20
    temperatures: tuple[float, ...] = (0.1, 0.5, 1.0, 1.3)
    top_ps: tuple[float, ...] = (0.8, 0.9, 1.0)
    split_space: bool = True
    prefix_cache: bool = True
    batch_size: int | str = "auto"
    device: str | None = None
    dtype: str | None = None
    device_map: str | None = None
    trust_remote_code: bool = False

    @property
    def sizes(self) -> dict[str, int]:
        """Lengths of the per-cell dims of a :class:`~xlikert.collect.schema.UnitResult`."""
        return {
            "score": len(self.scale),
            "rank": self.top_k,
            "temperature": len(self.temperatures),
            "top_p": len(self.top_ps),
        }

    @property
    def coords(self) -> dict[str, Any]:
        """Coordinates of the per-cell dims of the results Dataset."""
        import numpy as np

        return {
            "score": np.asarray(self.scale, dtype=np.int64),
            "rank": np.arange(1, self.top_k + 1),
            "temperature": np.asarray(self.temperatures),
            "top_p": np.asarray(self.top_ps),
        }

    def fingerprinted(self) -> dict[str, Any]:
        """The settings that change the numbers (not the batch size or the device)."""
        return {
            "top_k": self.top_k,
            "temperatures": list(self.temperatures),
            "top_ps": list(self.top_ps),
            "dtype": self.dtype,
            "prefix_cache": self.prefix_cache,
            "split_space": self.split_space,
        }


@runtime_checkable
class Model(Protocol):
    """A loaded model (or a connection to one) that scores prompts."""

    name: str
    #: ``"exact"`` or ``"topk"`` (bounded): a resumed run must measure in the same mode.
    mode: str

    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Score ``(system, user)`` prompts: one row per prompt, every variable of the schema."""
        ...

    def provenance(self) -> dict[str, Any]:
        """What to record about the model in ``attrs["models"][name]``."""
        ...

    def close(self) -> None:
        """Release the model's memory (or connections)."""
        ...


def backend_of(spec: dict[str, Any]) -> str:
    """The backend name of a model entry.

    Examples
    --------
    >>> backend_of({"name": "m", "source": "openai:gpt-4o-mini"})
    'openai'
    >>> backend_of({"name": "m", "source": "Qwen/Qwen3-8B", "backend": "vllm"})
    'vllm'
    >>> backend_of({"name": "m", "source": "smollm2-135m-instruct"})
    'transformers'
    """
    name = spec.get("backend")
    if name is None:
        return "openai" if str(spec.get("source", "")).startswith("openai:") else "transformers"
    if name not in BACKENDS:
        raise CollectionError(
            f"model {spec.get('name')!r}: unknown backend {name!r}; choose one of {sorted(BACKENDS)}"
        )
    return str(name)


def backend_module(spec: dict[str, Any]):
    """The module implementing the backend of a model entry."""
    return importlib.import_module(BACKENDS[backend_of(spec)])
