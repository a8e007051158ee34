"""Exact vs sampling: one forward pass per item against a Monte Carlo study.

The same condition set (the demo experiment: CETSCALE x 4 targets = 68
prompts, Qwen2.5-Coder-0.5B-Instruct, built-in offline model) is measured two
ways in one process:

* **exact** (xlikert): ``collect`` -- one forward pass per prompt, the full
  next-token PMF over the scale (the N -> infinity limit: SE 0);
* **sampling** (what a researcher would run): for every prompt
  ``model.generate(do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
  max_new_tokens=1, num_return_sequences=N)``, parse the digit, count
  failures, average the valid answers; N = 10, 100, 1000 per item. The N
  sequences go in ``generate`` calls of at most ``--chunk`` sequences each
  (memory); ``num_return_sequences`` replicates the prompt, so each sequence
  pays its own prefill, as it does in ``transformers``.

For each N the table gives the wall time, the seconds per sampled sequence,
the standard error the budget leaves -- analytic from the exact PMFs,
``SD(S)/sqrt(N)`` of the composite ``S`` (:func:`xlikert.sampling.standard_error`)
-- and, for the items actually sampled, the empirical SE (from the sample
variances) with z-scores of the sampled means against the exact means. A
second table turns this into the time needed to reach a given precision in
every condition.

A sampling budget whose full run would exceed its share of the time budget
(``--max-seconds``) is run on the first prompts only and extrapolated
linearly in (sequences x prompt tokens); the table and the JSON say so
("extrapolated from k of M prompts").

Usage::

    python benchmarks/bench_sampling.py            # Qwen2.5-0.5B, 68 prompts, ~5 min
    python benchmarks/bench_sampling.py --quick    # SmolLM2-135M, 6 prompts, < 1 min

Writes ``benchmarks/results/sampling.json`` (``sampling-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, result_path, write_json

PRECISION_TARGETS = (1.0, 0.1, 0.01)


def parse_answer(text: str, scale: set[str], one_token: bool) -> int | None:
    """The scale value a sampled answer gives, or None (a constraint failure).

    With one new token, the stripped token must be a scale value (as for the
    exact valid-token set); with more, the first word, trailing ``.,;:!)``
    removed.
    """
    s = text.strip()
    if not one_token:
        s = s.split()[0].rstrip(".,;:!)") if s else ""
    return int(s) if s in scale else None


def _split(n: int, chunk: int) -> list[int]:
    return [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])


def run_sampling(
    lm,
    encoded: list[list[int]],
    n: int,
    chunk: int,
    max_seconds: float,
    max_new_tokens: int,
    scale: set[str],
) -> dict[str, Any]:
    """Sample ``n`` answers per prompt, prompt by prompt, within ``max_seconds``.

    Stops before a ``generate`` call whose expected time would overrun the
    budget (after at least two calls, or one prompt in full); the time of the whole run is then
    extrapolated linearly in sequences x prompt tokens.
    """
    import torch

    model, tok = lm.model, lm.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    sizes = _split(n, chunk)
    min_calls = min(len(sizes), 2)  # at least one prompt in full when N <= 2 x chunk
    answers: list[list[int | None]] = []
    elapsed, calls, work_done = 0.0, 0, 0.0
    work_total = float(n * sum(len(e) for e in encoded))
    stopped = False
    for ids in encoded:
        x = torch.tensor([ids], device=lm.device)
        mask = torch.ones_like(x)
        got: list[int | None] = []
        for size in sizes:
            if calls >= min_calls and elapsed + elapsed / calls > max_seconds:
                stopped = True
                break
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(
                    x,
                    attention_mask=mask,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=size,
                    pad_token_id=pad,
                )
            texts = tok.batch_decode(out[:, x.shape[1] :], skip_special_tokens=True)
            elapsed += time.perf_counter() - t0
            calls += 1
            work_done += size * len(ids)
            got += [parse_answer(t, scale, max_new_tokens == 1) for t in texts]
        if got:
            answers.append(got)
        if stopped:
            break
    complete = [a for a in answers if len(a) == n]
    sequences = sum(len(a) for a in answers)
    full = len(complete) == len(encoded)
    return {
        "n": n,
        "answers": answers,
        "prompts_complete": len(complete),
        "prompts_total": len(encoded),
        "sequences_sampled": sequences,
        "generate_calls": calls,
        "measured_s": elapsed,
        "s_per_sequence": elapsed / max(sequences, 1),
        "total_s": elapsed if full else elapsed * work_total / work_done,
        "extrapolated": not full,
        "extrapolation": None
        if full
        else (
            f"extrapolated from {sequences} of {n * len(encoded)} sequences "
            f"({len(complete)} complete of {len(encoded)} prompts), "
            "linear in sequences x prompt tokens"
        ),
    }


def empirical(
    answers: list[list[int | None]], n: int, mean_k: np.ndarray, var_k: np.ndarray, n_items: int
) -> dict[str, Any]:
    """Empirical SE and z-scores of the sampled means (complete prompts only).

    ``mean_k``, ``var_k``: exact mean and variance of each prompt's answer
    (renormalised over the scale), in prompt order (target-major).
    """
    complete = [a for a in answers if len(a) == n]
    m = len(complete)
    if m == 0:
        return {"prompts": 0}
    fails = sum(v is None for a in complete for v in a)
    z, se_emp, se_ana, est = [], [], [], []
    for k, a in enumerate(complete):
        v = np.array([x for x in a if x is not None], dtype=float)
        if v.size < 2:
            se_emp.append(np.nan)
            est.append(np.nan if v.size == 0 else v.mean())
            continue
        se_emp.append(v.std(ddof=1) / math.sqrt(v.size))
        se_ana.append(math.sqrt(var_k[k] / v.size))
        est.append(v.mean())
        z.append((v.mean() - mean_k[k]) / se_ana[-1] if se_ana[-1] > 0 else np.nan)
    out: dict[str, Any] = {
        "prompts": m,
        "failure_rate_sampled": fails / (m * n),
        "item_se_empirical_mean": float(np.nanmean(se_emp)) if np.isfinite(se_emp).any() else None,
        "item_se_analytic_mean": float(np.mean(se_ana)) if se_ana else None,
        "item_mean_z2": float(np.nanmean(np.square(z))) if z else None,
    }
    # composite per condition where every item of the condition was sampled
    n_cond = m // n_items
    comp = []
    for c in range(n_cond):
        sl = slice(c * n_items, (c + 1) * n_items)
        e = np.array(est[sl])
        s = np.array(se_emp[sl])
        comp.append(
            {
                "estimate": float(e.sum()),
                "exact": float(mean_k[sl].sum()),
                "se_empirical": float(np.sqrt(np.square(s).sum())),
                "se_analytic": float(np.sqrt(var_k[sl].sum() / n)),
            }
        )
    if comp:
        out["composite"] = comp
        out["composite_se_empirical_mean"] = float(np.mean([c["se_empirical"] for c in comp]))
        out["composite_abs_error_mean"] = float(
            np.mean([abs(c["estimate"] - c["exact"]) for c in comp])
        )
        out["composite_mean_z2"] = float(
            np.mean([((c["estimate"] - c["exact"]) / c["se_analytic"]) ** 2 for c in comp])
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="SmolLM2-135M, 1 target x 6 items")
    ap.add_argument("--model", default=None, help="zoo name or model path")
    ap.add_argument("--targets", type=int, default=None, help="first T targets (default all)")
    ap.add_argument("--items", type=int, default=None, help="first K items (default all)")
    ap.add_argument("--budgets", default="10,100,1000", help="samples per item, comma separated")
    ap.add_argument(
        "--chunk", type=int, default=None, help="sequences per generate call (default 50)"
    )
    ap.add_argument(
        "--max-seconds",
        default=None,
        help="time budget per N (comma separated, one per budget); beyond it: extrapolate",
    )
    ap.add_argument("--max-new-tokens", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = ap.parse_args(argv)

    import torch

    import xlikert
    from xlikert.collect import collect
    from xlikert.collect.local import load_model
    from xlikert.design import load_experiment
    from xlikert.sampling import composite_moments, standard_error

    wall0 = time.perf_counter()
    model_name = args.model or (
        "smollm2-135m-instruct" if args.quick else "qwen2.5-coder-0.5b-instruct"
    )
    n_targets = args.targets or (1 if args.quick else None)
    n_items = args.items or (6 if args.quick else None)
    budgets = [int(b) for b in args.budgets.split(",")]
    chunk = args.chunk or 50
    if args.max_seconds:
        limits = [float(x) for x in args.max_seconds.split(",")]
        limits = (limits * len(budgets))[: len(budgets)] if len(limits) == 1 else limits
    else:
        limits = [7.0] * len(budgets) if args.quick else [240.0, 25.0, 25.0][: len(budgets)]
    if len(limits) != len(budgets):
        ap.error("--max-seconds needs one value, or one per budget")

    prompts = load_experiment("demo").build_prompts()
    if n_targets:
        prompts = prompts.isel(target=slice(n_targets))
    if n_items:
        prompts = prompts.isel(item=slice(n_items))
    n_t, n_k = prompts.sizes["target"], prompts.sizes["item"]
    scale = list(range(int(prompts.attrs["scale_min"]), int(prompts.attrs["scale_max"]) + 1))

    t0 = time.perf_counter()
    # the sampler's parser reads one token, so the exact side uses the same one-token rule
    lm = load_model(model_name, scale, split_space=False)
    load_s = time.perf_counter() - t0
    torch.manual_seed(args.seed)

    # ---- exact: one forward pass per prompt (warm-up on one prompt first)
    def exact(p):
        return collect(
            p,
            [{"name": model_name, "source": model_name}],
            progress=False,
            loader=lambda *a, **k: lm,
        )

    exact(prompts.isel(target=[0], item=[0]))
    t0 = time.perf_counter()
    ds = exact(prompts)
    exact_s = time.perf_counter() - t0
    pmf = ds.pmf.isel(model=0)  # (target, item, score), renormalised over the scale
    valid_mass = ds.valid_mass.isel(model=0)
    y = pmf.score.values.astype(float)
    mean_k = (pmf * y).sum("score").transpose("target", "item").values.ravel()
    var_k = ((pmf * y**2).sum("score").transpose("target", "item").values.ravel()) - mean_k**2
    var_k = np.clip(var_k, 0.0, None)
    vm_k = valid_mass.transpose("target", "item").values.ravel()
    sd_s = np.sqrt(composite_moments(pmf)["var"].values)  # per target
    se = standard_error(pmf, n=budgets)  # (target, n)

    # ---- sampling: prompts in the same order (target-major), rendered the same way
    texts = ds.prompt.isel(model=0).transpose("target", "item").values.ravel()
    encoded = [lm.encode(str(t)) for t in texts]
    tok_scale = {str(v) for v in scale}
    # warm-up: one short call with the same arguments as the timed ones
    run_sampling(lm, encoded[:1], 2, 2, 0.0, args.max_new_tokens, tok_scale)
    runs = []
    for n, limit in zip(budgets, limits, strict=True):
        r = run_sampling(lm, encoded, n, chunk, limit, args.max_new_tokens, tok_scale)
        answers = r.pop("answers")
        emp = empirical(answers, n, mean_k, var_k, n_k)
        # the raw answers (0 = failure), prompt by prompt in target-major order
        r["answers"] = [[0 if v is None else v for v in a] for a in answers]
        m = emp.get("prompts", 0)
        if m:
            emp["failure_rate_exact"] = float(1.0 - vm_k[:m].mean())
        se_n = se.sel(n=n)
        # failures discarded: item k keeps about N * valid_mass_k answers
        se_adj = np.sqrt((var_k / (n * np.maximum(vm_k, 1e-300))).reshape(n_t, n_k).sum(1))
        r.update(
            {
                "max_seconds": limit,
                "composite_se_analytic_mean": float(se_n.mean()),
                "composite_se_analytic_max": float(se_n.max()),
                "composite_se_analytic_failures_discarded_mean": float(se_adj.mean()),
                "empirical": emp,
                "time_ratio_exact_over_sampling": exact_s / r["total_s"],
                "speedup_exact_vs_sampling": r["total_s"] / exact_s,
            }
        )
        runs.append(r)
        print(
            f"N={n}: {r['measured_s']:.1f} s measured"
            + (f" ({r['extrapolation']})" if r["extrapolated"] else "")
        )

    # seconds per sampled sequence, from the largest budget measured
    s_per_seq = runs[-1]["s_per_sequence"]
    n_prompts = len(encoded)
    sd_max = float(sd_s.max())
    # per condition: Var of the composite estimate is sum_k var_k / (N * valid_mass_k)
    # when failures are discarded; N needed so that SE <= eps in every condition
    need_ideal = float(sd_s.max() ** 2)
    need_fail = float((var_k / np.maximum(vm_k, 1e-300)).reshape(n_t, n_k).sum(1).max())
    precision = []
    for eps in PRECISION_TARGETS:
        n_ideal = math.ceil(need_ideal / eps**2)
        n_req = math.ceil(need_fail / eps**2)
        t_req = n_req * n_prompts * s_per_seq
        precision.append(
            {
                "se_target": eps,
                "n_required_no_failures": n_ideal,
                "n_required": n_req,
                "sampling_s": t_req,
                "exact_s": exact_s,
                "speedup_exact_vs_sampling": t_req / exact_s,
                "time_ratio_exact_over_sampling": exact_s / t_req,
            }
        )

    result: dict[str, Any] = {
        "benchmark": "exact vs sampling",
        "quick": args.quick,
        "model": model_name,
        "load_s": load_s,
        "design": f"demo experiment (CETSCALE) x {n_t} targets x {n_k} items = {n_prompts} prompts",
        "prompts": n_prompts,
        "mean_prompt_tokens": float(np.mean([len(e) for e in encoded])),
        "generation": {
            "call": "model.generate(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, "
            f"max_new_tokens={args.max_new_tokens}, num_return_sequences<={chunk})",
            "parser": "stripped new token must be a scale value; else a failure"
            if args.max_new_tokens == 1
            else "first word, trailing .,;:!) removed, must be a scale value",
            "seed": args.seed,
        },
        "exact": {
            "s": exact_s,
            "prompts_per_s": n_prompts / exact_s,
            "se": 0.0,
            "failure_rate": float(1.0 - valid_mass.mean()),
            "composite_sd_mean": float(sd_s.mean()),
            "composite_sd_max": sd_max,
        },
        "sampling": runs,
        "s_per_sequence_used": s_per_seq,
        "precision": precision,
        "baseline": "sampling with transformers generate, same model and process",
        "ratios": "time_ratio_exact_over_sampling = xlikert / baseline; "
        "speedup_exact_vs_sampling = baseline / xlikert",
        "device": str(lm.device),
        "machine": machine(["torch", "transformers"]),
        "xlikert_version": xlikert.__version__,
    }

    ex_fail = result["exact"]["failure_rate"]
    rows = [["exact (xlikert)", "inf", exact_s, "-", 0.0, 0.0, "-", ex_fail, 1.0, ""]]
    for r in runs:
        emp = r["empirical"]
        rows.append(
            [
                "sampling",
                r["n"],
                r["total_s"],
                r["s_per_sequence"],
                r["composite_se_analytic_mean"],
                r["composite_se_analytic_failures_discarded_mean"],
                emp["composite_se_empirical_mean"]
                if emp.get("composite_se_empirical_mean") is not None
                else f"{emp['item_se_empirical_mean']:.3g} (item)"
                if emp.get("item_se_empirical_mean") is not None
                else "-",
                emp.get("failure_rate_sampled"),
                r["speedup_exact_vs_sampling"],
                r["extrapolation"] or "measured in full",
            ]
        )
    print(f"\n{model_name} on {lm.device}: {result['design']}")
    print(
        format_table(
            rows,
            [
                "method",
                "N/item",
                "time s",
                "s/seq",
                "SE analytic",
                "SE w/o failures",
                "SE empirical",
                "fail rate",
                "x exact",
                "note",
            ],
            "lrrrrrrrrl",
        )
    )
    print(
        f"\nSE: of the composite (sum of {n_k} items), mean over conditions; empirical: "
        "over complete conditions, else per item. exact failure rate "
        f"{result['exact']['failure_rate']:.3f}"
    )
    print(
        f"\ntime to reach SE <= eps in every condition (SD(S) max {sd_max:.2f}; "
        "N/item: failures discarded, so N draws leave about N x valid mass answers):"
    )
    print(
        format_table(
            [
                [
                    p["se_target"],
                    p["n_required_no_failures"],
                    p["n_required"],
                    p["sampling_s"],
                    exact_s,
                    p["speedup_exact_vs_sampling"],
                ]
                for p in precision
            ],
            ["SE target", "N (no failures)", "N/item", "sampling s", "exact s", "x exact"],
        )
    )
    result["wall_s"] = time.perf_counter() - wall0
    write_json(result_path("sampling", args.quick, args.out), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
