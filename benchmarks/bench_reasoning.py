"""Reasoning mode: cost, and the sampling error of the thoughts against sampling answers too.

Qwen2.5-Coder-0.5B-Instruct (built-in offline model; no thinking template, so the
chain-of-thought framing of :mod:`xlikert.collect.reasoning`) on the demo
experiment's prompts (CETSCALE x 4 targets = 68 prompts):

* **thinking off**: ``collect`` as usual, the exact PMF right after the prompt;
* **reasoning, M = 16 traces** per prompt (``reasoning = {traces = 16,
  max_new_tokens = --max-new-tokens, seed = 0}``), timed, on every prompt;
* **M = 1 and M = 4**: timed on the first ``--timing-targets`` target(s) (17
  prompts each); their traces are, by the per-trace seeds, the first 1 and 4
  traces of the M = 16 run (the script counts how many are identical), so their
  estimates are taken from the M = 16 run's first traces on every prompt.

For every M and condition (target) the script reports the composite mean
``E[S]`` (sum over the 17 items of the item means) and two standard errors,
both from the same traces:

* **Rao--Blackwell** (what xlikert stores): ``pmf`` is the mean over traces of the
  exact answer PMF after each trace. SE = sqrt(sum over items of the sample
  variance over the 16 traces of the item mean, / M); at M = 16 it is also the
  run's own ``pmf``-based value.
* **sampling the answers as well**: for every trace one answer is drawn from its
  exact conditional PMF (numpy, seeded: statistically the model's own sampler
  restricted to the valid answers), the estimate is the mean of those answers;
  SE = sqrt(sum over items of the sample variance over the 16 traces of the
  drawn answer, / M).

``ratio`` = SE(answers sampled) / SE(Rao--Blackwell). The law of total variance
predicts SE(answers)^2 = SE(RB)^2 + E[within-trace variance] / M; the JSON
gives that prediction next to the measured value.

At M = 1 and M = 4 these SEs are **derived**, not measured: the variance comes from
all 16 traces and is divided by M (``se_derived`` in the JSON; † in the README
table), so the ratio is the M = 16 ratio at every M by construction. Only the
"own" SE (``se_rb_own_traces``) is computed from the first M traces alone.

The reasoning runs are resumable (``--workdir``); timings of interrupted
sessions are summed from a sidecar JSON.

Usage::

    python benchmarks/bench_reasoning.py            # 68 prompts, M = 16 (not run to the end here)
    python benchmarks/bench_reasoning.py --quick    # SmolLM2-135M, 1 target x 3 items, M = 4
    python benchmarks/bench_reasoning.py --targets 1 --items 6 --max-new-tokens 64
                                                    # a subset: the JSON says so (subset, design)

Writes ``benchmarks/results/reasoning.json`` (``reasoning-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, model_name, result_path, timed, write_json
from _render import duration, fmt, table


def _timed_collect(prompts, spec, lm, out: Path, chunk_size: int) -> tuple[Any, dict]:
    """Run (or resume, or reopen) a reasoning collection; seconds summed over sessions."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel
    from xlikert.collect.reasoning import check_reasoning

    side = out.with_name(out.name + ".timing.json")
    log = json.loads(side.read_text()) if side.exists() else {"sessions": []}
    session = {"seconds": 0.0}
    t0 = time.perf_counter()
    state = {"last": t0}

    def on_unit(done, total):
        now = time.perf_counter()
        session["seconds"] += now - state["last"]
        state["last"] = now
        side.write_text(json.dumps({"sessions": [*log["sessions"], session]}, indent=1))

    ds = collect(
        prompts,
        [spec],
        out,
        chunk_size=chunk_size,
        progress=True,
        on_unit=on_unit,
        loader=lambda s, options, probe=None: LocalModel(lm, options, check_reasoning(s)),
    )
    sessions = json.loads(side.read_text())["sessions"] if side.exists() else []
    seconds = float(sum(s["seconds"] for s in sessions))
    return ds, {"seconds": seconds, "sessions": len(sessions)}


def _item_means(pmf) -> np.ndarray:
    y = pmf["score"].values.astype(float)
    return (pmf * y).sum("score").values


