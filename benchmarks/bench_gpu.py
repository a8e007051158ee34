"""Collection on a GPU: xlikert's own backends on random-weight Llama-3.2-1B and Llama-3.1-8B.

Every row runs ``xlikert.collect`` itself, readout included, on a model with random
weights (nothing is downloaded):

* the model: a folder written here holding ``config.json`` (``LlamaConfig`` with the
  published sizes of Llama-3.2-1B or Llama-3.1-8B, vocabulary 128,256; rope settings
  left at the config's defaults, which change no FLOP) and a tokenizer, no weights;
* the tokenizer (``--tokenizer words``, the default): built here from the demo
  prompts, so no file is needed on the GPU machine. Text is split with Llama-3's
  pre-tokenizer pattern (words with their leading space, digits in groups of up to
  three, punctuation runs, whitespace) and every piece the prompts contain is one
  token (a word-level vocabulary: the prompts' lengths are those of a tokenizer that
  knows each of their words, close to Llama-3's on this English text); Llama-3's chat
  markers and template; the ids left up to the model's vocabulary are unused
  reserved tokens. ``--tokenizer`` also takes a built-in model name (its cached
  folder) or a tokenizer folder; the vocabulary is then widened to cover it;
* the prompts: the demo experiment's 68 prompts (one system prompt); with
  ``--copies k > 1``, ``k`` copies, each user message prefixed ``"Respondent j. "``
  so that every prompt is distinct while all share the system prompt (one group:
  units of ``--chunk-size`` prompts, so batches as wide as a unit can form);
* **transformers**: the random model is made on the device in bf16
  (``AutoModelForCausalLM.from_config``, seeded), wrapped by
  ``xlikert.collect.backends.transformers.wrap_model`` and handed to ``collect(loader=...)`` as a
  ``LocalModel``: the backend's own batching, prefix cache and float64 readout (on a
  GPU in torch on the device, ``device_readout``; on the CPU the numpy rules of
  ``xlikert.kernels.readout`` through ``context_readout``). Timed: the whole ``collect``
  call (CUDA synchronised), the readout's share (``LocalModel.readout``, the device
  synchronised before it starts) and the numpy rules alone (``context_readout`` and
  ``finish_readout``: none on
  a GPU). The batches are those the backend formed (prompts per forward, counted per
  batch);
* **vLLM**: ``collect`` with ``backend = "vllm"`` (xlikert's in-process backend,
  its logits processor reading each row) on the same folder, the engine started with
  ``load_format="dummy"`` (random weights), in a child process (the vLLM venv of
  the engines folder when vLLM is not importable here); one engine start per model,
  the prefix cache reset before each timed run;
* MFU = FLOPs / time, against the device's datasheet bf16 dense peak (looked up
  from the device name in :data:`DATASHEET_BF16`; "unknown" when not listed, as on a
  CPU) and, separately, against the bf16 matmul rate measured in the same run;
  executed FLOPs (every forward call's shapes, ``_flops.FlopCounter``) and useful
  FLOPs (``_flops.useful_flops``: the shared prefix once, each prompt's own tokens
  and the split-space token, one lm_head row per answer context).

Usage::

    python benchmarks/bench_gpu.py                        # CUDA: 1B and 8B
    python benchmarks/bench_gpu.py --quick                # = --tiny --device cpu (the test runs it)
    python benchmarks/bench_gpu.py --tiny --device cpu    # a tiny config on the CPU

Without a CUDA device a full run writes ``results/gpu.json`` saying it did not run.
Writes ``results/gpu.json`` (``gpu-quick.json`` with ``--quick``/``--tiny``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _prompts
from _common import format_table, machine, result_path, time_calls, timed, write_json
from _flops import FlopCounter, body_params, matmul_rate, useful_flops
from _prompts import by_system, prompt_pairs
from _render import fmt, params, pct, stamp, table
from _vllm import NOT_INSTALLED, KeepOpen, child_env, run_json_child, vllm_python

#: Published shapes (Llama-3.2-1B: tied embeddings; Llama-3.1-8B: untied); vocabulary 128,256.
SHAPES: dict[str, dict[str, Any]] = {
    "llama-3.2-1b-shape": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                               num_key_value_heads=8, intermediate_size=8192, vocab_size=128256,
                               tie_word_embeddings=True),
    "llama-3.1-8b-shape": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                               num_key_value_heads=8, intermediate_size=14336, vocab_size=128256,
                               tie_word_embeddings=False),
    # head_dim 64: vLLM's CPU attention has no kernel for 16
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, intermediate_size=256, vocab_size=2048,
                 tie_word_embeddings=True),
}  # fmt: skip
NOT_RUN = "not run: no GPU lent to this task (torch sees no CUDA device)"
SCALE = tuple(range(1, 8))

#: bf16 dense tensor-core peaks (TFLOP/s, no sparsity), by device name; the first match
#: wins. Sources: NVIDIA's datasheets (H100 and H200 Tensor Core GPU datasheets: SXM
#: 1,979, PCIe 1,513, NVL 1,671 TFLOP/s "with sparsity", halved here; A100 datasheet:
#: 312; L40S datasheet: 362.05; L4 datasheet: 121 (242 with sparsity)) and the NVIDIA
#: Ada Lovelace architecture whitepaper (GeForce RTX 4090: 165.2 with FP32 accumulate).
DATASHEET_BF16: list[tuple[str, float, str]] = [
    (r"\bH100\b.*\bPCIe\b", 756.5, "H100 PCIe"),
    (r"\bH100\b.*\bNVL\b", 835.5, "H100 NVL"),
    (r"\bH100\b", 989.4, "H100 SXM"),
    (r"\bGH200\b", 989.4, "GH200 (H100 SXM rate)"),
    (r"\bH200\b.*\bNVL\b", 835.5, "H200 NVL"),
    (r"\bH200\b", 989.4, "H200 SXM"),
    (r"\bA100\b", 312.0, "A100"),
    (r"\bL40S\b", 362.05, "L40S"),
    (r"\bL4\b", 121.0, "L4"),
    (r"\bRTX 4090\b", 165.2, "GeForce RTX 4090"),
]  # fmt: skip

#: Llama-3's pre-tokenizer pattern (how its tokenizer splits text before merging).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BOS, EOS, PAD, UNK = "<|begin_of_text|>", "<|eot_id|>", "<|finetune_right_pad_id|>", "<unk>"
SPECIAL = [BOS, "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", EOS, PAD, UNK]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def datasheet_peak(device_name: str | None) -> dict[str, Any] | None:
    """The datasheet bf16 dense peak of a device (FLOP/s), or None when it is not listed."""
    for pattern, tflops, label in DATASHEET_BF16:
        if device_name and re.search(pattern, device_name):
            return {"device": label, "flops_per_s": tflops * 1e12}
    return None


# ----------------------------------------------------------------------------- inputs
def demo_prompts(copies: int = 1):
    """The demo experiment's prompts; ``copies > 1`` adds a ``copy`` factor whose user
    messages start ``"Respondent j. "`` (distinct prompts, one shared system prompt)."""
    import xarray as xr

    p = _prompts.demo_prompts()
    if copies <= 1:
        return p
    users = [
        xr.apply_ufunc(lambda u, j=j: f"Respondent {j}. {u}", p["user"], vectorize=True,
                       output_dtypes=[object])
        for j in range(1, copies + 1)
    ]  # fmt: skip
    user = xr.concat(users, dim="copy").assign_coords(copy=list(range(1, copies + 1)))
    return p.assign(user=user.transpose("copy", *p["user"].dims))


def word_tokenizer(prompts, vocab_size: int):
    """A word-level tokenizer of every piece of ``prompts`` (Llama-3's split), Llama-3's chat
    markers and template, padded with reserved tokens to ``vocab_size`` ids."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    split = pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated")
    texts = {str(t) for v in ("system", "user") for t in prompts[v].values.ravel()}
    texts |= {"system", "user", "assistant", "\n\n", " ", *"0123456789"}
    pieces = sorted({w for t in texts for w, _ in split.pre_tokenize_str(t)})
    vocab = {w: i for i, w in enumerate(pieces + SPECIAL)}
    if len(vocab) > vocab_size:
        raise ValueError(f"the prompts need {len(vocab)} tokens; vocabulary {vocab_size}")
    for k in range(vocab_size - len(vocab)):
        vocab[f"<|reserved_special_token_{k}|>"] = len(vocab)
    tk = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tk.pre_tokenizer = split
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=BOS, eos_token=EOS,
                                  pad_token=PAD, unk_token=UNK,
                                  additional_special_tokens=SPECIAL[1:4])  # fmt: skip
    tok.chat_template = CHAT_TEMPLATE
    return tok


