"""vLLM (CPU build) timings for bench_collect.py and bench_sampling.py, run in the vLLM venv.

vLLM cannot be imported in the main environment, so the benchmarks run this script
with the vLLM venv's Python (``benchmarks/_vllm.py`` finds it and puts this
checkout first on ``PYTHONPATH``, so the xlikert measured is this tree's). It
writes one JSON file the benchmark then reads::

    <vllm python> benchmarks/_vllm_child.py collect --out X.json [--split-space]
    <vllm python> benchmarks/_vllm_child.py sample --out X.json --budgets 10,100,1000

``collect``: xlikert's in-process vLLM backend (``backend = "vllm"``) on the demo
prompts, warm (one prompt first), the prefix cache reset before each timed run;
every request's prompt length and prefix-cache hits are recorded (the executed
FLOPs), and the valid masses are returned for a cross-check. Then, on the same
engine, the least a user could do with vLLM alone (``raw``): ``LLM.generate`` over
the same token ids, one request per prompt, ``max_tokens=1, logprobs=20``, prefix
caching on (xlikert's logits processor is loaded but idle: these requests do not ask).
With ``--probe M,K,N`` a float32 ``(M, K) x (K, N)`` matmul is timed in this process
before the first timed run and after every run (``probe_before``/``probe_after`` per
run), so each run can be divided by the machine's rate right beside it.

``sample``: the same, then the sampler a researcher with vLLM would run: for every
prompt one request with ``SamplingParams(n=N, max_tokens=1, temperature=1.0,
top_p=1.0, top_k=0)``, parsed like the transformers sampler (stripped text must be a
scale value, else a failure). vLLM fans ``n=N`` out into N child requests; a
request of ``n=1`` before it fills the prefix cache, so each child finds the
prompt's *full* KV blocks there and recomputes the rest (at least the last token:
the hit is capped at the prompt length - 1 and rounded down to whole blocks). Every
request's ``RequestOutput.num_cached_tokens`` is recorded (for ``n=N``, one child's
count: the children find the same blocks). A budget whose run would overrun
``--max-seconds`` stops early; the parent extrapolates and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from _common import MODEL, ProbedRuns, time_calls, timed
from _flops import matmul_probe
from _prompts import demo_prompts, prompt_pairs, target_major
from _vllm import KeepOpen


def open_engine(args):
    from xlikert.collect.backends.vllm import model as backend
    from xlikert.collect.options import CollectOptions

    spec = {"name": "m", "source": args.model, "backend": "vllm", "enforce_eager": True,
            "max_model_len": 2048, "gpu_memory_utilization": args.gpu_memory_utilization,
            "engine_args": {"block_size": args.block_size}}  # fmt: skip
    options = CollectOptions(scale=tuple(range(1, 8)), split_space=args.split_space)
    model, load_s = timed(lambda: backend.open(spec, options))
    requests: list[list[int]] = []  # (prompt tokens, tokens served from the prefix cache)
    generate = model.llm.generate

    def recorded(*a, **k):
        outs = generate(*a, **k)
        requests.extend([len(o.prompt_token_ids), int(o.num_cached_tokens or 0)] for o in outs)
        return outs

    model.llm.generate = recorded
    return spec, model, requests, load_s


def make_probe(args) -> ProbedRuns | None:
    """A float32 matmul rate measured beside each timed run (``--probe M,K,N``), or None."""
    if not args.probe:
        return None
    import torch

    shape = [int(x) for x in args.probe.split(",")]
    return ProbedRuns(matmul_probe("cpu", torch.float32, *shape, seconds=args.probe_seconds))


def timed_runs(args, fn, model, requests, probe: ProbedRuns | None) -> tuple[dict, object]:
    """``--repeat`` timed calls of ``fn``, the prefix cache reset and the recorded requests
    cleared before each (no hits carried over from the run before), each between two
    probes when there is one; the timings and the last call's result."""

    def reset():
        model.llm.reset_prefix_cache()
        requests.clear()

    if probe is None:
        seconds, result = time_calls(fn, args.repeat, reset=reset)
        return {"seconds": seconds}, result
    t = probe.run(fn, args.repeat, reset)
    return {"seconds": t["seconds"], "probe_before": t["probe_before"],
            "probe_after": t["probe_after"],
            "probe": f"vLLM child, float32 {args.probe.replace(',', 'x')}"}, t["result"]  # fmt: skip


def time_collect(args, spec, model, requests, prompts, probe=None) -> dict:
    from xlikert.collect import collect

    def run(p):
        return collect(p, [spec], progress=False, split_space=args.split_space,
                       loader=lambda *a: KeepOpen(model))  # fmt: skip

    run(prompts.isel(target=[0], item=[0]))  # warm-up
    timing, ds = timed_runs(args, lambda: run(prompts), model, requests, probe)
    vm = target_major(ds.valid_mass)
    return {"seconds": timing.pop("seconds"), "requests": list(requests),
            "valid_mass": vm.tolist(), "prompts": int(vm.size), **timing}  # fmt: skip


