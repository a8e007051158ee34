"""Respondents at scale: each respondent's prefix computed once, memory flat in respondents.

Issue 42 ("Collection at that scale"): a persona per respondent, 25 items each, on
SmolLM2-135M-Instruct (built-in offline model), model load excluded, warm (one
respondent first: that call also makes the cache checks, once per loaded model and
path, so the timed runs do not include them):

* per-prompt loop: one prompt per forward pass, full logits at every position,
  softmax of the last row, the digit tokens gathered (``bench_collect.plain_loop``);
  timed on the first ``--plain-respondents`` respondents only (its prompts/s does not
  depend on how many respondents there are), stated in the JSON;
* xlikert ``collect`` (one-token rule, the loop's rule), the persona in the system
  prompt (a unit per respondent: its prefix up to where the items differ run once on
  the KV cache) and in the user turn (several respondents in a unit: the prompts
  grouped by the token prefix they share, each group's prefix run once,
  ``xlikert.collect.prefixes.prefix_groups``).

Each row's fraction of the useful-FLOP bound = useful FLOPs / time / matmul rate
(a float32 GEMM of the model's MLP shape probed before and after every timed run,
as ``bench_collect.py``); useful FLOPs count the prefix every prompt shares once,
each respondent's further shared prefix (persona and the text up to where the items
differ) once, each prompt's own tokens once and one lm_head row per prompt
(``_flops.span_flops``). Goals: >= 3x the per-prompt loop and >= 60% of the bound.

Peak memory: ``collect`` of N respondents x 25 items to a results file, each N in its
own child process, on a tiny random-weight model (2 layers, hidden 32, a character tokenizer: the
forward passes and the readout cost little, so the collection's own memory shows);
peak RSS is the child's ``ru_maxrss``, beside its RSS before ``collect`` (imports and
prompts built). Goal: peak flat from 100 to 1,000 respondents.

Usage::

    python benchmarks/bench_respondents.py --quick   # 8 respondents; RSS 20 vs 200
    python benchmarks/bench_respondents.py           # 500 respondents; RSS 100 vs 1,000
    python benchmarks/bench_respondents.py --respondents 100   # a smaller full run

Writes ``benchmarks/results/respondents.json`` (``respondents-quick.json``);
``--no-throughput`` on an existing file replaces only its memory runs (the throughput
rows stay; ``memory_command``, ``memory_load_average`` say how the memory was run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    QUICK_MODEL,
    ProbedRuns,
    format_table,
    load_average,
    load_record,
    machine,
    result_path,
    run_fractions,
    write_json,
)
from _flops import FlopCounter, lm_head_flops, matmul_probe, span_flops
from _render import fmt, goal, pct, spread, table

GOALS = {"speedup": 3.0, "fraction_of_useful_bound": 0.60, "rss_growth": 0.10}
PROBE_SECONDS = 1.0
N_ITEMS = 25
SYSTEM = "Answer each question with ONLY the number of one of its options."
#: The 25 statements, each rated 1..7 (strongly disagree .. strongly agree).
ITEMS = [
    "The government should spend more on public schools.",
    "Taxes on the highest incomes should be raised.",
    "Immigration is good for the economy of this country.",
    "The police should have more power to stop crime.",
    "Trade with other countries creates more jobs than it costs.",
    "Health insurance should be provided by the government.",
    "Religion should play a larger part in public life.",
    "The country should spend more on its armed forces.",
    "Climate change requires strong action now.",
    "Labor unions do more good than harm.",
    "Gun ownership should be more strictly controlled.",
    "The death penalty is justified for the worst crimes.",
    "Big companies have too much influence on politics.",
    "Welfare payments discourage people from working.",
    "Same-sex couples should be allowed to marry.",
    "Abortion should be legal in most cases.",
    "The minimum wage should be raised.",
    "Local communities should decide more for themselves.",
    "Newspapers and TV news can usually be trusted.",
    "Most politicians care what people like me think.",
    "Women and men have equal chances at work today.",
    "The country is on the right track.",
    "Science and technology make life better.",
    "People should be free to say offensive things.",
    "Voting is a duty of every citizen.",
]
OPTIONS = "1 = strongly disagree, 4 = neither, 7 = strongly agree"
PERSONA = "You are a {age}-year-old {sex} from {region} who works as {job}, with {educ}."
VALUES = {
    "sex": {0: "man", 1: "woman"},
    "region": dict(
        enumerate(["Ohio", "Texas", "Maine", "Oregon", "Georgia", "Iowa", "Nevada", "Vermont"])
    ),
    "job": dict(
        enumerate(
            [
                "a nurse",
                "a teacher",
                "an electrician",
                "a farmer",
                "a shop assistant",
                "an accountant",
                "a truck driver",
                "a software developer",
                "a cook",
                "a police officer",
            ]
        )
    ),
    "educ": dict(
        enumerate(
            [
                "no high school diploma",
                "a high school diploma",
                "some college",
                "a college degree",
                "a graduate degree",
            ]
        )
    ),
}


def respondent_table(n: int, seed: int = 42):
    """A synthetic table of ``n`` respondents (seeded): age, sex, region, job, education."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"age": rng.integers(18, 90, n), "sex": rng.integers(0, 2, n),
         "region": rng.integers(0, 8, n), "job": rng.integers(0, 10, n),
         "educ": rng.integers(0, 5, n)},
        index=[f"p{k:05d}" for k in range(n)],
    )  # fmt: skip


