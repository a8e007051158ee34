"""Collection on a GPU: random-weight Llama-3.2-1B and Llama-3.1-8B shapes in bf16, prompts/s and MFU.

For each model shape (``LlamaConfig`` with the published sizes; random weights, built
directly on the device in bf16, so no CPU copy is made):

* prompts: the demo experiment's 68 prompts as token ids with the demo's length
  distribution: each prompt's length and the prefix its system prompt shares, under
  a reference tokenizer (``--tokenizer``, default the offline Qwen2.5 model's, when
  its folder is cached) or read from an earlier run's JSON (``--lengths-from``; by
  default ``results/gpu-quick.json``, which the tiny CPU run writes). The ids are
  random (seeded); ``--copies`` copies of the 68 prompts, each copy with its own
  system prefix, give the GPU enough work;
* collection as the transformers backend batches it: units of ``--chunk-size``
  prompts sharing a system prompt, the shared prefix run once
  (``Scorer.prefix_state``), then length-sorted batches of ``--batch-size`` prompts,
  left padded, ``logits_to_keep=1`` (``Scorer.forward_rows``); the answer read on the
  device: float32 log-softmax over the full vocabulary, the 7 valid ids gathered,
  valid mass and item PMF (the same one-token rule; random weights, so the numbers
  themselves mean nothing);
* prompts/s (CUDA synchronised), and model FLOP utilisation against the bf16 matmul
  rate measured in the same run (an ``(n, n) x (n, n)`` product): executed FLOPs
  (every forward call's shapes, ``_flops.FlopCounter``) and useful FLOPs
  (``_flops.useful_flops``: the shared prefix once, each prompt's own tokens, one
  lm_head row);
* the host side of the transformers backend: ``xlikert.collect.local.read_logits``
  (the float64 numpy rules over the full vocabulary: PMF, decoding grid, top-k) on
  a sample of the logits, in prompts/s on this host's CPU.

Usage::

    python benchmarks/bench_gpu.py                        # CUDA: 1B and 8B shapes
    python benchmarks/bench_gpu.py --quick                # = --tiny --device cpu (the test runs it)
    python benchmarks/bench_gpu.py --tiny --device cpu    # a tiny config on the CPU, seconds

Without a CUDA device a full run writes ``results/gpu.json`` saying it did not run.
Writes ``results/gpu.json`` (``gpu-quick.json`` with ``--quick``/``--tiny``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, format_table, machine, result_path, write_json
from _flops import (
    FlopCounter,
    body_params,
    lm_head_flops,
    matmul_rate,
    shared_prefix,
    useful_flops,
)
from _render import fmt, params, pct, stamp, table

#: Published shapes (Llama-3.2-1B: tied embeddings; Llama-3.1-8B: untied).
SHAPES: dict[str, dict[str, Any]] = {
    "llama-3.2-1b-shape": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                               num_key_value_heads=8, intermediate_size=8192, vocab_size=128256,
                               tie_word_embeddings=True),
    "llama-3.1-8b-shape": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                               num_key_value_heads=8, intermediate_size=14336, vocab_size=128256,
                               tie_word_embeddings=False),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128, vocab_size=2048,
                 tie_word_embeddings=True),
}  # fmt: skip
NOT_RUN = "not run: no GPU lent to this task (torch sees no CUDA device)"
SCALE = tuple(range(1, 8))


def demo_lengths(tokenizer_name: str) -> dict[str, Any] | None:
    """Token lengths of the demo prompts and their shared prefixes under a cached zoo tokenizer.

    None when the tokenizer's folder is not in the xlikert cache (no download, no
    dequantisation is started here).
    """
    import xarray as xr
    from transformers import AutoTokenizer

    from xlikert.collect.templates import PromptTemplate
    from xlikert.collect.zoo import ZOO, cache_dir
    from xlikert.design import load_experiment

    zm = ZOO.get(tokenizer_name)
    folder = cache_dir() / "models" / f"{tokenizer_name}-{zm.sha256[:16]}" if zm else None
    if folder is None or not (folder / "xlikert-complete.json").is_file():
        return None
    tok = AutoTokenizer.from_pretrained(folder)
    template = PromptTemplate(tok, tokenizer_name, None)
    p = load_experiment("demo").build_prompts()
    system, user = (a.transpose("target", "item") for a in xr.broadcast(p.system, p.user))
    groups: dict[str, list[list[int]]] = {}
    for s, u in zip(system.values.ravel(), user.values.ravel(), strict=True):
        groups.setdefault(str(s), []).append(template.encode(template.render(str(s), str(u))))
    return {
        "tokenizer": tokenizer_name,
        "groups": [{"prefix": shared_prefix(g), "lengths": [len(e) for e in g]}
                   for g in groups.values()],
    }  # fmt: skip


def prompt_ids(
    lengths: dict[str, Any], copies: int, vocab: int, seed: int
) -> list[list[list[int]]]:
    """Random token ids with the given lengths: one group per (copy, system prompt)."""
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(copies):
        for g in lengths["groups"]:
            prefix = rng.integers(0, vocab, g["prefix"]).tolist()
            groups.append([prefix + rng.integers(0, vocab, n - g["prefix"]).tolist()
                           for n in g["lengths"]])  # fmt: skip
    return groups


def build_model(name: str, device: str):
    """A random-weight LlamaForCausalLM of shape ``name``, made on ``device`` in bf16."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**SHAPES[name], max_position_embeddings=4096, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16)
    return model.eval()