def rendered(model, prompts) -> list[list[int]]:
    """The prompts' token ids as xlikert sends them, in target-major order."""
    texts = [model.template.render(s, u) for s, u in prompt_pairs(prompts)]
    return [model.template.encode(t) for t in texts]


def time_raw(args, model, requests, prompts, probe=None) -> dict:
    """Raw vLLM: one request per prompt, max_tokens=1, logprobs=20, prefix caching on."""
    encoded = rendered(model, prompts)
    params = model._sampling(max_tokens=1, logprobs=20, detokenize=False)
    reqs = [model._tokens_prompt(prompt_token_ids=e) for e in encoded]
    model.llm.generate(reqs[:1], params, use_tqdm=False)  # warm-up
    timing, _ = timed_runs(
        args, lambda: model.llm.generate(reqs, params, use_tqdm=False), model, requests, probe
    )
    return {"seconds": timing.pop("seconds"), "requests": list(requests), "prompts": len(reqs),
            **timing}  # fmt: skip


def time_sampling(args, model, prompts) -> list[dict]:
    encoded = rendered(model, prompts)  # the same target-major order as the transformers sampler
    scale = {str(v) for v in range(1, 8)}
    limits = [float(x) for x in args.max_seconds.split(",")]
    prime = model._sampling(n=1, max_tokens=1, temperature=1.0, top_p=1.0, top_k=0)
    runs = []
    for n, limit in zip([int(b) for b in args.budgets.split(",")], limits, strict=True):
        # no per-request seed: vLLM's CPU sampler rejects seeded requests with n > 1
        params = model._sampling(n=n, max_tokens=1, temperature=1.0, top_p=1.0, top_k=0)
        per_call = max(1, 1000 // n)  # prompts per generate call: about 1000 sequences
        model.llm.reset_prefix_cache()
        answers, elapsed, calls, cached, primed = [], 0.0, 0, [], []
        for a in range(0, len(encoded), per_call):
            if calls and elapsed + elapsed / calls > limit:
                break
            reqs = [model._tokens_prompt(prompt_token_ids=e) for e in encoded[a : a + per_call]]
            t0 = time.perf_counter()
            # one request per prompt fills the prefix cache, so the N sequences of the
            # next request share its prefill (vLLM would otherwise schedule the N children
            # of a request in one step, each with its own prefill)
            first = model.llm.generate(reqs, prime, use_tqdm=False)
            outs = model.llm.generate(reqs, params, use_tqdm=False)
            elapsed += time.perf_counter() - t0
            calls += 1
            for o in outs:
                answers.append([int(c.text.strip()) if c.text.strip() in scale else 0
                                for c in o.outputs])  # fmt: skip
                cached.append([len(o.prompt_token_ids), int(o.num_cached_tokens or 0)])
            primed += [[len(o.prompt_token_ids), int(o.num_cached_tokens or 0)] for o in first]
        runs.append({"n": n, "measured_s": elapsed, "generate_calls": calls,
                     "prompts_done": len(answers), "prompts_total": len(encoded),
                     "answers": answers, "max_seconds": limit,
                     "prompt_tokens_and_cache_hits": cached,
                     "prime_prompt_tokens_and_cache_hits": primed})  # fmt: skip
        print(f"vllm n={n}: {len(answers)} prompts in {elapsed:.1f} s", flush=True)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["collect", "sample"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--targets", type=int, default=None)
    ap.add_argument("--items", type=int, default=None)
    ap.add_argument("--split-space", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--budgets", default="10,100,1000")
    ap.add_argument("--max-seconds", default="60,60,60")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.25)
    # vLLM caches prefixes in whole blocks; the CPU build's default block (128 tokens) is
    # longer than the demo prompts (about 64 tokens), so nothing would ever be shared
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--probe", default=None, help="M,K,N: a float32 matmul beside each run")
    ap.add_argument("--probe-seconds", type=float, default=1.0)
    args = ap.parse_args()

    import torch
    import vllm

    prompts = demo_prompts(args.targets, args.items)
    spec, model, requests, load_s = open_engine(args)
    try:
        out = {"vllm": vllm.__version__, "torch": torch.__version__,
               "torch_threads": torch.get_num_threads(), "load_s": load_s,
               "block_size": args.block_size,
               "engine": model.provenance()["engine"],
               "env": {k: v for k, v in os.environ.items() if k.startswith("VLLM_CPU")}}  # fmt: skip
        probe = make_probe(args)
        out["collect"] = time_collect(args, spec, model, requests, prompts, probe)
        out["raw"] = time_raw(args, model, requests, prompts, probe)
        if args.mode == "sample":
            out["sampling"] = time_sampling(args, model, prompts)
    finally:
        model.close()
    with open(args.out, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
