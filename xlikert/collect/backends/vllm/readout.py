"""xlikert's readout inside vLLM's worker: one engine request per answer context.

The in-process vLLM backend (:mod:`xlikert.collect.backends.vllm`) starts its engine with

* :class:`ExactReadout`, a vLLM V1 logits processor: for every request that
  carries ``SamplingParams(extra_args={"xlikert": ...})`` it takes the float32
  logits row of the next token (before any penalty, temperature or nucleus:
  the processor reports itself as not argmax-invariant, so vLLM runs it on the
  raw row) and applies :func:`xlikert.kernels.readout.next_token_readout`, the same
  numpy rules the transformers backend applies to its rows. The row itself is
  left unchanged.
* :class:`ReadoutWorker`, a worker extension: ``llm.collective_rpc("xlikert_take",
  args=(keys,))`` hands the compact results back (a few hundred numbers per row,
  as plain lists) and forgets them.

So each answer context costs one request with ``max_tokens=1``, whatever the
decoding grid or the top-k listing, instead of one per grid point. The processor
only copies the rows; the readout runs on a worker thread while the engine goes
on with its next step (on a GPU the host is otherwise idle then), and
``xlikert_take`` waits for it. The module
imports vLLM: it is loaded by vLLM's processes only (and by the backend once
vLLM is there), never by ``import xlikert``.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from ....kernels.readout import next_token_readout
from ...foreign import Engine

__all__ = ["EXTRA_ARG", "PROCESSOR", "WORKER_EXTENSION", "ExactReadout", "ReadoutWorker"]

#: The ``SamplingParams.extra_args`` key of a request the processor reads.
EXTRA_ARG = "xlikert"
#: How the backend names the processor and the worker extension to ``vllm.LLM``.
PROCESSOR = f"{__name__}:ExactReadout"
WORKER_EXTENSION = f"{__name__}.ReadoutWorker"

#: Readouts of this worker process: request key -> (raw, grid, topk_id, topk_logprob).
_READS: dict[str, Future] = {}
#: One thread: the readout of a step overlaps the engine's next step.
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlikert-readout")


def _ask(params: SamplingParams) -> dict[str, Any] | None:
    return (params.extra_args or {}).get(EXTRA_ARG)


class ExactReadout(LogitsProcessor):
    """Reads xlikert's statistics off the raw logits row of each request that asks.

    A request asks with ``extra_args={"xlikert": {"key": str, "need": [ids],
    "temperatures": [...], "top_ps": [...], "top_k": int, "pooled": [ids] or None}}``
    (``pooled``: the continuation tokens of a multi-token answer, read as one sum). Rows of a
    prefill that vLLM runs in chunks reach :meth:`apply` more than once: the
    last write, after the whole prompt, is the one kept.
    """

    def __init__(self, vllm_config: Engine, device: torch.device, is_pin_memory: bool) -> None:
        self._rows: dict[int, dict[str, Any]] = {}

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        ask = _ask(sampling_params)
        if ask is None:
            return
        if ask.get("row") and "key" in ask:
            return
        if not {"key", "need", "temperatures", "top_ps"} <= set(ask):
            raise ValueError(f"extra_args[{EXTRA_ARG!r}] lacks key, need, temperatures or top_ps")

    def is_argmax_invariant(self) -> bool:
        return False  # so vLLM applies it to every row, on the raw logits

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self._rows, batch_update, lambda params, _p, _o: _ask(params))

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        index = sorted(i for i in self._rows if i < logits.shape[0])
        z = logits[index].float().cpu().numpy()  # one copy for the rows that ask
        for row, i in zip(z, index, strict=True):
            ask = self._rows[i]
            if ask.get("row"):  # the whole float32 row, as bytes (the reply tree reads it)
                _READS[ask["key"]] = _POOL.submit(row.astype(np.float32).tobytes)
                continue
            _READS[ask["key"]] = _POOL.submit(
                next_token_readout,
                row[None],
                np.asarray(ask["need"], dtype=np.int64),
                ask["temperatures"],
                ask["top_ps"],
                int(ask.get("top_k", 0)),
                None if ask.get("pooled") is None else np.asarray(ask["pooled"], dtype=np.int64),
            )
        return logits


class ReadoutWorker:
    """vLLM worker extension: :meth:`xlikert_take` returns the readouts of given requests."""

    def xlikert_take(self, keys: list[str]) -> list[list[list[float]] | bytes | None]:
        """The readouts of ``keys`` as plain lists (a whole row: bytes; None where none was
        made), forgotten here."""
        out: list[list[list[float]] | bytes | None] = []
        for key in keys:
            read = _READS.pop(key, None)
            if read is None:
                out.append(None)
                continue
            got = read.result()
            if isinstance(got, bytes):  # a whole row (a request with "row": true)
                out.append(got)
                continue
            out.append([np.asarray(a).ravel().tolist() for a in got])
        return out
