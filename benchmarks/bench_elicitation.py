"""Elicitation ``own_words``: the reply tree against sampling replies, at the same maximum
error on the PMF, in one run (issue 41).

One CETSCALE prompt (the demo experiment's target USA, item 1) on two built-in offline
models: Qwen2.5-Coder-0.5B-Instruct (low entropy: it writes a digit at once) and
SmolLM2-135M-Instruct (chatty: its replies wander before a digit, if they write one).
The measured quantity is the distribution of the first answer a reply sampled at
temperature ``T`` and top-p ``P`` writes within ``cap`` tokens, under the run's parsing
rule (``answer_parse_rule``: the first valid answer token of the reply).

* **xlikert** (``own_words``): ``collect()`` with the level ``own_words`` reads the reply
  tree best first, each prefix one forward pass from its parent's KV cache, until the
  certified bound ``|pmf - exact| <= U / (valid_mass + U)`` is at most ``tol`` or
  ``--max-passes`` prefixes were read (then the table gives the bound reached). Measured:
  passes (= tokens run, one per prefix), seconds of the ``collect()`` call (the model
  loaded once beforehand), the bound.
* **sampling** (QSTN's and EDSL's method): ``--samples`` replies generated in the same run
  with ``model.generate(do_sample=True)`` at the same ``T``, ``P`` (``top_k = 0``, no
  other logits processor), the same end-of-turn tokens and cap, in batches of
  ``--batch``, the prompt's KV cache computed once and shared (a prefix cache, as vLLM
  gives QSTN); each reply parsed with the same rule
  (:func:`xlikert.collect.elicitation.parse_answer`, on the same answer tokens) and the
  answers counted. Measured: replies, tokens generated (one forward pass each, until
  end of turn or the cap), seconds, the share of replies that write an answer.

**The same maximum error on the PMF.** From ``n`` answered replies the counted PMF
``p_hat`` has, by Hoeffding's inequality on each of the ``K = 7`` scores and a union
bound, ``P(max_y |p_hat_y - p_y| >= tol) <= 2 K exp(-2 n tol^2)``; so ``n = ceil(ln(2 K /
delta) / (2 tol^2))`` answered replies meet ``tol`` with probability ``1 - delta = 0.95``
(a distribution-free guarantee, as the tree's is, but at 95%, where the tree's holds
with certainty). A reply writes an answer with probability ``a`` (the share measured in
the sample), so ``N = n / a`` replies are drawn. The table also gives the sampler's best
case, ``n_normal = z^2 max_y p_y (1 - p_y) / tol^2`` with ``z = Phi^-1(1 - delta / (2 K))``
(normal approximation, Bonferroni, ``p`` the tree's PMF, which a sampler does not know).
The sampler's seconds and tokens at ``tol`` are ``N`` times the measured cost per reply:
*measured* where ``N <= --samples`` (the run drew that many; its counted PMF from the
first ``N`` replies is compared with the tree's), *projected* beyond.

**Each level's cost per cell** (a second table): ``collect()`` of ``first_token``,
``greedy``, ``stated`` and ``own_words`` on the same CETSCALE items (one cell each) on
the loaded model, timed per level after an untimed warm-up: greedy up to the largest cap,
stated up to ``--stated-tokens`` with the default instruction, own_words to the smallest
tol; the reply tokens, the stated replies' parse statuses and the tree's passes beside.

Usage::

    nice python benchmarks/bench_elicitation.py           # both models, caps 1 8, tol 0.1 0.03 0.01
    nice python benchmarks/bench_elicitation.py --quick   # SmolLM2, caps 1 4, tol 0.1
    python benchmarks/bench_elicitation.py --models qwen2.5-coder-0.5b-instruct --caps 8 --tols 0.05
    nice python benchmarks/bench_elicitation.py --levels-only --max-passes 64  # the level costs alone

Writes ``benchmarks/results/elicitation.json`` (``elicitation-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, load_average, load_record, machine, result_path, write_json
from _render import duration, fmt, table

#: Probability that the counted PMF's largest error is within tol (the sampler's n).
CONFIDENCE = 0.95
MODELS = ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct")
TARGET, ITEM = "USA", "1"


def answered_needed(tol: float, k: int, delta: float = 1 - CONFIDENCE) -> int:
    """Hoeffding and a union bound over ``k`` scores: the answered replies ``n`` for which
    ``P(max_y |p_hat_y - p_y| >= tol) <= 2 k exp(-2 n tol^2) <= delta``.

    Examples
    --------
    >>> answered_needed(0.1, 7)
    282
    """
    return math.ceil(math.log(2 * k / delta) / (2 * tol * tol))


def answered_best_case(p: np.ndarray, tol: float, delta: float = 1 - CONFIDENCE) -> int:
    """The sampler's best case: the normal approximation with the exact ``p`` and a
    Bonferroni correction over its scores."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - delta / (2 * p.size))
    return max(1, math.ceil(z * z * float((p * (1 - p)).max()) / tol**2))