def respondent_prompts(n: int, where: str = "system"):
    """The prompts of ``n`` respondents x 25 items: personas from :func:`respondent_table`
    (``respondent_personas``), the persona in the system prompt or the user turn."""
    import xarray as xr

    from xlikert.design.respondents import respondent_personas

    p = respondent_personas(respondent_table(n), PERSONA, values=VALUES)
    persona = np.array(list(p.personas.values()))
    user = np.array([f"{it}\n{OPTIONS}\nAnswer:" for it in ITEMS])
    if where == "user":
        user_text = np.char.add(np.char.add(persona[:, None], "\n"), user[None, :])
        system = xr.DataArray(SYSTEM)
    else:
        user_text = np.broadcast_to(user, (len(persona), len(ITEMS)))
        system = xr.DataArray(np.char.add(persona, " " + SYSTEM), dims="respondent")
    ds = xr.Dataset(
        {"user": (("respondent", "item"), np.asarray(user_text, dtype=str))},
        coords={"respondent": p.levels, "item": [f"q{k + 1}" for k in range(len(ITEMS))]},
        attrs={"instrument": "bench_respondents", "scale_min": 1, "scale_max": 7},
    )
    ds["system"] = system
    return ds


# ----------------------------------------------------------------------------- FLOPs
def _common(rows: list[list[int]]) -> int:
    from xlikert.collect.prefixes import common_prefix

    return common_prefix(rows)


def useful_flops(cfg, by_respondent: list[list[list[int]]]) -> float:
    """The prefix every prompt shares once, each respondent's further shared prefix once,
    each prompt's own tokens once, one lm_head row per prompt."""
    everyone = _common([e for enc in by_respondent for e in enc])
    total = span_flops(cfg, 0, everyone)
    for enc in by_respondent:
        p = max(_common(enc), everyone)
        total += span_flops(cfg, everyone, p)
        for e in enc:
            total += span_flops(cfg, p, len(e)) + lm_head_flops(cfg)
    return total


# ----------------------------------------------------------------------------- throughput
def _xlikert(lm, prompts):
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel

    return collect(prompts, [{"name": "m", "source": QUICK_MODEL}], progress=False,
                   split_space=False, loader=lambda spec, o, probe=None: LocalModel(lm, o))  # fmt: skip


