"""Collection throughput: the plain loop a researcher would write vs xlikert.

Both run in one process on Qwen2.5-Coder-0.5B-Instruct (built-in offline model)
over the demo experiment's CETSCALE prompts:

* plain loop: one prompt per forward pass, full logits at every position,
  softmax of the last row, gather the digit tokens;
* xlikert: ``collect`` (batched, left padded, shared system-prompt KV cache,
  ``logits_to_keep=1``, full-vocabulary float64 log-softmax, decoding grid and
  top-k included) under the same one-token answer rule as the plain loop;
* xlikert with its default split-space rule (the bare space token appended to
  every row, logits kept at the last two positions), the cost of counting
  answers such as ``"Ġ", "5"`` exactly.

It also times a float32 matmul of the model's MLP shape in the same run and
reports the fraction of the FLOP-bound prompt rate that xlikert reaches
(useful FLOPs: 2 x parameters touched per real token, plus attention; padding
counts as waste). Model load time is excluded from both sides.

Usage::

    python benchmarks/bench_collect.py --quick   # 1 target x 17 items, < 1 min warm
    python benchmarks/bench_collect.py           # 4 targets x 17 items
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np


def machine() -> dict:
    import torch

    cpu = platform.processor()
    try:
        text = Path("/proc/cpuinfo").read_text()
        cpu = re.search(r"model name\s*:\s*(.*)", text).group(1)
    except (OSError, AttributeError):
        pass
    info = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    import transformers

    info["transformers"] = transformers.__version__
    return info


def matmul_flops(device: str, m: int, k: int, n: int, seconds: float = 1.5) -> float:
    """Sustained float32 GEMM rate (FLOP/s) for an (m, k) x (k, n) product."""
    import torch

    a = torch.randn(m, k, device=device)
    b = torch.randn(k, n, device=device)
    for _ in range(3):
        a @ b
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        reps += 1
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return 2.0 * m * k * n * reps / (time.perf_counter() - t0)


def flops_per_token(cfg, context: int) -> float:
    """Forward FLOPs of one token through the decoder body (no lm_head), at ``context``."""
    h, L = cfg.hidden_size, cfg.num_hidden_layers
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    hd = getattr(cfg, "head_dim", None) or h // heads
    proj = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    mlp = 3 * h * cfg.intermediate_size
    attn = 2 * heads * hd * context  # QK^T and AV
    return L * (2 * (proj + mlp) + 2 * attn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 target (17 prompts)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch-size", default="auto", help="xlikert batch size (default auto)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "collect.json"))
    args = ap.parse_args()

    import torch

    from xlikert.collect import collect
    from xlikert.collect.local import load_model
    from xlikert.collect.tokens import spaced_answers
    from xlikert.design import load_experiment

    exp = load_experiment("demo")
    prompts = exp.build_prompts()
    if args.quick:
        prompts = prompts.isel(target=[0])
    n = int(prompts.user.size)
    t0 = time.perf_counter()
    lm = load_model(args.model, range(1, 8), device=args.device, split_space=False)
    load_s = time.perf_counter() - t0
    lm_split = dataclasses.replace(lm, answers=spaced_answers(lm.tokenizer, lm.valid))
    model, tok = lm.model, lm.tokenizer
    dev = str(lm.device)
    cfg = model.config

    # ---- the plain loop
    digit_ids = list(lm.valid.ids)
    systems = prompts.system.values.ravel()
    users = prompts.user.values.ravel()
    plain_tokens = 0

    def plain_loop(n=None):
        nonlocal plain_tokens
        plain_tokens = 0
        out = []
        for s, u in list(zip(systems, users, strict=True))[:n]:
            msgs = [{"role": "system", "content": str(s)}, {"role": "user", "content": str(u)}]
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids.to(dev)
            plain_tokens += ids.shape[1]
            with torch.no_grad():
                logits = model(ids).logits
            p = torch.softmax(logits[0, -1].float(), -1)
            out.append(p[digit_ids].cpu().numpy())
        return out

    plain_loop(1)  # warm-up on one prompt
    t0 = time.perf_counter()
    plain_out = plain_loop()
    plain_s = time.perf_counter() - t0

    # ---- xlikert
    def run(model, p=prompts):
        return collect(
            p, [{"name": "m", "source": args.model}], progress=False,
            loader=lambda *a, **k: model, batch_size=bs,
        )  # fmt: skip

    bs = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    one = prompts.isel({d: [0] for d in prompts.user.dims})
    run(lm, one)  # warm-up on one prompt
    t0 = time.perf_counter()
    ds = run(lm)
    xl_s = time.perf_counter() - t0
    run(lm_split, one)  # warm-up on one prompt
    t0 = time.perf_counter()
    ds_split = run(lm_split)
    split_s = time.perf_counter() - t0
    split_added = (ds_split.valid_mass - ds.valid_mass).values.ravel()

    # cross-check: same digit mass
    plain_vm = np.array([o.sum() for o in plain_out])
    max_vm_diff = float(np.max(np.abs(plain_vm - ds.valid_mass.values.ravel())))

    # ---- FLOP-bound rate
    texts = [str(t) for t in ds.prompt.values.ravel()]
    enc = [lm.encode(t) for t in texts]
    groups: dict[str, list[list[int]]] = {}
    for s, e in zip(systems, enc, strict=True):
        groups.setdefault(str(s), []).append(e)
    useful = 0.0  # xlikert: shared prefix once per group, then each suffix, one lm_head row
    for es in groups.values():
        P = 0
        while min(map(len, es)) - 1 > P and all(e[P] == es[0][P] for e in es):
            P += 1
        useful += sum(flops_per_token(cfg, c) for c in range(P))
        for e in es:
            useful += sum(flops_per_token(cfg, c) for c in range(P, len(e)))
            useful += 2 * cfg.hidden_size * cfg.vocab_size
    flops_prompt = useful / n
    gemm = matmul_flops(dev, 256, cfg.hidden_size, cfg.intermediate_size)
    bound = gemm / flops_prompt
    plain_flops = (
        sum(
            sum(flops_per_token(cfg, c) for c in range(len(e)))
            + 2 * cfg.hidden_size * cfg.vocab_size * len(e)
            for e in enc
        )
        / n
    )

    res = {
        "model": args.model,
        "prompts": n,
        "device": dev,
        "dtype": str(next(model.parameters()).dtype),
        "load_seconds": round(load_s, 2),
        "plain_loop_prompts_per_s": n / plain_s,
        "xlikert_prompts_per_s": n / xl_s,
        "speedup": plain_s / xl_s,
        "xlikert_split_space_prompts_per_s": n / split_s,
        "split_space_time_ratio": split_s / xl_s,
        "split_space_valid_mass_added_mean": float(split_added.mean()),
        "split_space_valid_mass_added_max": float(split_added.max()),
        "xlikert_batch_size": ds.attrs["models"]["m"].get("batch_size"),
        "matmul_gflops": gemm / 1e9,
        "useful_gflop_per_prompt_xlikert": flops_prompt / 1e9,
        "gflop_per_prompt_plain_loop": plain_flops / 1e9,
        "flop_bound_prompts_per_s": bound,
        "fraction_of_flop_bound": (n / xl_s) / bound,
        "plain_loop_fraction_of_flop_bound": (n / plain_s) / (gemm / plain_flops),
        "max_abs_valid_mass_diff_plain_vs_xlikert": max_vm_diff,
        "goals": {"speedup": 3.0, "fraction_of_flop_bound": 0.70},
        "quick": args.quick,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    rows = [
        ("plain loop (1 prompt/forward, full logits)", res["plain_loop_prompts_per_s"],
         res["plain_loop_fraction_of_flop_bound"]),
        ("xlikert collect", res["xlikert_prompts_per_s"], res["fraction_of_flop_bound"]),
        ("xlikert collect, split space (default)", res["xlikert_split_space_prompts_per_s"],
         res["fraction_of_flop_bound"] / res["split_space_time_ratio"]),
    ]  # fmt: skip
    print(f"\n{args.model} on {dev}, {n} prompts, matmul {res['matmul_gflops']:.1f} GFLOP/s")
    print(f"{'':44s} {'prompts/s':>10s} {'of FLOP bound':>14s}")
    for name, rate, frac in rows:
        print(f"{name:44s} {rate:10.2f} {frac:14.1%}")
    print(f"speedup {res['speedup']:.2f}x (goal >= 3x); xlikert reaches "
          f"{res['fraction_of_flop_bound']:.1%} of the FLOP-bound rate (goal >= 70%)")  # fmt: skip
    print(f"max |valid mass plain - xlikert| = {max_vm_diff:.2e}")
    print(f"split space: {res['split_space_time_ratio']:.2f}x the one-token time; valid mass "
          f"added: mean {res['split_space_valid_mass_added_mean']:.2e}, "
          f"max {res['split_space_valid_mass_added_max']:.2e}")  # fmt: skip
    out = Path(args.out)
    if args.quick:
        out = out.with_name(out.stem + "-quick.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
