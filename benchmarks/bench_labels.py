"""Answers in words: the certified walk over the labels' spellings against codes.

For each case (a model and a label set) on the same items, in one child process per case
(the model loaded once, its load excluded), each reading timed on the items read as one
unit after the model was warmed on two other items with the same system prompt (so, as in
a study, the system prompt's cache is kept and each prompt's own tokens are run):

* the items answered with codes (``1 = Strongly disagree ... Respond with ONLY the
  number``), the one-token rule: seconds per prompt;
* the items answered with the labels, read by the walk at each ``answer_tol`` (1e-2 ...
  1e-8): seconds and passes (trie nodes read) per prompt, the certified width reached,
  whether it met the tolerance within ``answer_max_passes``;
* the exhaustive reading (``answer_tol = 0``) where it finishes within the budget;
* the canonical reading beside it: the mass of each label's canonical tokenization (what
  lm-evaluation-harness computes) and the valid mass it misses;
* peak RSS (``ru_maxrss``) after the codes and after each walk: the walk's peak above the
  codes' in the same process.

The 0-10 case (``qwen-ess``) is a 0-10 item read with codes of two digits (the
multi-token rule, by the walk) against the same item on 1-7.

Usage::

    python benchmarks/bench_labels.py                 # the default cases, 2 items each
    python benchmarks/bench_labels.py --cases all     # English 5 and 7 labels on three models too
    python benchmarks/bench_labels.py --cases qwen-en7 --tols 1e-4
    python benchmarks/bench_labels.py --cost          # the cost cases: 1e-4, three items

Each timing is stored with the machine's 1-minute load average before and after it
(``load_avg``): a figure taken beside other work is loose.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import json_line_child, machine, result_path, write_json
from _render import table

TITLE = "Answers in words: the certified walk over the labels' spellings against codes"

EN7 = ["Strongly disagree", "Disagree", "Somewhat disagree", "Neither agree nor disagree",
       "Somewhat agree", "Agree", "Strongly agree"]  # fmt: skip
EN5 = ["Strongly disagree", "Disagree", "Neither agree nor disagree", "Agree", "Strongly agree"]
ZH4 = ["非常不同意", "不同意", "同意", "非常同意"]
VOTE = ["Bill Clinton", "Bob Dole"]
QWEN, SMOL, GEMMA = "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct", "gemma-3-270m"

ITEMS_EN = [
    "Purchasing foreign-made products is un-American.",
    "Only those products that are unavailable in the U.S. should be imported.",
    "American people should always buy American-made products instead of imports.",
]
ITEMS_ZH = [
    "购买外国产品是不爱国的。",
    "只有国内买不到的产品才应该进口。",
    "中国人应该总是购买国产产品。",
]
ITEMS_VOTE = [
    "In the 1996 presidential election, who did you vote for?",
    "If the 1996 election were held today, who would you vote for?",
    "Which candidate did you prefer in 1996?",
]
ITEMS_ESS = [
    "Using this card, generally speaking, would you say that most people can be trusted?",
    "How satisfied are you with the present state of the economy in your country?",
    "How satisfied are you with your life as a whole nowadays?",
]

#: Items the model is warmed on before each timing (its first pass, the prefix-cache check
#: and the system prompt's cache, as in a study where units share it): not the timed ones,
#: for no run reads a prompt twice, and a prompt read before costs only its last token.
WARM = {
    "en": ["Foreign goods hurt local jobs.", "Buying imports is acceptable."],
    "zh": ["外国商品伤害本地就业。", "可以购买进口商品。"],
}

#: name -> (model, labels or None for a 0-10 item, items, language)
CASES: dict[str, tuple[str, list[str] | None, list[str], str]] = {
    "qwen-en7": (QWEN, EN7, ITEMS_EN, "en"),
    "qwen-zh4": (QWEN, ZH4, ITEMS_ZH, "zh"),
    "qwen-ess": (QWEN, None, ITEMS_ESS, "en"),
    "smol-vote": (SMOL, VOTE, ITEMS_VOTE, "en"),
    "qwen-en5": (QWEN, EN5, ITEMS_EN, "en"),
    "smol-en7": (SMOL, EN7, ITEMS_EN, "en"),
    "smol-en5": (SMOL, EN5, ITEMS_EN, "en"),
    "gemma-en7": (GEMMA, EN7, ITEMS_EN, "en"),
    "gemma-en5": (GEMMA, EN5, ITEMS_EN, "en"),
}
DEFAULT_CASES = ["qwen-en7", "qwen-zh4", "qwen-ess", "smol-vote"]
#: The cases of the issue's cost figures (``--cost``): seven English labels and four Chinese
#: ones against codes, and a 0-10 item (numbers of two digits, by the walk) against 1-7.
COST_CASES = ["qwen-en7", "qwen-zh4", "qwen-ess"]


def systems(labels: list[str] | None, lang: str) -> tuple[str, str, int]:
    """The system prompts for the labels and for the codes, and the number of points."""
    if labels is None:  # the ESS item: 0-10 codes against a 1-7 item
        head = "You are a respondent in a social survey. "
        return (head + "Answer on a scale from 0 to 10. Respond with ONLY the number.",
                head + "Answer on a scale from 1 to 7. Respond with ONLY the number.", 11)  # fmt: skip
    if lang == "zh":
        head = "你是一项市场调查的受访者。"
        shown = "，".join(f"{i} = {w}" for i, w in enumerate(labels, 1))
        return (head + "只回答以下之一：" + "、".join(labels) + "。",
                head + f"回答格式：{shown}。只回答数字。", len(labels))  # fmt: skip
    head = "You are a respondent in a survey. "
    shown = ", ".join(f"{i} = {w}" for i, w in enumerate(labels, 1))
    return (head + "Respond with ONLY one of: " + ", ".join(labels) + ".",
            head + f"Response format: {shown}. Respond with ONLY the number.", len(labels))  # fmt: skip


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(
    case: str, tols: list[float], n_items: int, budget: int, exhaustive: bool, floor: bool = False
) -> dict:
    """One case in this process: codes, then the walk at each tolerance; with ``floor``
    also the first round alone (``answer_tol = 1``: the root and the canonical spellings'
    nodes, the reading lm-evaluation-harness makes and every walk makes first) and, with
    no decoding grid (temperature 1 alone), the codes and the walk at each tolerance."""
    from xlikert.collect.backends.transformers import LocalModel, load_model
    from xlikert.collect.options import CollectOptions

    model, labels, items, lang = CASES[case]
    items = items[:n_items]
    t0 = time.perf_counter()
    lm = load_model(model, range(1, 8))
    load_s = time.perf_counter() - t0
    sys_labels, sys_codes, n = systems(labels, lang)

    loads, rounds = {}, {}

    def run(opts, system, name):
        m = LocalModel(lm, opts)
        texts = [m.template.render(system, u) for u in items]
        enc = [m.template.encode(t) for t in texts]
        warm = [m.template.render(system, u) for u in WARM[lang]]
        m.read_prompts(warm, [m.template.encode(t) for t in warm])  # WARM
        seen = []
        m.walk_progress = seen.append  # told once a round of each prompt's walk
        before = os.getloadavg()[0]
        start = time.perf_counter()
        out = m.read_prompts(texts, enc)
        loads[name] = [before, os.getloadavg()[0]]  # the machine's load, 1-min average
        rounds[name] = len(seen)
        return out, (time.perf_counter() - start) / len(items)

    codes_scale = tuple(range(1, 8)) if labels is None else tuple(range(1, n + 1))
    _, codes_s = run(CollectOptions(scale=codes_scale), sys_codes, "codes")
    rss_codes = _rss_mb()
    no_grid = {"temperatures": (1.0,), "top_ps": (1.0,)}
    plain_s = run(CollectOptions(scale=codes_scale, **no_grid), sys_codes, "codes")[1]
    rows = []
    readings = [("walk", tol, {}, codes_s) for tol in [*tols, *([0.0] if exhaustive else [])]]
    if floor:
        readings += [("first round", 1.0, {}, codes_s)]
        readings += [("walk, no grid", tol, no_grid, plain_s) for tol in tols]
    for reading, tol, grid, base_s in readings:
        if labels is None:  # the loaded rule reads 1-7: 0-10 as labels that are numbers
            opts = CollectOptions(scale=tuple(range(0, 11)), answer_tol=tol,
                                  answer_labels=tuple(str(v) for v in range(11)),
                                  answer_max_passes=budget, **grid)  # fmt: skip
        else:
            opts = CollectOptions(scale=tuple(range(1, n + 1)), answer_labels=tuple(labels),
                                  answer_tol=tol, answer_max_passes=budget, **grid)  # fmt: skip
        out, s = run(opts, sys_labels, "walk")
        rows.append({
            "reading": reading, "grid": not grid, "codes_seconds_per_prompt": base_s,
            "answer_tol": tol, "seconds_per_prompt": s, "x_codes": s / base_s,
            "passes_per_prompt": float(out["answer_passes"].mean()),
            "answer_error_max": float(out["answer_error"].max()),
            "tol_met": bool((out["answer_tol_met"] == 1).all()),
            "valid_mass": out["valid_mass"].tolist(),
            "valid_mass_upper": out["valid_mass_upper"].tolist(),
            "canonical_valid_mass": out["canonical_valid_mass"].tolist(),
            "pmf": out["pmf"].tolist(), "canonical_pmf": out["canonical_pmf"].tolist(),
            "peak_rss_mb": _rss_mb(), "peak_rss_above_codes_mb": _rss_mb() - rss_codes,
            "rounds_per_prompt": rounds["walk"] / len(items), "load_avg": loads["walk"],
        })  # fmt: skip
    return {"case": case, "model": model, "labels": labels, "items": items, "load_s": load_s,
            "codes_seconds_per_prompt": codes_s, "codes_peak_rss_mb": rss_codes,
            "codes_load_avg": loads["codes"], "codes_no_grid_seconds_per_prompt": plain_s,
            "budget": budget, "walk": rows}  # fmt: skip


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help="names, or 'all'")
    ap.add_argument("--tols", default="1e-2,1e-4,1e-6,1e-8")
    ap.add_argument("--items", type=int, default=2)
    ap.add_argument("--budget", type=int, default=4096, help="answer_max_passes")
    ap.add_argument("--exhaustive", default="qwen-zh4,smol-vote",
                    help="cases also read at answer_tol = 0 ('' for none)")  # fmt: skip
    ap.add_argument("--cost", action="store_true",
                    help="only the issue's cost cases (" + ",".join(COST_CASES) + ") at "
                    "answer_tol 1e-4, three items, no exhaustive reading, with the first "
                    "round alone and the readings with no decoding grid")  # fmt: skip
    ap.add_argument("--floor", action="store_true",
                    help="also the first round alone and the readings with no decoding grid")  # fmt: skip
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    return ap.parse_args()


def render(d: dict[str, Any]) -> list[str]:
    """The table of the benchmarks page from the JSON ``d``: per case, the codes, then the
    walk at each ``answer_tol`` (seconds and passes per prompt, the width reached, the valid
    mass the canonical spellings miss, the peak RSS above the codes); where measured, the
    first round alone, then the codes and the walk with no decoding grid."""
    rows = []
    for r in d["cases"]:
        rows.append([r["case"], "codes", "", f"{r['codes_seconds_per_prompt']:.2f}", "1.0", "",
                     "", "", f"{r['codes_peak_rss_mb']:.0f}", _load(r.get("codes_load_avg"))])  # fmt: skip
        for i, w in enumerate(r["walk"]):
            if not w.get("grid", True) and r["walk"][i - 1].get("grid", True):
                rows.append(["", "codes, no grid", "",
                             f"{r['codes_no_grid_seconds_per_prompt']:.2f}", "1.0", "", "", "",
                             "", ""])  # fmt: skip
            miss = sum(w["valid_mass"]) - sum(w["canonical_valid_mass"])
            rounds = w.get("rounds_per_prompt")
            rows.append([
                "", w.get("reading", "walk"), f"{w['answer_tol']:.0e}", f"{w['seconds_per_prompt']:.2f}",
                f"{w['x_codes']:.1f}", f"{w['passes_per_prompt']:.0f}"
                + ("" if rounds is None else f" / {rounds:.0f}"),
                f"{w['answer_error_max']:.1e}" + ("" if w["tol_met"] else " (not met)"),
                f"{miss / len(w['valid_mass']):.4f}", f"+{w['peak_rss_above_codes_mb']:.0f}",
                _load(w.get("load_avg")),
            ])  # fmt: skip
    header = ["case", "reading", "answer_tol", "s/prompt", "x codes", "passes / rounds",
              "width", "missed by canonical", "peak RSS MB", "load"]  # fmt: skip
    lines = table(header, rows)
    if d.get("failed"):
        lines += [f"failed: {', '.join(sorted(d['failed']))}", ""]
    return lines


def _load(avg: list[float] | None) -> str:
    """The machine's 1-minute load average before and after a timing ("" where not kept)."""
    return "" if not avg else f"{avg[0]:.1f}-{avg[1]:.1f}"