def throughput(args) -> dict[str, Any]:
    """The per-prompt loop and xlikert (persona in the system prompt, in the user turn),
    each timed run between two matmul probes, executed FLOPs counted."""
    import torch
    from _prompts import prompt_pairs
    from bench_collect import plain_loop

    from xlikert.collect.backends.transformers import load_model

    lm = load_model(QUICK_MODEL, range(1, 8), split_space=False)
    cfg = lm.model.config
    shape = (256, cfg.hidden_size, cfg.intermediate_size)
    layouts = {w: respondent_prompts(args.respondents, w) for w in args.layouts}
    for ds in layouts.values():  # warm-up: the cache checks of this loaded model
        _xlikert(lm, ds.isel(respondent=[0]))
    first = respondent_prompts(args.plain_respondents, "system")
    plain_pairs = prompt_pairs(first, ("respondent", "item"))
    plain_loop(lm, plain_pairs, 1)
    runs = ProbedRuns(matmul_probe("cpu", torch.float32, *shape, seconds=PROBE_SECONDS))
    counter = FlopCounter(lm.model)
    rows = []
    with counter:
        t = runs.run(lambda: plain_loop(lm, plain_pairs), args.repeat, counter.reset)
        rows.append(_row("per-prompt loop (1 prompt/forward, full logits)", "system",
                         t, counter.flops, len(plain_pairs), None))  # fmt: skip
        plain_rate = rows[0]["prompts_per_s"]
        for where, ds in layouts.items():
            t = runs.run(lambda ds=ds: _xlikert(lm, ds), args.repeat, counter.reset)
            res = t["result"]
            texts = np.asarray(res.prompt_text.sel(model="m").transpose("respondent", "item"))
            enc = [[lm.encode(str(x)) for x in row] for row in texts]
            useful = useful_flops(cfg, enc)
            row = _row("xlikert `collect`", where, t, counter.flops, int(texts.size), useful)
            row["speedup_vs_plain"] = row["prompts_per_s"] / plain_rate
            # the same ratio, each rate divided by the matmul probes beside its run (load moves)
            row["speedup_vs_plain_probe_normalised"] = row["speedup_vs_plain"] * (
                _probe(rows[0]) / _probe(row)
            )
            row["batch_size"] = res.likert.attrs["models"]["m"].get("batch_size")
            row["prompt_tokens_mean"] = float(np.mean([len(e) for r in enc for e in r]))
            row["_result"] = res
            rows.append(row)
    results = [r.pop("_result") for r in rows[1:]]
    out = {"rows": rows, "probes_gflops": [x / 1e9 for x in runs.probes],
           "prefix_cache_checks": sorted(lm.cache_checked)}  # fmt: skip
    if len(results) == 2:
        a, b = results
        out["max_abs_pmf_diff_system_vs_user_layout"] = float(
            np.max(np.abs(a.pmf.values - b.pmf.values))
        )
    return out


def _probe(row: dict[str, Any]) -> float:
    """The mean matmul rate probed beside a row's runs."""
    return statistics.mean([*row["probe_before"], *row["probe_after"]])


def _row(method, where, t, executed, n, useful) -> dict[str, Any]:
    row = {"method": method, "persona": where, "prompts": n, "seconds": t["seconds"],
           "median_s": t["median_s"], "prompts_per_s": n / t["median_s"],
           "executed_gflop_per_prompt": executed / n / 1e9,
           "probe_before": t["probe_before"], "probe_after": t["probe_after"]}  # fmt: skip
    if useful is not None:
        frac = run_fractions(useful, t["seconds"], t["probe_before"], t["probe_after"])
        row.update(useful_gflop_per_prompt=useful / n / 1e9, fraction_of_useful_bound_runs=frac,
                   fraction_of_useful_bound=statistics.median(frac))  # fmt: skip
    return row