def load_tokenizer(name: str, prompts, vocab_size: int):
    """``(tokenizer, vocabulary size of the model, description)`` for ``--tokenizer``."""
    if name == "words":
        desc = ("built here: the demo prompts' pieces under Llama-3's pre-tokenizer split, "
                "one token each; Llama-3 chat template")  # fmt: skip
        return word_tokenizer(prompts, vocab_size), vocab_size, desc
    from transformers import AutoTokenizer

    from xlikert.collect.zoo import ZOO, cache_dir

    folder = Path(name)
    if name in ZOO:
        folder = cache_dir() / "models" / f"{name}-{ZOO[name].sha256[:16]}"
        if not (folder / "xlikert-complete.json").is_file():
            raise SystemExit(f"--tokenizer {name}: its folder {folder} is not cached")
    tok = AutoTokenizer.from_pretrained(folder)
    vocab = max(vocab_size, -(-len(tok) // 128) * 128)
    return tok, vocab, f"{name} (vocabulary widened to {vocab:,})"


def write_folder(folder: Path, shape: str, tokenizer, vocab_size: int):
    """``config.json`` of ``shape`` (no weights) and the tokenizer's files; the config."""
    from transformers import LlamaConfig

    cfg = LlamaConfig(**{**SHAPES[shape], "vocab_size": vocab_size},
                      max_position_embeddings=4096, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    cfg.architectures = ["LlamaForCausalLM"]
    folder.mkdir(parents=True, exist_ok=True)
    cfg.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return cfg


def random_model(cfg, device: str, seed: int = 0):
    """A random-weight ``LlamaForCausalLM`` of ``cfg`` made on ``device`` in bf16 (seeded)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    return model.eval()


def encoded_groups(lm, prompts) -> list[list[list[int]]]:
    """Token ids of the distinct prompts as the backend makes them, one group per system
    prompt: ``collect`` computes identical prompts once (the demo's 4 items that do not
    name the target are one prompt each across the 4 targets), so FLOPs and prompts per
    second count those it computed."""
    pairs = list(dict.fromkeys(prompt_pairs(prompts, order=None)))
    return by_system(pairs, [lm.encode(lm.render(s, u)) for s, u in pairs])


def warm_prompts(prompts):
    """The warm-up's prompts: every item of the first of every other factor's levels."""
    return prompts.isel({d: slice(0, 1) for d in prompts["user"].dims if d != "item"})


def formed(batches: list[int]) -> str:
    """``"64 ×4, 16 ×1"``: prompts per forward pass and how many passes had that many."""
    return ", ".join(f"{n} ×{k}" for n, k in sorted(Counter(batches).items(), reverse=True))


def _sync(device: str):
    """CUDA's synchronize on a CUDA device, else nothing."""
    import torch

    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def bf16_matmul(device: str, tiny: bool) -> dict[str, Any]:
    """The bf16 matmul rate now (8192³ on CUDA, 256³ on the CPU)."""
    import torch

    m = 8192 if device.startswith("cuda") else 256
    return matmul_rate(device, torch.bfloat16, m, m, m, seconds=1.5 if not tiny else 0.2)


# ----------------------------------------------------------------------------- transformers
class ReadoutTimer:
    """The transformers backend with its readout timed, while entered.

    :attr:`model_class` is the backend's ``LocalModel`` whose ``readout`` (the logits'
    copy to the host and the numpy rules) is timed, the device synchronised before it
    starts, and the prompts of each batch counted; the numpy rules alone
    (:attr:`RULES`) are timed as well. :meth:`reset` before each run.
    """

    def __init__(self, sync) -> None:
        from xlikert.collect.backends.transformers import LocalModel
        from xlikert.collect.backends.transformers import model as local_model

        self.sync, self._module = sync, local_model
        self.reset()
        timer = self

        class TimedLocalModel(LocalModel):
            """The backend's model, its readout timed (the device synchronised first)."""

            def readout(self, logits, n):
                timer.sync()
                out, seconds = timed(lambda: super(TimedLocalModel, self).readout(logits, n))
                timer.readout_s += seconds
                timer.batches.append(n)
                return out

        self.model_class = TimedLocalModel

    def reset(self) -> None:
        self.readout_s, self.rules_s, self.batches = 0.0, 0.0, []

    #: The host's numpy rules in the backend's module: the next-token readout of every
    #: context, then the answers' PMFs from it.
    RULES = ("context_readout", "finish_readout")

    def __enter__(self) -> ReadoutTimer:
        self._rules = {name: getattr(self._module, name) for name in self.RULES}

        def timing(rules):
            def timed_rules(*a, **k):
                out, seconds = timed(lambda: rules(*a, **k))
                self.rules_s += seconds
                return out

            return timed_rules

        for name, rules in self._rules.items():
            setattr(self._module, name, timing(rules))
        return self

    def __exit__(self, *exc) -> None:
        for name, rules in self._rules.items():
            setattr(self._module, name, rules)


def time_batch(args, prompts, spec, lm, timer, counter, batch: int, device: str):
    """``collect`` at one batch size: a warm-up (and the backend's one prefix-cache check),
    then ``--repeat`` timed runs (CUDA synchronised) with their FLOPs, readout and batches."""
    from xlikert.collect import collect

    sync = _sync(device)
    kw = dict(batch_size=batch, chunk_size=args.chunk_size, device=device, progress=False,
              loader=lambda s, o, probe=None: timer.model_class(lm, o))  # fmt: skip
    collect(warm_prompts(prompts), [spec], **kw)  # warm-up
    runs, ds = [], None
    with counter:
        for _ in range(args.repeat):
            counter.reset()
            timer.reset()
            sync()
            t = time.perf_counter()
            ds = collect(prompts, [spec], **kw)
            sync()
            runs.append({"seconds": time.perf_counter() - t, "flops": counter.flops,
                         "readout_s": timer.readout_s, "rules_s": timer.rules_s,
                         "batches": list(timer.batches)})  # fmt: skip
    return runs, ds


def run_transformers(shape, args, prompts, folder, tok, vocab, device, rates) -> list[dict]:
    """One row per batch size: ``collect`` with the transformers backend on a random model."""
    import torch

    from xlikert.collect.backends import transformers as local

    cfg = write_folder(folder, shape, tok, vocab)
    t0 = time.perf_counter()
    model = random_model(cfg, device, args.seed)
    _sync(device)()
    build_s = time.perf_counter() - t0
    lm = local.wrap_model(shape, model, tok, SCALE, provenance={
        "source": str(folder), "weights": f"random (seed {args.seed}), bf16, made on {device}"})  # fmt: skip
    spec = {"name": shape, "source": str(folder)}
    groups = encoded_groups(lm, prompts)
    leaves, contexts = lm.answers.leaves, lm.answers.contexts
    extra = max(len(leaf) for leaf in leaves)
    useful = useful_flops(cfg, groups, extra_tokens=extra, rows=len(contexts))
    n = sum(map(len, groups))
    rows = []
    counter = FlopCounter(model)
    with ReadoutTimer(_sync(device)) as timer:
        for batch in args.batch_sizes:
            runs, ds = time_batch(args, prompts, spec, lm, timer, counter, batch, device)
            rows.append(_row(shape, "transformers", model, cfg, n, batch, args, runs, useful,
                             rates, ds, build_s))  # fmt: skip
            rows[-1]["prefix_cache"] = ds.likert.attrs["models"][shape]["prefix_cache"]
            if device.startswith("cuda"):
                rows[-1]["max_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
    del lm, model, counter
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return rows


def _row(shape, backend, model, cfg, n, batch, args, runs, useful, rates, ds, build_s) -> dict:
    import numpy as np

    med = statistics.median(r["seconds"] for r in runs)
    mid = min(runs, key=lambda r: abs(r["seconds"] - med))
    pmf, vm = ds["pmf"].values, ds["valid_mass"].values
    ok = bool(np.isfinite(pmf).all() and np.allclose(pmf.sum(-1), 1.0, atol=1e-9)
              and (vm > 0).all() and (vm <= 1 + 1e-12).all())  # fmt: skip
    row = {
        "model": shape, "backend": backend,
        "params": int(sum(p.numel() for p in model.parameters())) if model is not None else None,
        "body_params": body_params(cfg), "vocab": cfg.vocab_size, "prompts": n,
        "chunk_size": args.chunk_size, "batch_size": batch, "batches_formed": mid.get("batches"),
        "seconds": [r["seconds"] for r in runs], "median_s": med, "prompts_per_s": n / med,
        "useful_gflop_per_prompt": useful / n / 1e9,
        "pmf_sums_to_one_and_mass_in_range": ok, "build_s": build_s,
    }  # fmt: skip
    if mid.get("flops"):
        row["executed_gflop_per_prompt"] = mid["flops"] / n / 1e9
    if "readout_s" in mid:
        row["readout_s"] = mid["readout_s"]
        row["readout_share"] = mid["readout_s"] / mid["seconds"]
        row["rules_s"] = mid["rules_s"]
        row["readout_ms_per_prompt"] = 1e3 * mid["readout_s"] / n
    for key, rate in rates.items():
        if rate is None:
            continue
        row[f"mfu_useful_{key}"] = useful / med / rate
        if mid.get("flops"):
            row[f"mfu_executed_{key}"] = mid["flops"] / med / rate
            if "readout_s" in mid:  # the same work with the readout's time taken out
                row[f"mfu_executed_{key}_without_readout"] = mid["flops"] / (
                    mid["seconds"] - mid["readout_s"]) / rate  # fmt: skip
    if args.tiny:  # small enough to store: the test compares them with collect()'s
        row["pmf"] = pmf.reshape(-1, pmf.shape[-1]).tolist()
        row["valid_mass"] = vm.ravel().tolist()
    return row


# ----------------------------------------------------------------------------- vLLM
def run_vllm(shape, args, folder, tok, vocab, device, rates, timeout=3000) -> dict:
    """The vLLM row of ``shape``: the child (:func:`vllm_child`) in a Python with vLLM."""
    py = vllm_python(this_python=True)
    base = {"model": shape, "backend": "vllm"}
    if py is None:
        return {**base, "not_run": NOT_INSTALLED}
    cfg = write_folder(folder, shape, tok, vocab)
    out = folder / "vllm.json"
    cmd = [str(py), str(Path(__file__).resolve()), "--vllm-child", str(folder), "--out", str(out),
           "--device", device, "--copies", str(args.copies), "--chunk-size", str(args.chunk_size),
           "--repeat", str(args.repeat), "--seed", str(args.seed), "--shapes", shape]  # fmt: skip
    if args.tiny:
        cmd.append("--tiny")
    d = run_json_child(cmd, out, child_env(cpu=not device.startswith("cuda")), timeout)
    if "error" in d:
        return {**base, **d}
    groups = [[list(e) for e in g] for g in d.pop("groups")]
    n = sum(map(len, groups))
    useful = useful_flops(cfg, groups, extra_tokens=d.pop("extra_tokens"), rows=d.pop("contexts"))
    ds = _Arrays(d.pop("pmf"), d.pop("valid_mass"))
    row = _row(shape, "vllm", None, cfg, n, None, args, d.pop("runs"), useful, rates, ds, None)
    row.update(d)
    return row


class _Arrays(dict):
    """The two arrays :func:`_row` reads from a results Dataset."""

    def __init__(self, pmf, vm):
        import numpy as np

        super().__init__(pmf=_Values(np.asarray(pmf)), valid_mass=_Values(np.asarray(vm)))


class _Values:
    def __init__(self, values):
        self.values = values


def vllm_child(args) -> int:
    """In a Python with vLLM: ``collect`` with ``backend = "vllm"`` on ``load_format="dummy"``
    weights; one engine start, a warm-up, then timed runs (prefix cache reset before each)."""
    import numpy as np

    from xlikert.collect import collect
    from xlikert.collect.backends.vllm import VLLMModel

    folder, shape = Path(args.vllm_child), args.shapes
    prompts = demo_prompts(args.copies)
    cuda = args.device.startswith("cuda")
    spec = {"name": shape, "source": str(folder), "backend": "vllm",
            "dtype": "bfloat16" if cuda else "float32", "max_model_len": 1024, "seed": args.seed,
            "engine_args": {"load_format": "dummy"}}  # fmt: skip
    spec.update({"gpu_memory_utilization": 0.85} if cuda else {"enforce_eager": True})
    engine: dict[str, Any] = {}

    def loader(s, options, probe=None):
        if "llm" not in engine:
            m, start_s = timed(lambda: VLLMModel(s, options))
            engine.update(llm=m.llm, start_s=start_s)
        else:
            m = VLLMModel(s, options, engine=engine["llm"])
        engine["model"] = m
        return KeepOpen(m)

    kw = dict(chunk_size=args.chunk_size, progress=False, loader=loader)
    collect(warm_prompts(prompts), [spec], **kw)  # warm-up
    seconds, ds = time_calls(lambda: collect(prompts, [spec], **kw), args.repeat,
                             reset=lambda: engine["llm"].reset_prefix_cache())  # fmt: skip
    m = engine["model"]
    import vllm

    out = {
        "runs": [{"seconds": s} for s in seconds], "engine_start_s": engine["start_s"],
        "vllm": vllm.__version__, "dtype": spec["dtype"], "load_format": "dummy",
        "readout": ds.likert.attrs["models"][shape].get("readout"),
        "groups": encoded_groups(m.template, prompts),
        "extra_tokens": max(len(x) for x in m.answers.leaves),
        "contexts": len(m.answers.contexts),
        "pmf": np.asarray(ds["pmf"].values).reshape(-1, len(SCALE)).tolist(),
        "valid_mass": np.asarray(ds["valid_mass"].values).ravel().tolist(),
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(out))
    m.close()  # the engine's one shutdown
    return 0


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, each default resolved (``--quick``/``--tiny`` or the GPU run's)."""
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="the same as --tiny --device cpu")
    ap.add_argument("--tiny", action="store_true", help="a tiny config (seconds on a CPU)")
    ap.add_argument("--device", default=None, help="cuda (default) or cpu")
    ap.add_argument("--shapes", default=None, help="comma separated (default: 1B and 8B)")
    ap.add_argument("--copies", type=int, default=None, help="copies of the 68 prompts")
    ap.add_argument("--chunk-size", type=int, default=None, help="prompts per unit")
    ap.add_argument("--batch-sizes", default=None, help="comma separated: batch_size of collect")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--tokenizer", default="words", help="words (built here), a zoo name or folder")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--vllm-child", default=None, metavar="FOLDER", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    tiny = args.tiny = args.tiny or args.quick
    args.device = args.device or ("cpu" if args.quick else "cuda")
    args.shapes = args.shapes or ("tiny" if tiny else "llama-3.2-1b-shape,llama-3.1-8b-shape")
    args.copies = args.copies or (1 if tiny else 4)
    args.chunk_size = args.chunk_size or (64 if tiny else 256)
    args.batch_sizes = [
        int(b) for b in (args.batch_sizes or ("8,64" if tiny else "64,256")).split(",")
    ]
    args.repeat = args.repeat or (1 if tiny else 2)
    return args


def measure(args) -> dict[str, Any]:
    """The device, its rates and every row: per shape, transformers at each batch size,
    then vLLM; the matmul again after the runs."""
    import torch

    device = args.device
    res: dict[str, Any] = {}
    res["gpu"] = torch.cuda.get_device_name(device) if device.startswith("cuda") else None
    peak = datasheet_peak(res["gpu"])
    res["datasheet_bf16"] = peak or {"device": "unknown", "flops_per_s": None}
    rate = res["matmul"] = bf16_matmul(device, args.tiny)
    res["matmul_tflops"] = rate["flops_per_s"] / 1e12
    rates = {"datasheet": peak and peak["flops_per_s"], "measured": rate["flops_per_s"]}
    prompts = demo_prompts(args.copies)
    res["settings"] = {"copies": args.copies, "prompts": int(prompts["user"].size),
                       "chunk_size": args.chunk_size, "batch_sizes": args.batch_sizes,
                       "repeat": args.repeat, "seed": args.seed,
                       "weights": "random; transformers: bf16 made on the device, seeded; "
                                  "vLLM: load_format='dummy'"}  # fmt: skip
    res["rows"] = []
    with tempfile.TemporaryDirectory(prefix="xlk-gpu-") as tmp:
        for shape in args.shapes.split(","):
            tok, vocab, desc = load_tokenizer(args.tokenizer, prompts, SHAPES[shape]["vocab_size"])
            res["settings"]["tokenizer"] = desc
            folder = Path(tmp) / shape
            res["rows"] += run_transformers(shape, args, prompts, folder, tok, vocab, device, rates)
            if not args.no_vllm:
                res["rows"].append(run_vllm(shape, args, folder, tok, vocab, device, rates))
    res["matmul_after"] = bf16_matmul(device, args.tiny)
    return res


def print_summary(res: dict[str, Any]) -> None:
    after = res["matmul_after"]["flops_per_s"]
    print(f"\n{res['gpu'] or res['device']}: bf16 matmul {res['matmul_tflops']:.3g} TFLOP/s "
          f"(after the runs {after / 1e12:.3g}); datasheet {res['datasheet_bf16']['device']}")  # fmt: skip
    print(format_table(
        [[r["model"], r["backend"], r.get("prompts"), r.get("batch_size"),
          formed(r["batches_formed"]) if r.get("batches_formed") else "",
          r.get("prompts_per_s"), _pct(r.get("readout_share")),
          _pct(r.get("mfu_executed_measured")), _pct(r.get("mfu_executed_datasheet")),
          r.get("not_run") or r.get("error", "")[:60]] for r in res["rows"]],
        ["model", "backend", "prompts", "batch_size", "batches formed", "prompts/s",
         "readout share", "MFU exec (matmul)", "MFU exec (datasheet)", "note"],
    ))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.vllm_child:
        return vllm_child(args)
    out = result_path("gpu", args.tiny, args.out)

    import torch

    res: dict[str, Any] = {"benchmark": "gpu", "quick": args.tiny, "tiny": args.tiny,
                           "device": args.device,
                           "machine": machine(["torch", "transformers"])}  # fmt: skip
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        res["not_run"] = NOT_RUN
        print(NOT_RUN)
        write_json(out, res)
        return 0
    res.update(measure(args))
    print_summary(res)
    write_json(out, res)
    return 0


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.1%}"


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Collection on a GPU"


def _intro(d: dict[str, Any]) -> list[str]:
    """The device, its peak and measured rate, and how the rows were run."""
    s, peak = d["settings"], d.get("datasheet_bf16") or {}
    sheet = (f"{peak['device']}, {fmt(peak['flops_per_s'] / 1e12)} TFLOP/s"
             if peak.get("flops_per_s") else "unknown for this device")  # fmt: skip
    return [
        f"{d.get('gpu') or d['device']}; bf16 dense peak from the datasheet: {sheet}; bf16 "
        f"matmul measured in the same run: {fmt(d['matmul_tflops'])} TFLOP/s "
        f"({'×'.join(map(str, d['matmul']['shape']))}). Every row is `xlikert.collect` on a "
        f"random-weight model ({s['weights']}), readout included; {s['prompts']} prompts "
        f"({s['copies']} " + ("copy" if s["copies"] == 1 else "copies") + " of the 68 demo "
        f"prompts, one system prompt), units of {s['chunk_size']}, median of {s['repeat']} "
        f"run(s); tokenizer {s['tokenizer']}. `batch_size` is collect's setting; the batches "
        "formed are prompts per forward pass × how many passes. MFU = FLOPs / time / rate: "
        "executed (padding, the per-unit prefix, every logits row) and useful (prefix once, "
        "one lm_head row per answer context); 'datasheet' against the device's bf16 dense "
        "peak, 'matmul' against the measured rate.",
        "",
    ]


def _row_cells(r: dict[str, Any], peak: dict[str, Any]) -> list[str]:
    """One row of the table (a row that did not run: why)."""
    if "not_run" in r or "error" in r:
        return [r["model"], r["backend"], *[""] * 9,
                r.get("not_run") or r["error"][:120].replace("|", "/")]  # fmt: skip
    sheet_mfu = (pct(r.get("mfu_executed_datasheet") or r.get("mfu_useful_datasheet"))
                 if peak.get("flops_per_s") else "unknown")  # fmt: skip
    return [
        r["model"], r["backend"], params(r["params"]) if r.get("params") else "",
        fmt(r["prompts"]), fmt(r["batch_size"]) if r.get("batch_size") else "vLLM's",
        formed(r["batches_formed"]) if r.get("batches_formed") else "vLLM's scheduler",
        fmt(r["prompts_per_s"]), pct(r.get("readout_share")) if "readout_share" in r else "",
        pct(r.get("mfu_executed_measured")) if "mfu_executed_measured" in r else
        f"{pct(r['mfu_useful_measured'])} (useful)", sheet_mfu,
        pct(r.get("mfu_executed_measured_without_readout"))
        if "mfu_executed_measured_without_readout" in r else "",
        f"{r['dtype']}, engine start {fmt(r['engine_start_s'])} s" if "dtype" in r else "",
    ]  # fmt: skip


def render(d: dict[str, Any]) -> list[str]:
    from _common import RESULTS

    out: list[str] = []
    if "not_run" in d:
        out += [f"**{d['not_run']}**: the 1B and 8B rows are not measured; no numbers are "
                "given for them.", ""]  # fmt: skip
        q = RESULTS / "gpu-quick.json"
        if not q.exists():
            return out
        d = json.loads(q.read_text())
        out += [f"The same code on the CPU with a tiny config (`{q.name}`, {stamp(d, q)}, "
                "`python benchmarks/bench_gpu.py --quick`; the test suite runs it), to show it "
                "runs, not as a GPU number:", ""]  # fmt: skip
    if "rows" in d and d["rows"] and "backend" not in d["rows"][0]:
        return [*out, "(a results file from before the rows went through `xlikert.collect`)", ""]
    out += _intro(d)
    peak = d.get("datasheet_bf16") or {}
    rows = [_row_cells(r, peak) for r in d["rows"]]
    out += table(["model shape", "backend", "parameters", "prompts", "batch_size",
                  "batches formed (prompts ×passes)", "prompts/s", "readout share of time",
                  "MFU (matmul)", "MFU (datasheet)", "MFU (matmul) without the readout",
                  "note"], rows)  # fmt: skip
    tr = [r for r in d["rows"] if "readout_ms_per_prompt" in r]
    if tr:
        r = tr[-1]
        # on a GPU the rules run on the device (no numpy rules timed: rules_s is 0)
        how = ("the logits' copy to the host and the float64 numpy rules" if r.get("rules_s")
               else "the float64 torch rules on the device")  # fmt: skip
        out += [f"The transformers backend's readout ({how} over the full vocabulary of "
                f"{r['vocab']:,}: PMF, decoding grid, top-k) took {fmt(r['readout_ms_per_prompt'])} ms per prompt on this "
                f"host ({pct(r['readout_share'])} of the {r['model']} run at batch_size "
                f"{r['batch_size']}); MFU without the readout is the forward passes' alone.", ""]  # fmt: skip
    return out


if __name__ == "__main__":
    raise SystemExit(main())