def main() -> int:
    args = parse_args()
    if args.cost:
        args.cases, args.tols, args.items, args.exhaustive = ",".join(COST_CASES), "1e-4", 3, ""
        args.floor = True
    tols = [float(t) for t in args.tols.split(",") if t]
    if args.child:
        print(json.dumps(child(args.child, tols, args.items, args.budget,
                               args.child in args.exhaustive.split(","), args.floor)))  # fmt: skip
        return 0
    cases = list(CASES) if args.cases == "all" else args.cases.split(",")
    results, failed = [], {}
    for case in cases:
        print(f"{case} ...", flush=True)
        cmd = [sys.executable, __file__, "--child", case, "--tols", args.tols, "--items",
               str(args.items), "--budget", str(args.budget), "--exhaustive", args.exhaustive,
               *(["--floor"] if args.floor else [])]  # fmt: skip
        rec, proc = json_line_child(cmd, env=dict(os.environ))
        if rec is None:
            failed[case] = proc.stderr[-2000:]
            print(proc.stderr[-2000:])
            continue
        results.append(rec)
        write_json(result_path("labels", False, args.out),  # after each case: kept if stopped
                   {"machine": machine(["torch", "transformers"]), "cases": results,
                    "failed": failed, "tols": tols, "items": args.items})  # fmt: skip
    print("\n".join(render({"cases": results, "failed": failed})))
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