# ----------------------------------------------------------------------------- memory
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_model(folder: Path) -> Path:
    """A random-weight Llama (2 layers, hidden 32) with a character tokenizer (about 100
    tokens, chat markers added), saved once: a forward pass and the full-vocabulary readout
    cost little, so the collection's own memory shows."""
    import string

    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if (folder / "config.json").exists():
        return folder
    special = ["<pad>", "<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    tk = Tokenizer(models.WordLevel({t: i for i, t in enumerate(special + chars)}, "<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>",
                                  pad_token="<pad>", unk_token="<unk>",
                                  additional_special_tokens=special[4:])  # fmt: skip
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=2048, pad_token_id=0, bos_token_id=2,
                      eos_token_id=3)  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def rss_child(n: int, folder: str, out: str) -> None:
    """In a child process: collect ``n`` respondents x 25 items on the tiny model; prints
    the RSS before collect and the peak (kB), and the seconds."""
    import resource
    import time

    import torch

    from xlikert.collect import collect

    torch.set_num_threads(1)  # a memory measurement: one thread, less contention on a shared box
    prompts = respondent_prompts(n, "system")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    collect(prompts, [{"name": "tiny", "source": folder}], out, progress=False)
    print(json.dumps({"respondents": n, "cells": int(prompts.user.size),
                      "rss_before_collect_kb": before, "seconds": time.perf_counter() - t0,
                      "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "file_mb": os.path.getsize(out) / 2**20}))  # fmt: skip


def memory(args) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = tiny_model(Path(tmp) / "tiny")
        for n in args.rss:
            cmd = [sys.executable, __file__, "--rss-child", str(n), "--tiny", str(folder),
                   "--rss-out", str(Path(tmp) / f"r{n}.nc")]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode:
                raise RuntimeError(f"RSS child for {n} respondents failed:\n{done.stderr[-3000:]}")
            rec = json.loads(done.stdout.strip().splitlines()[-1])
            print(rec)
            out.append(rec)
    return out


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="8 respondents, RSS 20 vs 200")
    ap.add_argument("--respondents", type=int, default=None, help="500 (quick: 8)")
    ap.add_argument("--plain-respondents", type=int, default=None,
                    help="respondents the per-prompt loop is timed on (2; quick 1)")  # fmt: skip
    ap.add_argument("--rss", type=int, nargs="+", default=None,
                    help="respondent counts of the memory runs (100 1000; quick 20 200)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per row (1)")
    ap.add_argument("--layouts", nargs="+", choices=["system", "user"], default=["system", "user"],
                    help="where the persona goes: the system prompt, the user turn (both)")  # fmt: skip
    ap.add_argument("--no-throughput", action="store_true", help="only the memory runs")
    ap.add_argument("--no-memory", action="store_true", help="only the throughput runs")
    ap.add_argument("--out", default=None)
    ap.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tiny", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rss-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.respondents = args.respondents or (8 if args.quick else 500)
    args.plain_respondents = args.plain_respondents or (1 if args.quick else 2)
    args.rss = args.rss or ([20, 200] if args.quick else [100, 1000])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rss_child is not None:
        rss_child(args.rss_child, args.tiny, args.rss_out)
        return 0
    load_before = load_average()
    path = result_path("respondents", args.quick, args.out)
    kept = json.loads(Path(path).read_text()) if Path(path).is_file() else {}  # the last runs
    res: dict[str, Any] = {"benchmark": "respondents", "quick": args.quick, "model": QUICK_MODEL,
                           "items": N_ITEMS, "respondents": args.respondents,
                           "plain_respondents": args.plain_respondents, "repeat": args.repeat,
                           "goals": GOALS}  # fmt: skip
    if not args.no_throughput:
        res.update(throughput(args))
        write_json(path, {**kept, **res})  # kept if memory fails
        head = ["method", "persona", "prompts", "prompts/s", "of useful bound", "speed-up"]
        print(format_table([[r["method"], r["persona"], r["prompts"], r["prompts_per_s"],
                             spread(r["fraction_of_useful_bound_runs"])
                             if "fraction_of_useful_bound_runs" in r else "-",
                             r.get("speedup_vs_plain", 1.0)] for r in res["rows"]], head))  # fmt: skip
    if args.no_throughput and kept:  # keep the throughput rows there
        mem = memory(args)
        res = kept
        res.update(memory=mem, memory_command=" ".join(["python", *sys.argv]),
                   memory_load_average={"before": load_before, "after": load_average()})  # fmt: skip
        write_json(path, res)
        return 0
    if args.no_memory and kept:  # keep the memory runs there
        res.update({k: kept[k] for k in ("memory", "memory_command", "memory_load_average")
                    if k in kept})  # fmt: skip
    else:
        res["memory"] = [] if args.no_memory else memory(args)
    res.update(load_record(load_before), machine=machine(["torch", "transformers"]))
    write_json(path, res)
    return 0


# ----------------------------------------------------------------------------- page
#: The heading of this benchmark's table on the benchmarks page.
TITLE = "Respondents: each respondent's prefix once; peak memory against respondents"


def render(d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if d.get("rows"):
        out += _throughput_intro(d)
        out += _throughput_table(d)
    mem = d.get("memory") or []
    if mem:
        out += _memory_table(d, mem)
    return out


def _throughput_intro(d: dict[str, Any]) -> list[str]:
    return [
        f"{d['model']}, {d['respondents']} respondents × {d['items']} items (a persona each, "
        "from a seeded synthetic table), one-token rule, model load excluded; the per-prompt "
        f"loop timed on {d['plain_respondents']} respondent(s) (its prompts/s does not depend "
        "on their number); median of "
        f"{d['repeat']} run(s). Useful FLOPs: the prefix every prompt shares once, each "
        "respondent's further shared prefix once, each prompt's own tokens once, one lm_head "
        "row per prompt; fraction of the bound = useful FLOPs / time / float32 matmul rate "
        "probed beside each run"
        + (
            f" ({fmt(min(d['probes_gflops']))}–{fmt(max(d['probes_gflops']))} GFLOP/s)"
            if d.get("probes_gflops")
            else ""
        )
        + f". 1-minute load average {d['load_average_before'][0]:.1f} before, "
        f"{d['load_average_after'][0]:.1f} after (a shared machine: timings have noise).",
        "",
    ]


def _throughput_table(d: dict[str, Any]) -> list[str]:
    g = d["goals"]
    out: list[str] = []
    if d.get("rows"):
        rows = []
        for r in d["rows"]:
            mark = ""
            if "speedup_vs_plain" in r:
                mark = (f"≥ {fmt(g['speedup'])}×: {goal(r['speedup_vs_plain'] >= g['speedup'])}; "
                        f"≥ {pct(g['fraction_of_useful_bound'])} of bound: "
                        f"{goal(r['fraction_of_useful_bound'] >= g['fraction_of_useful_bound'])}")  # fmt: skip
            rows.append([r["method"], f"in the {r['persona']} {'prompt' if r['persona'] == 'system' else 'turn'}",
                         r["prompts"], fmt(r["prompts_per_s"]),
                         fmt(r["executed_gflop_per_prompt"]),
                         fmt(r.get("useful_gflop_per_prompt")),
                         spread(r["fraction_of_useful_bound_runs"])
                         if "fraction_of_useful_bound_runs" in r else "–",
                         fmt(r.get("speedup_vs_plain", 1.0)),
                         fmt(r.get("speedup_vs_plain_probe_normalised", 1.0)), mark])  # fmt: skip
        out += table(["method", "persona", "prompts", "prompts/s", "executed GFLOP/prompt",
                      "useful GFLOP/prompt", "fraction of useful-FLOP bound",
                      "speed-up vs per-prompt loop", "speed-up, each rate over its probes",
                      "goal"], rows)  # fmt: skip
        diff = d.get("max_abs_pmf_diff_system_vs_user_layout")
        out += [
            ("The two layouts are different prompts (the persona moves), so their PMFs differ "
             f"by the prompt (max |Δpmf| {diff:.1e}), not by float noise; t"
             if diff is not None else "T")
            + "he equality of prefix-shared and per-prompt "
            "collection is tested (tests/collect/test_prefix_groups.py, "
            "tests/integration/test_respondents_smollm2.py).",
            "",
        ]  # fmt: skip
    return out


def _memory_table(d: dict[str, Any], mem: list[dict[str, Any]]) -> list[str]:
    g = d["goals"]
    out: list[str] = []
    if mem:
        lo, hi = mem[0], mem[-1]
        growth = hi["peak_kb"] / lo["peak_kb"] - 1
        out += table(
            ["respondents", "cells", "RSS before collect (MB)", "peak RSS (MB)", "seconds",
             "results file (MB)"],
            [[m["respondents"], m["cells"], fmt(m["rss_before_collect_kb"] / 1024),
              fmt(m["peak_kb"] / 1024), fmt(m["seconds"]), fmt(m["file_mb"])] for m in mem],
        )  # fmt: skip
        own = [(m["peak_kb"] - m["rss_before_collect_kb"]) / 1024 for m in (lo, hi)]
        per_cell = (own[1] - own[0]) * 1024 / max(1, hi["cells"] - lo["cells"])
        out += [
            f"Peak RSS (tiny random-weight model, character tokenizer; each run its own "
            f"process) grows {pct(growth)} from {lo['respondents']:,} to {hi['respondents']:,} "
            f"respondents: goal ≤ {pct(g['rss_growth'])} growth, "
            f"{goal(growth <= g['rss_growth'])}. Above the RSS before `collect`: "
            f"{fmt(own[0])} MB, then {fmt(own[1])} MB, about {fmt(per_cell)} kB per cell: "
            "each finished unit is saved to `<output>.partial/` as it completes and is not "
            "kept in memory; the results file is written block by block (about 2,048 cells "
            "at a time) from the saved units, and `collect` returns it opened lazily "
            "(xlikert/collect/run/stream.py). What still grows with the cells is held per "
            "cell by the run itself (its plan's prompts, its cells' keys, the units' cell "
            "indices), not the results."
            + (f" Memory runs: `{d['memory_command']}`." if d.get("memory_command") else ""),
            "",
        ]
    return out


if __name__ == "__main__":
    sys.exit(main())