def prompts(level: str = "own_words", items: tuple[str, ...] = (ITEM,)):
    """CETSCALE prompts (target USA), with the factor elicitation at ``level``."""
    from xlikert.design import load_experiment

    p = load_experiment("demo").build_prompts().sel(target=[TARGET], item=list(items))
    return p.expand_dims(elicitation=[level])


#: The levels whose cost per cell the second table sets side by side.
COST_LEVELS = ("first_token", "greedy", "stated", "own_words")


def run_level(lm, name: str, level: str, items: tuple[str, ...], settings: dict) -> dict[str, Any]:
    """One ``collect()`` of ``level`` on ``items`` (one cell each) on the loaded model,
    timed; the reply tokens (greedy, stated) and tree passes (own_words) it read."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel
    from xlikert.core.codecs import decode_token_ids

    t0 = time.perf_counter()
    ds = collect(
        prompts(level, items), [{"name": name, "source": name}], progress=False,
        loader=lambda s, options, probe=None: LocalModel(lm, options), **settings,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    c = ds.isel(model=0, target=0).sel(elicitation=level)
    replies = [decode_token_ids(str(x)).size for x in c.reply_token_ids.values if str(x)]
    row: dict[str, Any] = {"level": level, "cells": len(items), "seconds": seconds,
                           "seconds_per_cell": seconds / len(items)}  # fmt: skip
    if level in ("greedy", "stated"):
        row["reply_tokens_mean"] = float(np.mean(replies))
    if level == "greedy":
        row["answered"] = int(c.reply_answered.sum())
    if level == "stated":
        status = [str(x) for x in c.stated_status.values]
        row["statuses"] = {k: status.count(k) for k in sorted(set(status))}
    if level == "own_words":
        row["passes_mean"] = float(c.elicitation_passes.mean())
        row["tol_met"] = int(c.elicitation_tol_met.sum())
    return row


def level_costs(lm, name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each of :data:`COST_LEVELS` on the same items, warmed up once (untimed)."""
    settings = {"reply_tokens": max(args.caps), "own_words_tol": min(args.tols),
                "own_words_max_passes": args.max_passes, "stated_tokens": args.stated_tokens,
                "own_words_temperature": args.temperature, "own_words_top_p": args.top_p}  # fmt: skip
    items = tuple(str(i) for i in range(1, args.level_items + 1))
    rows = []
    for level in COST_LEVELS:
        run_level(lm, name, level, items[:1], {**settings, "reply_tokens": 2, "stated_tokens": 2,
                                               "own_words_max_passes": 2})  # fmt: skip
        rows.append(run_level(lm, name, level, items, settings))
        print(f"{name} {level}: {rows[-1]['seconds_per_cell']:.2f} s/cell", flush=True)
    return rows


