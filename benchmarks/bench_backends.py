"""How far apart the backends' numbers are, on the offline models and the demo's 68 prompts.

Usage::

    tests/engines/install.sh                    # the engines, once (vLLM CPU, llama.cpp)
    python benchmarks/bench_backends.py         # SmolLM2 and Qwen, 68 prompts each
    python benchmarks/bench_backends.py --quick # SmolLM2, 17 prompts

Backends, all with the paper's one-token rule (what a server can read):

* ``local``: the transformers backend on the float32 folder dequantised from the GGUF;
* ``vllm-server``: a vLLM (CPU build) OpenAI server on the same float32 folder, exact
  mode (``logprob_token_ids``);
* ``llamacpp``: a llama-cpp-python server on the quantised GGUF itself, top-k mode with
  a list long enough to hold every valid token (the point values are then the server's
  own; the interval width says how far they are from being pinned down);
* ``llamacpp-no-reset``: the same server with ``server = "other"``: no prompt-cache reset,
  so a cell's numbers depend on the request before it.

For each pair: max and mean |Δ pmf| over every (cell, score), max |Δ valid mass| and its
largest relative value; for each server backend, the HTTP requests it sent per prompt
(from its provenance, ``http_requests_last_session``). Writes ``results/backends.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MODEL, QUICK_MODEL, machine, result_path, timed, write_json
from _prompts import demo_prompts
from _render import fmt, table

from xlikert.testing.engines import llamacpp_server, vllm_server

MODELS = {
    QUICK_MODEL: {"vocab": 49152},
    MODEL: {"vocab": 151936, "top_k": 4096},
}


def differences(a, b) -> dict[str, float]:
    d = np.abs(a.pmf.values - b.pmf.values)
    dv = np.abs(a.valid_mass.values - b.valid_mass.values)
    return {
        "pmf_max": float(np.nanmax(d)),
        "pmf_mean": float(np.nanmean(d)),
        "valid_mass_max": float(np.nanmax(dv)),
        "valid_mass_rel_max": float(np.nanmax(dv / np.maximum(a.valid_mass.values, 1e-300))),
    }


#: The pairs of backends compared.
PAIRS = (("local", "vllm-server"), ("local", "llamacpp"), ("vllm-server", "llamacpp"),
         ("llamacpp", "llamacpp-no-reset"))  # fmt: skip


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    return ap.parse_args()


def run_backends(name: str, cfg: dict[str, Any], prompts, tmp: Path):
    """``collect`` on every backend for one model: the results and seconds by backend."""
    from xlikert.collect import collect
    from xlikert.collect.zoo import model_folder, resolve_gguf

    folder = model_folder({"name": name, "source": name})[0]
    res, secs = {}, {}

    def run(label, entries, **kw):
        res[label], secs[label] = timed(lambda: collect(prompts, entries, progress=False, **kw))

    run("local", [{"name": "m", "source": name}], split_space=False)
    srv = vllm_server(Path(folder), "m", tmp / f"vllm-{name}.log")
    try:
        run("vllm-server", [{"name": "m", "source": "openai:m", "base_url": srv.url,
                             "tokenizer": folder, "concurrency": 4}])  # fmt: skip
    finally:
        srv.kill()
    srv = llamacpp_server(resolve_gguf(name), "m", tmp / f"llama-{name}.log")
    try:
        for label, extra in (("llamacpp", {}), ("llamacpp-no-reset", {"server": "other"})):
            entry = {"name": "m", "source": "openai:m", "base_url": srv.url,
                     "tokenizer": folder, "concurrency": 1, "mode": "topk", **extra}  # fmt: skip
            run(label, [entry], top_k=cfg.get("top_k", cfg["vocab"]))
    finally:
        srv.kill()
    return res, secs


def compare(name: str, cfg: dict[str, Any], res, secs, n: int) -> list[dict[str, Any]]:
    """One row per pair of backends, and the model's row (top-k, interval, HTTP requests)."""
    from xlikert.core.io import read_attrs

    rows = []
    for a, b in PAIRS:
        row = {"model": name, "a": a, "b": b, "cells": int(res[a].valid_mass.size),
               **differences(res[a], res[b])}  # fmt: skip
        rows.append(row)
        print(f"{name:30s} {a:>12s} vs {b:<18s} max|dpmf| {row['pmf_max']:.2e} "
              f"mean {row['pmf_mean']:.2e} max|dvalid| {row['valid_mass_max']:.2e} "
              f"(rel {row['valid_mass_rel_max']:.2e})", flush=True)  # fmt: skip
    per_prompt = {
        label: read_attrs(ds)["models"]["m"]["http_requests_last_session"] / n
        for label, ds in res.items()
        if label != "local"
    }
    print(f"{name:30s} HTTP requests per prompt: {per_prompt}", flush=True)
    llama = res["llamacpp"]
    width = float((llama.pmf_upper - llama.pmf_lower).max())
    rows.append({"model": name, "llamacpp_top_k": cfg.get("top_k", cfg["vocab"]),
                 "llamacpp_interval_width_max": width, "seconds": secs,
                 "http_requests_per_prompt": per_prompt})  # fmt: skip
    return rows