def collect_units(scorer, units: list[list[list[int]]], batch: int, valid_ids, device):
    """Score every unit as the transformers backend does; the readout on the device.

    Returns the valid masses and the item PMFs (torch tensors on the device).
    """
    import torch

    masses, pmfs = [], []
    for enc in units:
        p = shared_prefix(enc)
        cache = scorer.prefix_state(enc[0][:p])
        order = sorted(range(len(enc)), key=lambda r: (len(enc[r]), r))
        nb = -(-len(order) // batch)
        size = -(-len(order) // nb)  # equal batches, as LocalModel splits them
        for a in range(0, len(order), size):
            rows = order[a : a + size]
            logits = scorer.forward_rows(enc[0][:p], cache, [enc[r][p:] for r in rows], keep=1)
            logp = torch.log_softmax(logits[:, -1].float(), -1)  # float32, full vocabulary
            lv = logp[:, valid_ids]
            vm = lv.exp().sum(-1)
            masses.append(vm)
            pmfs.append(lv.exp() / vm[:, None])
    return torch.cat(masses), torch.cat(pmfs)


def numpy_readout_rate(scorer, enc: list[list[int]], vocab: int, n: int) -> dict[str, Any]:
    """Prompts/s of ``read_logits`` (the float64 numpy rules) on ``n`` prompts' logits."""
    from xlikert.collect.local import read_logits
    from xlikert.collect.protocol import CollectOptions
    from xlikert.collect.tokens import ValidTokens, one_token_answers

    enc = enc[:n]
    p = shared_prefix(enc)
    logits = scorer.forward_rows(enc[0][:p], None, [e[p:] for e in enc], keep=1)
    z = logits.float().cpu().numpy()  # (n, 1, V)
    ids = tuple(range(16, 16 + len(SCALE)))
    answers = one_token_answers(ValidTokens(ids, tuple(map(str, SCALE)), SCALE, SCALE))
    opts = CollectOptions(scale=SCALE)
    read_logits(z[:1], answers, opts)  # warm
    t0 = time.perf_counter()
    read_logits(z, answers, opts)
    s = time.perf_counter() - t0
    return {"prompts": len(enc), "seconds": s, "prompts_per_s": len(enc) / s, "vocab": vocab}


def run_shape(name: str, args, lengths, device: str, rate: float) -> list[dict[str, Any]]:
    import torch

    from xlikert.collect.local import LoadedModel, Scorer

    t0 = time.perf_counter()
    model = build_model(name, device)
    build_s = time.perf_counter() - t0
    cfg = model.config
    lm = LoadedModel(name, model, SimpleNamespace(pad_token_id=0), None, None, None)
    scorer = Scorer(lm, prefix_cache=True)
    groups = prompt_ids(lengths, args.copies, cfg.vocab_size, args.seed)
    units = [g[a : a + args.chunk_size] for g in groups for a in range(0, len(g), args.chunk_size)]
    n = sum(map(len, units))
    useful = useful_flops(cfg, groups)  # the prefix once per system prompt
    valid_ids = torch.arange(16, 16 + len(SCALE), device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    rows = []
    counter = FlopCounter(model)
    for batch in args.batch_sizes:
        collect_units(scorer, units[:1], batch, valid_ids, device)  # warm-up
        sync()
        seconds = []
        with counter:
            for _ in range(args.repeat):
                counter.reset()
                sync()
                t0 = time.perf_counter()
                vm, pmf = collect_units(scorer, units, batch, valid_ids, device)
                sync()
                seconds.append(time.perf_counter() - t0)
        med = statistics.median(seconds)
        ok = bool(torch.isfinite(pmf).all()) and bool((vm > 0).all() & (vm <= 1.0001).all())
        rows.append({
            "model": name, "params": int(sum(p.numel() for p in model.parameters())),
            "body_params": body_params(cfg), "prompts": n, "chunk_size": args.chunk_size,
            "batch_size": batch, "seconds": seconds, "median_s": med, "prompts_per_s": n / med,
            "executed_gflop_per_prompt": counter.flops / n / 1e9,
            "useful_gflop_per_prompt": useful / n / 1e9,
            "mfu_executed": counter.flops / med / rate,
            "mfu_useful": useful / med / rate,
            "lm_head_share_of_executed": n * lm_head_flops(cfg) / counter.flops,
            "readout_finite_and_in_range": ok, "build_s": build_s,
        })  # fmt: skip
        if device.startswith("cuda"):
            rows[-1]["max_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
    rows[-1]["numpy_readout"] = numpy_readout_rate(
        scorer, groups[0], cfg.vocab_size, min(args.readout_prompts, len(groups[0]))
    )
    del scorer, lm, model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--batch-sizes", default=None, help="comma separated prompts per forward")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--readout-prompts", type=int, default=None)
    ap.add_argument("--tokenizer", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--lengths-from", default=None, help="a JSON with 'prompt_lengths'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    tiny = args.tiny or args.quick
    device = args.device or ("cpu" if args.quick else "cuda")
    args.shapes = args.shapes or ("tiny" if tiny else "llama-3.2-1b-shape,llama-3.1-8b-shape")
    args.copies = args.copies or (1 if tiny else 32)
    args.chunk_size = args.chunk_size or (64 if tiny else 256)
    args.batch_sizes = [
        int(b) for b in (args.batch_sizes or ("8,64" if tiny else "64,256")).split(",")
    ]
    args.repeat = args.repeat or (1 if tiny else 3)
    args.readout_prompts = args.readout_prompts or (8 if tiny else 64)
    out = result_path("gpu", tiny, args.out)

    import torch

    res: dict[str, Any] = {"benchmark": "gpu", "quick": tiny, "tiny": tiny, "device": device,
                           "machine": machine(["torch", "transformers"])}  # fmt: skip
    if device.startswith("cuda") and not torch.cuda.is_available():
        res["not_run"] = NOT_RUN
        print(NOT_RUN)
        write_json(out, res)
        return 0
    lengths = demo_lengths(args.tokenizer)
    source = f"demo prompts under the {args.tokenizer} tokenizer"
    if lengths is None:
        path = Path(args.lengths_from) if args.lengths_from else RESULTS / "gpu-quick.json"
        lengths = json.loads(path.read_text())["prompt_lengths"]
        source = f"read from {path.name} ({lengths['tokenizer']} tokenizer)"
    res["prompt_lengths"] = lengths
    res["prompt_lengths_source"] = source
    res["gpu"] = torch.cuda.get_device_name(device) if device.startswith("cuda") else None
    m = 8192 if device.startswith("cuda") else 256
    rate = matmul_rate(device, torch.bfloat16, m, m, m, seconds=1.5 if not tiny else 0.2)
    res["matmul"] = rate
    res["matmul_tflops"] = rate["flops_per_s"] / 1e12
    res["settings"] = {"copies": args.copies, "chunk_size": args.chunk_size,
                       "batch_sizes": args.batch_sizes, "repeat": args.repeat, "seed": args.seed,
                       "weights": "bfloat16, random (transformers init)",
                       "readout": "float32 log_softmax over the full vocabulary on the device"}  # fmt: skip
    res["rows"] = []
    for name in args.shapes.split(","):
        res["rows"] += run_shape(name, args, lengths, device, rate["flops_per_s"])
    after = matmul_rate(device, torch.bfloat16, m, m, m, seconds=1.5 if not tiny else 0.2)
    res["matmul_after"] = after
    print(f"\n{res['gpu'] or device}: bf16 matmul {res['matmul_tflops']:.3g} TFLOP/s "
          f"(after the runs {after['flops_per_s'] / 1e12:.3g}); lengths {source}")  # fmt: skip
    print(format_table(
        [[r["model"], r["prompts"], r["batch_size"], r["prompts_per_s"],
          r["executed_gflop_per_prompt"], f"{r['mfu_executed']:.1%}", r["useful_gflop_per_prompt"],
          f"{r['mfu_useful']:.1%}"] for r in res["rows"]],
        ["model", "prompts", "batch", "prompts/s", "executed GFLOP/prompt", "MFU executed",
         "useful GFLOP/prompt", "MFU useful"],
    ))  # fmt: skip
    for r in res["rows"]:
        if "numpy_readout" in r:
            nr = r["numpy_readout"]
            print(f"{r['model']}: numpy float64 readout on the host: {nr['prompts_per_s']:.3g} "
                  f"prompts/s (vocab {nr['vocab']}, {nr['prompts']} prompts)")  # fmt: skip
    write_json(out, res)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Collection on a GPU"


def render(d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "not_run" in d:
        out += [f"**{d['not_run']}**: the 1B and 8B rows are not measured; no numbers are "
                "given for them.", ""]  # fmt: skip
        q = RESULTS / "gpu-quick.json"
        if not q.exists():
            return out
        d = json.loads(q.read_text())
        out += [f"The same code path on the CPU with a tiny config (`{q.name}`, {stamp(d, q)}, "
                "`python benchmarks/bench_gpu.py --quick`; the test suite runs it), to show it "
                "runs, not as a GPU number:", ""]  # fmt: skip
    s = d["settings"]
    out += [
        f"{d.get('gpu') or d['device']}; bf16 matmul measured in the same run: "
        f"{fmt(d['matmul_tflops'])} TFLOP/s ({'×'.join(map(str, d['matmul']['shape']))}); "
        f"weights {s['weights']}; readout {s['readout']}; prompt lengths "
        f"{d['prompt_lengths_source']}, {s['copies']} "
        + ("copy" if s["copies"] == 1 else "copies")
        + " of the 68 demo prompts (each copy its own system prefix), units "
        f"of {s['chunk_size']} prompts, median of {s['repeat']} run(s). MFU = FLOPs / time / "
        "matmul rate, executed (padding, the per-unit prefix, every logits row) and useful "
        "(prefix once per system prompt, one lm_head row per prompt).",
        "",
    ]
    rows = [[r["model"], params(r["params"]), fmt(r["prompts"]), fmt(r["batch_size"]),
             fmt(r["prompts_per_s"]), fmt(r["executed_gflop_per_prompt"]), pct(r["mfu_executed"]),
             fmt(r["useful_gflop_per_prompt"]), pct(r["mfu_useful"]),
             fmt(r["numpy_readout"]["prompts_per_s"]) if "numpy_readout" in r else ""]
            for r in d["rows"]]  # fmt: skip
    out += table(["model shape", "parameters", "prompts", "batch", "prompts/s",
                  "executed GFLOP/prompt", "MFU executed", "useful GFLOP/prompt", "MFU useful",
                  "numpy float64 readout, prompts/s (host CPU)"], rows)  # fmt: skip
    out += ["The last column is the transformers backend's host-side readout "
            "(`read_logits`: float64 PMF, decoding grid and top-k over the full vocabulary) "
            "on this machine's CPU.", ""]  # fmt: skip
    return out


if __name__ == "__main__":
    raise SystemExit(main())