def run_tree(lm, name: str, cap: int, tol: float, max_passes: int, opts: dict) -> dict[str, Any]:
    """One ``collect()`` of the level ``own_words`` on the loaded model, timed."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel
    from xlikert.core.codecs import decode_token_ids

    t0 = time.perf_counter()
    ds = collect(
        prompts(), [{"name": name, "source": name}], progress=False,
        loader=lambda s, options, probe=None: LocalModel(lm, options),
        reply_tokens=cap, own_words_tol=tol, own_words_max_passes=max_passes, **opts,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    c = ds.isel(model=0, target=0, item=0).sel(elicitation="own_words")
    return {
        "cap": cap,
        "tol": tol,
        "passes": int(c.elicitation_passes),
        "seconds": seconds,
        "bound": float(c.elicitation_error),
        "tol_met": bool(int(c.elicitation_tol_met)),
        "pmf": c.pmf.values.tolist(),
        "valid_mass": float(c.valid_mass),
        "no_answer_mass": float(c.no_answer_mass),
        "prompt_ids": decode_token_ids(str(c.prompt_token_ids.values)).tolist(),
    }


def sample_replies(lm, options, prompt_ids: list[int], cap: int, n: int, batch: int,
                   seed: int) -> dict[str, Any]:  # fmt: skip
    """``n`` replies sampled with ``generate`` (shared prompt cache), parsed, timed."""
    import torch
    from transformers import GenerationConfig

    from xlikert.collect.backends.transformers import LocalModel
    from xlikert.collect.elicitation import parse_answer
    from xlikert.collect.own_words import answer_token_scores

    model = LocalModel(lm, options)
    scores, stop = answer_token_scores(model), sorted(model.end_of_turn)
    hf, tok = lm.model, lm.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else stop[0]
    cfg = GenerationConfig(
        do_sample=True, temperature=options.own_words_temperature,
        top_p=options.own_words_top_p, top_k=0, max_new_tokens=cap, eos_token_id=stop,
        pad_token_id=pad,
    )  # fmt: skip
    torch.manual_seed(seed)
    ids = torch.tensor([prompt_ids])
    t0 = time.perf_counter()
    with torch.no_grad():  # the prompt but its last token, once: generate runs the last
        shared = hf(ids[:, :-1], use_cache=True).past_key_values
    prefill = time.perf_counter() - t0
    answers, tokens, seconds = [], [], []
    while len(answers) < n:
        b = min(batch, n - len(answers))
        cache = copy.deepcopy(shared)
        cache.batch_repeat_interleave(b)
        t = time.perf_counter()
        with torch.no_grad():
            out = hf.generate(ids.repeat(b, 1), attention_mask=torch.ones(b, ids.shape[1],
                              dtype=torch.long), cache=cache, generation_config=cfg)  # fmt: skip
        seconds.append(time.perf_counter() - t)
        for row in out[:, ids.shape[1] :].tolist():
            end = next((i for i, x in enumerate(row) if x in stop), None)
            reply = row[:end]
            tokens.append(len(row) if end is None else end + 1)  # the end token was run too
            found = parse_answer(reply, scores)
            answers.append(0 if found is None else found[1])
        print(f"    sampled {len(answers)}/{n} replies, {sum(seconds):.1f} s", flush=True)
    return {"answers": answers, "tokens": tokens, "prefill_s": prefill, "seconds": seconds,
            "batch": batch}  # fmt: skip


def compare(tree: dict, s: dict, best: dict, scale: list[int]) -> dict[str, Any]:
    """The sampler at the tree run's tol: N, its cost, and (measured) its actual error.

    Examples
    --------
    >>> s = {"answers": [1, 2] * 10, "tokens": [1] * 20, "prefill_s": 0.5,
    ...      "seconds": [1.0, 1.0], "batch": 10}
    >>> row = compare({"cap": 1, "tol": 0.5}, s, {"pmf": [0.5, 0.5], "bound": 0.0}, [1, 2])
    >>> row["replies_needed"], row["measured"], row["seconds"], row["tokens"]
    (9, True, 1.5, 9.0)
    >>> round(row["actual_error_vs_tree"], 4)
    0.0556
    """
    answers = np.asarray(s["answers"])
    drawn = answers.size
    share = float((answers > 0).mean())
    n = answered_needed(tree["tol"], len(scale))
    n_best = answered_best_case(np.asarray(best["pmf"]), tree["tol"])
    per_s = (s["prefill_s"] + sum(s["seconds"])) / drawn
    per_tok = float(np.mean(s["tokens"]))
    big = share <= 0
    N = math.inf if big else math.ceil(n / share)
    N_best = math.inf if big else math.ceil(n_best / share)
    row = {
        "cap": tree["cap"], "tol": tree["tol"], "answer_share": share,
        "answered_needed": n, "replies_needed": N, "answered_best_case": n_best,
        "replies_best_case": N_best, "seconds": N * per_s, "tokens": N * per_tok,
        "seconds_best_case": N_best * per_s, "tokens_best_case": N_best * per_tok,
        "measured": drawn >= N,
    }  # fmt: skip
    if drawn >= N:  # the first N replies drawn: their counted PMF against the tree's
        first = answers[: int(N)]
        got = first[first > 0]
        counted = np.array([(got == y).mean() for y in scale]) if got.size else None
        row["seconds"] = s["prefill_s"] + sum(
            t for t, lo in zip(s["seconds"], range(0, drawn, s["batch"]), strict=True) if lo < N
        )
        row["tokens"] = float(sum(s["tokens"][: int(N)]))
        if counted is not None:
            row["actual_error_vs_tree"] = float(np.abs(counted - np.asarray(best["pmf"])).max())
            row["tree_bound"] = best["bound"]
    return row


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="SmolLM2; caps 1 4; tol 0.1; 64 samples")
    ap.add_argument("--models", nargs="+", default=None, help="built-in zoo models")
    ap.add_argument("--caps", type=int, nargs="+", default=None, help="reply_tokens")
    ap.add_argument("--tols", type=float, nargs="+", default=None, help="certified errors")
    ap.add_argument("--max-passes", type=int, default=None, help="own_words_max_passes")
    ap.add_argument("--samples", type=int, default=None, help="replies sampled per cap")
    ap.add_argument("--batch", type=int, default=64, help="replies per generate call")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--stated-tokens", type=int, default=128, help="stated_tokens (level costs)")
    ap.add_argument("--level-items", type=int, default=None,
                    help="CETSCALE items (cells) per level in the level-cost table")  # fmt: skip
    ap.add_argument(
        "--levels-only",
        action="store_true",
        help="measure the level costs only, into the existing JSON (its own load)",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    q = args.quick
    args.models = args.models or (["smollm2-135m-instruct"] if q else list(MODELS))
    args.caps = args.caps or ([1, 4] if q else [1, 8])
    args.tols = sorted(args.tols or ([0.1] if q else [0.1, 0.03, 0.01]), reverse=True)
    args.max_passes = args.max_passes or (64 if q else 256)
    args.samples = args.samples or (64 if q else 256)
    args.level_items = args.level_items or (2 if q else 3)
    return args


def levels_only(args: argparse.Namespace) -> int:
    """The level costs alone, written into the existing JSON beside its tree runs, with
    the load and machine of their own run."""
    from xlikert.collect.backends.transformers import load_model

    path = result_path("elicitation", args.quick, args.out)
    d = json.loads(Path(path).read_text())
    load = load_average()
    costs = []
    for name in args.models:
        lm = load_model(name, list(range(1, 8)))
        costs.append({"model": name, "levels": level_costs(lm, name, args)})
        del lm
    d.update(level_costs=costs, level_settings=_level_settings(args),
             level_costs_run={"machine": machine(["torch", "transformers"]),
                              **load_record(load)})  # fmt: skip
    write_json(path, d)
    return 0


def _level_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"reply_tokens": max(args.caps), "own_words_tol": min(args.tols),
            "own_words_max_passes": args.max_passes, "stated_tokens": args.stated_tokens,
            "items": list(range(1, args.level_items + 1))}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import torch

    from xlikert.collect.backends.transformers import load_model
    from xlikert.collect.options import CollectOptions

    args = parse_args(argv)
    if args.levels_only:
        return levels_only(args)
    load = load_average()
    scale = list(range(1, 8))
    opts = {"own_words_temperature": args.temperature, "own_words_top_p": args.top_p}
    runs: list[dict[str, Any]] = []
    costs: list[dict[str, Any]] = []
    for name in args.models:
        lm = load_model(name, scale)
        options = CollectOptions(scale=scale, **opts)
        run_tree(lm, name, 1, 0.1, 1, opts)  # warm-up (the answer rule's first build), untimed
        costs.append({"model": name, "levels": level_costs(lm, name, args)})
        for cap in args.caps:
            trees: list[dict[str, Any]] = []
            for tol in args.tols:  # largest first
                spent = next((t for t in trees if not t["tol_met"]), None)
                if spent is not None:  # best first, deterministic: a smaller tol reads the
                    # same prefixes up to the same spent budget, the same run
                    trees.append({**spent, "tol": tol, "same_run_as_tol": spent["tol"]})
                    continue
                r = run_tree(lm, name, cap, tol, args.max_passes, opts)
                trees.append(r)
                print(f"{name} cap {cap} tol {tol:g}: tree {r['passes']} passes, "
                      f"{r['seconds']:.1f} s, bound {r['bound']:.2e} (met: {r['tol_met']})",
                      flush=True)  # fmt: skip
            best = min(trees, key=lambda r: r["bound"])
            s = sample_replies(lm, options, best["prompt_ids"], cap, args.samples, args.batch,
                               seed=0)  # fmt: skip
            rows = [compare(t, s, best, scale) for t in trees]
            for t in trees:
                t.pop("prompt_ids")
            runs.append({
                "model": name, "cap": cap, "tree": trees,
                "sampling": {"replies": len(s["answers"]), "batch": s["batch"],
                             "prefill_s": s["prefill_s"], "seconds": sum(s["seconds"]),
                             "tokens": int(sum(s["tokens"])),
                             "answer_share": rows[0]["answer_share"],
                             "counts": {str(y): int(np.sum(np.asarray(s["answers"]) == y))
                                        for y in [0, *scale]}},
                "compare": rows,
            })  # fmt: skip
        del lm
    out = {
        "benchmark": "elicitation",
        "quick": args.quick,
        "machine": machine(["torch", "transformers"]),
        "torch_threads": torch.get_num_threads(),
        "prompt": {"instrument": "cetscale", "target": TARGET, "item": ITEM},
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_passes": args.max_passes,
        "confidence": CONFIDENCE,
        "runs": runs,
        "level_costs": costs,
        "level_settings": _level_settings(args),
        **load_record(load),
    }
    print(format_table(
        [[r["model"], c["cap"], t["tol"], t["passes"], t["seconds"], t["bound"],
          c["replies_needed"], c["tokens"], c["seconds"], c["measured"]]
         for r in runs for t, c in zip(r["tree"], r["compare"], strict=True)],
        ["model", "cap", "tol", "passes", "s", "bound", "N replies", "tokens", "s", "measured"],
    ))  # fmt: skip
    write_json(result_path("elicitation", args.quick, args.out), out)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table on the benchmarks page.
TITLE = "Elicitation: own_words by the reply tree against sampling replies; each level's cost"

SHORT = {
    "qwen2.5-coder-0.5b-instruct": "Qwen2.5-Coder-0.5B",
    "smollm2-135m-instruct": "SmolLM2-135M",
}


def render(d: dict[str, Any]) -> list[str]:
    p = d["prompt"]
    out = [
        f"The first answer of a reply sampled at temperature {d['temperature']:g}, top-p "
        f"{d['top_p']:g}, within `cap` tokens (CETSCALE, target {p['target']}, item "
        f"{p['item']}). xlikert: `collect()` at the level `own_words`, the reply tree read "
        f"best first until its certified bound on the PMF is at most tol or "
        f"{d['max_passes']} passes were spent (then: **not met**, with the bound reached); "
        "a pass is one token run from its parent's KV cache. Sampling: replies generated "
        "in the same run (`generate(do_sample=True)`, the same sampler, stop tokens and "
        "cap, the prompt's cache shared), parsed with the same rule and counted; N "
        "replies = n / (share of replies that answer), n = ceil(ln(2K/δ) / (2 tol²)) "
        f"answered replies (Hoeffding, union over K = 7 scores, δ = "
        f"{1 - d['confidence']:.2g}: max error ≤ tol with probability "
        f"{d['confidence']:g}); tokens are those generated (one forward pass each). "
        "Sampling rows marked *projected* are N times the cost per reply measured on the "
        "replies drawn; *measured* rows drew N replies, and their counted PMF's largest "
        "error against the tree's (tightest run) is given where there are any. Best case: the normal "
        "approximation with the exact p (a sampler does not know it). Tree time is the "
        "whole `collect()` call (its checks and the file's assembly included); both sides "
        "include the prompt's one prefill." + _load(d),
        "",
    ]
    rows = []
    for r in d["runs"]:
        s = r["sampling"]
        for t, c in zip(r["tree"], r["compare"], strict=True):
            bound = fmt(t["bound"]) if t["tol_met"] else f"**not met**: {fmt(t['bound'])}"
            ratio = c["seconds"] / max(t["seconds"], 1e-9) if t["tol_met"] else None
            rows.append([
                SHORT.get(r["model"], r["model"]), r["cap"], fmt(t["tol"]),
                fmt(t["passes"]) + (f" (the run of tol {fmt(t['same_run_as_tol'])})"
                                    if t.get("same_run_as_tol") else ""),
                duration(t["seconds"]), bound, fmt(s["answer_share"]),
                fmt(c["replies_needed"]), fmt(c["replies_best_case"]), fmt(c["tokens"]),
                duration(c["seconds"]) if math.isfinite(c["seconds"]) else "–",
                "measured" if c["measured"] else "projected",
                fmt(c.get("actual_error_vs_tree")), fmt(ratio),
            ])  # fmt: skip
    header = ["model", "cap", "tol", "tree passes", "tree time", "tree bound", "answer share",
              "sampling N (95%)", "N best case", "sampled tokens", "sampling time", "sampling",
              "sampled error vs tree", "sampling / tree time"]  # fmt: skip
    if not any(c["measured"] for r in d["runs"] for c in r["compare"]):  # a column of dashes
        at = header.index("sampled error vs tree")
        header = header[:at] + header[at + 1 :]
        rows = [row[:at] + row[at + 1 :] for row in rows]
    out += table(header, rows)
    drawn = []
    for r in d["runs"]:
        s = r["sampling"]
        best = min(r["tree"], key=lambda t: t["bound"])
        got = sampled_error(s["counts"], best["pmf"], 1 - d["confidence"])
        drawn.append([
            SHORT.get(r["model"], r["model"]), r["cap"], s["replies"], s["tokens"],
            duration(s["prefill_s"] + s["seconds"]), got["answered"], fmt(got["error"]),
            fmt(best["bound"]), fmt(got["hoeffding"]),
        ])  # fmt: skip
    return [
        *out,
        *_level_costs(d),
        "The replies drawn in the run, their counted PMF against the tree's tightest run "
        "(its largest error; the tree's own bound beside it) and Hoeffding's 95% bound at the "
        "number of answered replies drawn:",
        "",
        *table(["model", "cap", "replies drawn", "tokens", "time", "answered",
                "counted PMF: max error vs tree", "tree bound", "Hoeffding 95% at n"],
               drawn),
    ]  # fmt: skip


def _level_costs(d: dict[str, Any]) -> list[str]:
    """The cost per cell of each level on the same items (absent from older runs)."""
    if not d.get("level_costs"):
        return []
    st = d["level_settings"]
    own = d.get("level_costs_run")  # measured in a run of their own (--levels-only)
    rows = []
    for r in d["level_costs"]:
        base = next((x for x in r["levels"] if x["level"] == "greedy"), None)
        for x in r["levels"]:
            what = {
                "greedy": f"{fmt(x.get('reply_tokens_mean'))} reply tokens, "
                f"{x.get('answered')} of {x['cells']} answered",
                "stated": f"{fmt(x.get('reply_tokens_mean'))} reply tokens; "
                + ", ".join(f"{k} {v}" for k, v in x.get("statuses", {}).items()),
                "own_words": f"{fmt(x.get('passes_mean'))} passes, tol met in "
                f"{x.get('tol_met')} of {x['cells']}",
            }.get(x["level"], "one pass")
            ratio = x["seconds_per_cell"] / base["seconds_per_cell"] if base else None
            rows.append([SHORT.get(r["model"], r["model"]), f"`{x['level']}`",
                         duration(x["seconds_per_cell"]), fmt(ratio), what])  # fmt: skip
    return [
        "Cost per cell of each level, on the same "
        f"{len(st['items'])} CETSCALE items (target {d['prompt']['target']}, items "
        f"{', '.join(map(str, st['items']))}; one `collect()` per level on the loaded model, "
        f"after an untimed warm-up): `greedy` replies up to {st['reply_tokens']} tokens, "
        f"`stated` up to {st['stated_tokens']} (the default instruction, which asks for a JSON "
        f"object), `own_words` to tol {fmt(st['own_words_tol'])} or "
        f"{st['own_words_max_passes']} passes. A stated cell costs its reply's length in "
        "greedy steps: as much as a greedy reply of that length." + _load(own or d, "the levels"),
        "",
        *table(["model", "level", "time per cell", "× greedy", "what was read"], rows),
        "",
    ]


def _load(d: dict[str, Any], what: str = "tree and sampling") -> str:
    """The machine's load during the run, where recorded."""
    before, after = d.get("load_average_before"), d.get("load_average_after")
    if not before or not after:
        return ""
    return (
        f" The machine was shared: 1-minute load average {before[0]:.1f} before the run and "
        f"{after[0]:.1f} after, on {d['machine'].get('cpu_count')} cores; {what} "
        "ran one after the other under that load."
    )


def sampled_error(counts: dict[str, int], tree_pmf: list[float], delta: float) -> dict[str, Any]:
    """The counted PMF of the answered replies against the tree's PMF: the largest error,
    and Hoeffding's bound with a union over the scores at that many answered replies.

    Examples
    --------
    >>> r = sampled_error({"0": 5, "1": 3, "2": 1}, [0.75, 0.25], 0.05)
    >>> r["answered"], round(r["error"], 3)
    (4, 0.0)
    """
    p = np.asarray(tree_pmf, dtype=float)
    n = np.array([counts.get(str(y + 1), 0) for y in range(p.size)], dtype=float)
    total = int(n.sum())
    if total == 0:
        return {"answered": 0, "error": None, "hoeffding": None}
    return {
        "answered": total,
        "error": float(np.abs(n / total - p).max()),
        "hoeffding": math.sqrt(math.log(2 * p.size / delta) / (2 * total)),
    }


if __name__ == "__main__":
    sys.exit(main())