def main() -> int:
    args = parse_args()
    prompts = demo_prompts()
    models = dict(MODELS)
    if args.quick:
        prompts = prompts.sel(target=["USA"])
        models = {QUICK_MODEL: MODELS[QUICK_MODEL]}
    rows = []
    with tempfile.TemporaryDirectory(prefix="xlk-backends-") as tmp:
        for name, cfg in models.items():
            res, secs = run_backends(name, cfg, prompts, Path(tmp))
            rows += compare(name, cfg, res, secs, int(prompts.user.size))
    write_json(
        result_path("backends", args.quick, args.out),
        {
            "benchmark": "backends",
            "quick": args.quick,
            "machine": machine(["torch", "transformers"]),
            "prompts": int(prompts.user.size),
            "answer_rule": "one token (servers cannot condition on an appended space token)",
            "rows": rows,
        },
    )
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Backend against backend"


def render(d: dict[str, Any]) -> list[str]:
    out = [
        f"{d['prompts']} demo prompts per model; answer rule: {d['answer_rule']}. "
        "local = transformers on the float32 folder dequantised from the GGUF; vllm-server = "
        "vLLM CPU server on that folder (exact mode); llamacpp = llama-cpp-python server on the "
        "quantised GGUF (top-k mode, list long enough for every valid token; prompt cache reset "
        "before each request); llamacpp-no-reset = the same server without the reset.",
        "",
    ]
    pairs = [r for r in d["rows"] if "a" in r]
    rows = [[r["model"], f"{r['a']} vs {r['b']}", fmt(r["pmf_max"]), fmt(r["pmf_mean"]),
             fmt(r["valid_mass_max"]), fmt(r["valid_mass_rel_max"])] for r in pairs]  # fmt: skip
    out += table(["model", "backends", "max abs dpmf", "mean abs dpmf", "max abs d valid mass",
                  "max rel d valid mass"], rows)  # fmt: skip
    for r in d["rows"]:
        if "llamacpp_top_k" in r:
            out.append(
                f"- {r['model']}: llama.cpp top_k = {r['llamacpp_top_k']}, widest interval "
                f"{fmt(r['llamacpp_interval_width_max'])}; seconds: "
                + ", ".join(f"{k} {fmt(v)}" for k, v in r["seconds"].items())
                + (
                    "; HTTP requests per prompt: "
                    + ", ".join(f"{k} {fmt(v)}" for k, v in r["http_requests_per_prompt"].items())
                    if "http_requests_per_prompt" in r
                    else ""
                )
            )
    return [*out, ""]


if __name__ == "__main__":
    sys.exit(main())