def estimators(ds, ms: list[int], rng: np.random.Generator) -> dict[str, Any]:
    """SE of the composite mean per condition for the first M traces, both estimators."""
    tp = ds.trace_pmf.isel(model=0).transpose("target", "item", "trace", "score")
    y = tp.score.values.astype(float)
    p = np.clip(tp.values, 0.0, None)
    mu = p @ y  # (target, item, trace): exact conditional mean after each trace
    var_within = p @ y**2 - mu**2
    # one answer per trace drawn from its exact conditional PMF
    c = np.cumsum(p, -1)
    u = rng.random(mu.shape)[..., None] * c[..., -1:]
    answers = y[np.minimum((c <= u).sum(-1), len(y) - 1)]
    pool = mu.shape[-1]
    out: dict[str, Any] = {"targets": [str(t) for t in tp.target.values], "rows": []}
    s2_rb = mu.var(-1, ddof=1).sum(-1)  # (target,): sum over items of the between-trace var
    s2_ans = answers.var(-1, ddof=1).sum(-1)
    s2_pred = s2_rb + var_within.mean(-1).sum(-1)
    for m in ms:
        est_rb = mu[..., :m].mean(-1).sum(-1)
        est_ans = answers[..., :m].mean(-1).sum(-1)
        own = mu[..., :m].var(-1, ddof=1).sum(-1) / m if m > 1 else np.full(len(est_rb), np.nan)
        row = {
            "M": m,
            "composite_mean_rb": est_rb.tolist(),
            "composite_mean_answers": est_ans.tolist(),
            "se_rb": np.sqrt(s2_rb / m).tolist(),
            "se_answers": np.sqrt(s2_ans / m).tolist(),
            "se_answers_predicted": np.sqrt(s2_pred / m).tolist(),
            "se_rb_own_traces": np.sqrt(own).tolist(),
            # the SE columns divide the pool's variance by m: measured only at m == pool
            "se_derived": m != pool,
            "se_how": "measured from these traces"
            if m == pool
            else f"derived: the variance over all {pool} traces, / {m}",
        }
        for k in ("se_rb", "se_answers", "se_answers_predicted", "se_rb_own_traces"):
            row[k + "_mean"] = float(np.nanmean(row[k])) if np.isfinite(row[k]).any() else None
        row["ratio_answers_over_rb"] = row["se_answers_mean"] / row["se_rb_mean"]
        out["rows"].append(row)
    out["pool"] = pool
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options; ``model``, ``traces`` and ``max_new_tokens`` resolved for the mode."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="SmolLM2-135M, 1 target x 3 items, M=4")
    ap.add_argument("--model", default=None)
    ap.add_argument("--traces", type=int, default=None, help="M of the full run (default 16)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default 128 (quick: 32)")
    ap.add_argument("--targets", type=int, default=None, help="first N targets only (of 4)")
    ap.add_argument("--items", type=int, default=None, help="first N items only (of 17)")
    ap.add_argument("--timing-targets", type=int, default=1, help="targets timed at M=1, 4")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk-size", type=int, default=4, help="prompts per saved unit")
    ap.add_argument(
        "--workdir", type=Path, default=Path.home() / ".cache" / "xlikert" / "bench-reasoning"
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = ap.parse_args(argv)
    args.model = model_name(args.model, args.quick)
    args.traces = args.traces or (4 if args.quick else 16)
    args.max_new_tokens = args.max_new_tokens or (32 if args.quick else 128)
    return args


def select_prompts(args):
    """The prompts measured (quick: 1 target x 3 items; ``--targets``/``--items``: the first
    ones), the design's prompt count and whether these are a subset of it."""
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts()
    n_design = int(prompts.user.size)
    if args.quick:
        prompts = prompts.isel(target=[0], item=slice(3))
    if args.targets is not None:
        prompts = prompts.isel(target=slice(args.targets))
    if args.items is not None:
        prompts = prompts.isel(item=slice(args.items))
    return prompts, n_design, args.quick or int(prompts.user.size) < n_design


def thinking_off(lm, prompts, name: str, model_name: str):
    """The exact PMF right after the prompt, timed (warm-up on one prompt first)."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel

    def off(p):
        return collect(p, [{"name": name, "source": model_name}], progress=False,
                       loader=lambda s, o, probe=None: LocalModel(lm, o))  # fmt: skip

    off(prompts.isel(target=[0], item=[0]))
    return timed(lambda: off(prompts))


def trace_agreement(ds_m, ds_full, m: int) -> dict[str, float]:
    """How many of an M-trace run's traces equal the first M of the full run, and how far
    apart their trace PMFs are where they do."""
    from xlikert.collect.reasoning import trace_texts

    a = trace_texts(ds_m).isel(model=0).values
    b = trace_texts(ds_full).isel(model=0).sel(target=ds_m.target).isel(trace=slice(m)).values
    d = np.abs(
        ds_m.trace_pmf.isel(model=0).values
        - ds_full.trace_pmf.isel(model=0).sel(target=ds_m.target).isel(trace=slice(m)).values
    )
    return {"traces_identical_to_full_run": float((a == b).mean()),
            "max_abs_trace_pmf_diff_where_identical":
                float(np.nanmax(np.where((a == b)[..., None], d, np.nan)))}  # fmt: skip


def reasoning_runs(args, lm, prompts, subset: bool, ms: list[int]):
    """The full run (M = ``--traces``, every prompt) and the smaller M on the first
    ``--timing-targets`` target(s), each resumable in ``--workdir``: the full run's
    results and each M's timing (with its traces' agreement with the full run)."""
    name, M, max_new = args.model.split("/")[-1], args.traces, args.max_new_tokens
    args.workdir.mkdir(parents=True, exist_ok=True)

    def spec(m: int) -> dict[str, Any]:
        r = {"traces": m, "max_new_tokens": max_new, "seed": args.seed}
        return {"name": f"{name}-reasoning", "source": args.model, "reasoning": r}

    tag = f"{name}-T{max_new}-s{args.seed}" + ("-quick" if args.quick else "")
    if subset and not args.quick:
        tag += f"-t{prompts.sizes['target']}i{prompts.sizes['item']}"
    ds_full, tim = _timed_collect(
        prompts, spec(M), lm, args.workdir / f"{tag}-M{M}.nc", args.chunk_size
    )
    runs: dict[int, dict[str, Any]] = {M: {"prompts": int(prompts.user.size), **tim}}
    sub = prompts.isel(target=slice(args.timing_targets))
    for m in ms:
        if m == M:
            continue
        ds_m, tim = _timed_collect(
            sub, spec(m), lm, args.workdir / f"{tag}-M{m}-sub{args.timing_targets}.nc",
            args.chunk_size,
        )  # fmt: skip
        runs[m] = {"prompts": int(sub.user.size), **tim, **trace_agreement(ds_m, ds_full, m)}
    return ds_full, runs


def timing_rows(est, runs, M: int, n_prompts: int) -> list[dict[str, Any]]:
    """Each M's estimator row with its time (scaled to every prompt) and where its
    estimates come from."""
    rows = []
    for row in est["rows"]:
        m = row["M"]
        r = runs[m]
        per_prompt = r["seconds"] / r["prompts"] if r["prompts"] else None
        same = r.get("traces_identical_to_full_run", float("nan"))
        row.update(
            {
                "timed_prompts": r["prompts"],
                "timed_seconds": r["seconds"],
                "seconds_per_prompt": per_prompt,
                "seconds_all_prompts": per_prompt * n_prompts if per_prompt else None,
                "how_timed": "measured on every prompt"
                if r["prompts"] == n_prompts
                else f"measured on {r['prompts']} of {n_prompts} prompts, scaled linearly",
                "estimates_from": "this run"
                if m == M
                else f"the first {m} trace(s) of the M = {M} run (identical traces: "
                f"{100 * same:.0f}% of those timed)",
            }
        )
        rows.append(row)
    return rows


def reasoning_full(ds_full, runs, M: int) -> dict[str, Any]:
    """The full run's summary: time, failures, traces' lengths and ends, composite means."""
    from xlikert.collect.reasoning import trace_texts

    full = ds_full.isel(model=0)
    trunc = full.trace_truncated.values
    length = full.trace_length.values
    ends_marker = float(
        np.mean([t.endswith("Answer:") for t in trace_texts(ds_full).values.ravel()])
    )
    return {
        "M": M,
        "seconds": runs[M]["seconds"],
        "sessions": runs[M]["sessions"],
        "failure_rate_after_trace": float(1 - full.trace_valid_mass.mean()),
        "truncated_share": float((trunc == 1).mean()),
        "wrote_answer_prefix_share": ends_marker,
        "mean_trace_tokens": float(length[length >= 0].mean()),
        "composite_mean": (_item_means(full.pmf).sum(-1)).tolist(),
        "composite_se_from_pmf_se": np.sqrt(
            (((full.trace_pmf * full.score).sum("score")).var("trace", ddof=1) / M).sum("item")
        ).values.tolist(),
    }


def print_summary(result: dict[str, Any], e_off) -> None:
    rows, full = result["rows"], result["reasoning_full"]
    print(f"\n{result['model']}: {result['design']}; framing {result['framing']['framing']}, "
          f"max_new_tokens {result['reasoning']['max_new_tokens']}; thinking off "
          f"{result['thinking_off']['seconds']:.1f} s")  # fmt: skip
    table = [
        [r["M"], r["seconds_all_prompts"], r["seconds_per_prompt"], r["se_rb_mean"],
         r["se_answers_mean"], r["se_answers_predicted_mean"], r["ratio_answers_over_rb"],
         r["how_timed"]]
        for r in rows
    ]  # fmt: skip
    print(format_table(table, ["M", "time s (all)", "s/prompt", "SE RB", "SE answers",
                               "SE answers (predicted)", "ratio", "how timed"], "rrrrrrrl"))  # fmt: skip
    print(f"composite mean per target, thinking off vs reasoning (M = {full['M']}):")
    for t, a, b, s in zip(result["targets"], e_off, full["composite_mean"], rows[-1]["se_rb"],
                          strict=True):  # fmt: skip
        print(f"  {t:8s} off {a:6.2f}   reasoning {b:6.2f} +- {s:.2f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    import xlikert
    from xlikert.collect.backends.transformers import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    wall0 = time.perf_counter()
    M, ms = args.traces, sorted({1, min(4, args.traces), args.traces})
    prompts, n_design, subset = select_prompts(args)
    n_prompts = int(prompts.user.size)
    lm, load_s = timed(lambda: load_model(args.model, range(1, 8)))
    name = args.model.split("/")[-1]
    ds_off, off_s = thinking_off(lm, prompts, name, args.model)
    ds_full, runs = reasoning_runs(args, lm, prompts, subset, ms)
    est = estimators(ds_full, ms, np.random.default_rng(args.seed))
    e_off = _item_means(ds_off.pmf.isel(model=0)).sum(-1)  # (target,)
    attrs = ds_full.likert.attrs["models"][f"{name}-reasoning"]
    result: dict[str, Any] = {
        "benchmark": "reasoning mode",
        "quick": args.quick,
        "model": args.model,
        "framing": attrs["reasoning_format"],
        "reasoning": attrs["reasoning"],
        "design": f"demo experiment (CETSCALE) x {prompts.sizes['target']} targets x "
        f"{prompts.sizes['item']} items = {n_prompts} prompts",
        "prompts": n_prompts,
        "design_prompts": n_design,
        "subset": subset,
        "command": " ".join(["python benchmarks/bench_reasoning.py", *(argv or sys.argv[1:])]),
        "load_s": load_s,
        "thinking_off": {
            "seconds": off_s,
            "composite_mean": e_off.tolist(),
            "failure_rate": float(1 - ds_off.valid_mass.mean()),
        },
        "reasoning_full": reasoning_full(ds_full, runs, M),
        "rows": timing_rows(est, runs, M, n_prompts),
        "targets": est["targets"],
        "machine": machine(["torch", "transformers"]),
        "torch_threads": torch.get_num_threads(),
        "xlikert_version": xlikert.__version__,
        "answer_sampling": "one answer per trace drawn from its exact conditional PMF (numpy "
        f"default_rng({args.seed})), i.e. the model's sampler restricted to the valid answers",
    }
    result["wall_s"] = time.perf_counter() - wall0
    print_summary(result, e_off)
    write_json(result_path("reasoning", args.quick, args.out), result)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Reasoning mode"


def _intro(d: dict[str, Any]) -> list[str]:
    """The subset (if one), the model, framing and traces, and what the SE columns mean."""
    r, off, full = d["reasoning"], d["thinking_off"], d["reasoning_full"]
    fr = d["framing"]
    out = []
    if d.get("subset") and not d.get("quick"):
        out += [
            f"**A subset**: {d['prompts']} of the demo's {d.get('design_prompts', 68)} prompts "
            "(the full run did not fit the time on this machine); every number below is for "
            "these prompts only.",
            "",
        ]
    out += [
        f"{d['model']}, {d['design']}; {fr['framing']} framing (instruction appended to the user "
        f"message, turn opened with `{fr.get('prefill', '')}`, trace ends at "
        f"`{fr['end_marker']}`, else closed with `{fr['closing_forced']!r}`); traces sampled at "
        f"temperature {r['temperature']:g}, top-p {r['top_p']:g}, max_new_tokens "
        f"{r['max_new_tokens']}, seed {r['seed']}; {d.get('torch_threads', '?')} torch "
        f"thread(s). Thinking off (exact, one pass per prompt): {fmt(off['seconds'])} s. "
        f"With M = {full['M']}: {100 * full['truncated_share']:.0f}% of the traces cut at "
        f"max_new_tokens, {fmt(full['mean_trace_tokens'])} tokens on average, "
        f"{100 * full['wrote_answer_prefix_share']:.0f}% ended by the model writing the answer "
        f"prefix; failure rate after the trace {fmt(full['failure_rate_after_trace'])} "
        f"(thinking off {fmt(off['failure_rate'])}).",
        "",
        "SE = standard error of the composite mean E[S] (sum of the item means) per target, "
        "mean over the targets, both from the same traces: *thoughts sampled* = "
        "xlikert's estimate (the mean over M traces of the exact answer PMF after each), SE = "
        f"sqrt(sum over items of the sample variance over the {full['M']} traces of the "
        "item's conditional mean, / M); *answers sampled too* = one answer drawn per trace "
        "from its exact conditional PMF and averaged, SE = the same with the drawn answers; "
        "*predicted* = the law of total variance from the same traces (between-trace + mean "
        "within-trace variance); *own* = the SE the M-trace file itself states (its pmf_se, "
        "from its own M traces; none for M = 1).",
        "",
    ]
    return out


def _table(d: dict[str, Any]) -> list[str]:
    """One row per M, the derived SEs marked † and explained below."""
    off, full = d["thinking_off"], d["reasoning_full"]
    rows, derived = [], []
    for row in d["rows"]:
        secs = row["seconds_all_prompts"]
        # files written before "se_derived": the SE columns always came from the full run
        is_derived = row.get("se_derived", row["M"] != full["M"])
        mark = " †" if is_derived else ""
        if is_derived:
            derived.append(row["M"])
        rows.append(
            [
                fmt(row["M"]),
                fmt(secs) + (f" ({duration(secs)})" if secs and secs >= 120 else ""),
                fmt(row["seconds_per_prompt"]),
                fmt(secs / off["seconds"]) if secs else "–",
                fmt(row["se_rb_mean"]) + mark,
                fmt(row["se_answers_mean"]) + mark,
                fmt(row["ratio_answers_over_rb"]) + mark,
                fmt(row["se_answers_predicted_mean"]) + mark,
                fmt(row.get("se_rb_own_traces_mean")),
                f"{row['how_timed']}; estimates: {row['estimates_from']}",
            ]
        )
    out = table(
        ["M", f"time s ({d['prompts']} prompts)", "s per prompt", "× thinking off",
         "SE, thoughts sampled (xlikert)", "SE, answers sampled too", "ratio",
         "SE, answers sampled too (predicted)", "SE, own", "how timed"],
        rows,
    )  # fmt: skip
    if derived:
        ms = " and ".join(f"M = {m}" for m in derived)
        out += [
            f"† Derived, not measured: at {ms} the SE columns are the variance over all "
            f"{full['M']} traces of the M = {full['M']} run divided by M, so their ratio is the "
            f"M = {full['M']} ratio by construction. Only *SE, own* is measured from the first "
            "M traces alone.",
            "",
        ]
    return out


def render(d: dict[str, Any]) -> list[str]:
    off, full = d["thinking_off"], d["reasoning_full"]
    out = [*_intro(d), *_table(d)]
    se = d["rows"][-1]["se_rb"]
    out.append(
        "Composite mean per target, thinking off (exact) vs with thinking (M = "
        f"{full['M']}, ± SE): "
        + "; ".join(
            f"{t} {a:.2f} vs {b:.2f} ± {s:.2f}"
            for t, a, b, s in zip(
                d["targets"], off["composite_mean"], full["composite_mean"], se, strict=True
            )
        )
        + "."
    )
    out.append("")
    return out


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
