"""Sequential administration: forward passes and time against battery length and ``tol``,
beside sampling whole transcripts (the peers' method), in one run.

The first K items of CETSCALE (the demo experiment's target USA) are asked in one
conversation (:mod:`xlikert.collect.context`) on a built-in offline model
(SmolLM2-135M-Instruct by default), for several battery lengths K:

* **xlikert**: :func:`~xlikert.collect.context.administer` reads the answer-history
  tree, one forward pass per history, each from its parent's cached prefix: exact
  (``tol = 0``, every one of the ``1 + 7 + ... + 7^(K-1)`` histories, up to
  ``--exact-max`` items) and certified at each ``--tols`` (``|returned - exact| <= tol``
  on every marginal, the bound stored), best first in batches of up to 64 histories
  (``administer``'s default: a batch is read whole, so a short tree whose histories
  all come in one batch is read completely even where a smaller tol would allow less). Measured: passes, tokens run, seconds, the
  certified bound, and the actual error against the exact run where there is one.
* **sampling transcripts** (EDSL's survey memory, QSTN's sequential mode): ``--samples``
  whole conversations of K_max items are generated at temperature 1 (``generate``,
  ``top_k = 0``, ``top_p = 1``, ``--max-new-tokens``), in batches, each turn
  re-reading the whole conversation as a chat API call does (no prefix cache); a reply
  counts when its first non-space character is an answer label, and the transcript
  goes on with the label in the conversation, as xlikert writes it. Measured: the
  seconds and forward passes (tokens generated, one pass each) of one draw at each
  turn. A reply that is no answer has to be drawn again (the tree's histories go on
  through valid answers); rather than drawing until every reply is an answer (a model
  with a small valid mass, as SmolLM2-135M here, makes that slow), such a transcript
  goes on with a label drawn at random, and the draws an answer takes are counted
  exactly: ``E_h[1 / valid_mass(h)]`` over the histories before each item, from the
  tree (``draws_per_answer`` in the JSON).

**The same maximum error on the marginals.** Counting N transcripts gives every
marginal ``P(a_j = y)`` with the error ``|p_hat - p|``, random; the table gives the
N at which the largest of the ``K x 7`` errors is at most ``tol`` with probability
0.95: by the normal approximation with a Bonferroni correction over the ``K x 7``
marginals, ``N = z^2 max p (1 - p) / tol^2``, ``z = Phi^-1(1 - 0.05 / (2 K 7))``, with
``p`` the exact marginals (a sampler's best case: it does not know them). The time
and passes of those N transcripts are N times the draws per answer times the measured
cost of a draw, summed over the K turns (projected: N is far beyond what is sampled
here; the JSON says so). xlikert's bound holds with certainty, not with probability
0.95.

Usage::

    python benchmarks/bench_context.py            # K = 2, 3, 4; tol 3e-2, 1e-2; 8 transcripts
    python benchmarks/bench_context.py --quick    # K = 2; tol 5e-2; 4 transcripts
    python benchmarks/bench_context.py --items 2 3 4 5 --tols 1e-2 1e-3 --exact-max 4

Writes ``benchmarks/results/context.json`` (``context-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, load_average, load_record, machine, result_path, write_json
from _render import duration, fmt, table

#: Probability that the sampled marginals' largest error is within tol (the sampler's N).
CONFIDENCE = 0.95


def battery_of(n_items: int):
    """The first ``n_items`` CETSCALE items of the demo (target USA) as one battery."""
    from xlikert.collect.context import battery_from_prompts
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts().sel(target="USA")
    return battery_from_prompts(prompts.isel(item=slice(0, n_items)))


def head(battery, k: int):
    """The battery's first ``k`` items."""
    from xlikert.collect.context import Battery

    b = battery
    return Battery(b.system, b.questions[:k], b.replies, b.items[:k], b.scores)


def run_tree(model, battery, tol: float, max_passes: int) -> tuple[Any, dict[str, Any]]:
    """One :func:`administer` run and its row (the warning of a spent budget recorded)."""
    from xlikert.collect.context import administer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        res = administer(model, battery, tol=tol, max_passes=max_passes)
    m = res.marginals()
    return res, {
        "items": len(battery.questions),
        "tol": tol,
        "passes": res.passes,
        "histories": int(res.tree.parent.size),
        "tokens_run": res.info.get("tokens_run"),
        "seconds": res.seconds,
        "certified_error": float(m["error"].max()),
        "tol_met": res.tol_met,
        "budget_warning": [str(w.message) for w in caught] or None,
    }


def sample_transcripts(
    model, battery, n: int, batch: int, max_new_tokens: int, seed: int
) -> dict[str, Any]:
    """``n`` sampled conversations of every item of ``battery``, turn by turn in batches:
    one draw per transcript and turn, timed; a reply that is no answer is counted and its
    transcript goes on with a label drawn at random (what it costs to draw again is
    :func:`draws_per_answer` times this draw's cost)."""
    import torch

    from xlikert.collect.protocol import conversation_model

    conv, lm, tok = conversation_model(model), model.lm.model, model.tokenizer
    K, S = len(battery.questions), len(battery.replies)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    counts, passes = np.zeros((K, S)), np.zeros(K)
    seconds, tokens = np.zeros(K), np.zeros(K)
    answers = np.zeros((n, K), dtype=int)
    for j in range(K):
        for lo in range(0, n, batch):
            take = range(lo, min(n, lo + batch))
            ids = [
                conv.conversation(
                    battery.system, battery.turns(list(answers[t, :j])), battery.questions[j]
                )[1]
                for t in take
            ]
            width = max(len(x) for x in ids)
            rows = torch.tensor([[pad] * (width - len(x)) + list(x) for x in ids])
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
            t0 = time.perf_counter()
            with torch.no_grad():
                out = lm.generate(
                    rows, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                    top_p=1.0, max_new_tokens=max_new_tokens, pad_token_id=pad,
                )  # fmt: skip
            seconds[j] += time.perf_counter() - t0
            tokens[j] += sum(len(x) for x in ids)
            print(f"  sampled turn {j + 1}: {len(take)} replies in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
            for b, t in enumerate(take):
                new = out[b, width:].tolist()
                done = new.index(tok.eos_token_id) + 1 if tok.eos_token_id in new else len(new)
                passes[j] += done  # one forward pass per token generated
                reply = tok.decode(new[:done], skip_special_tokens=True).strip()
                label = next((a for a, r in enumerate(battery.replies) if reply[:1] == r), None)
                if label is not None:
                    counts[j, label] += 1
                answers[t, j] = label if label is not None else rng.integers(S)
    return {
        "n": n,
        "valid_replies": counts.sum(1).tolist(),
        "seconds_per_draw": (seconds / n).tolist(),
        "passes_per_draw": (passes / n).tolist(),
        "prompt_tokens_per_draw": (tokens / n).tolist(),
    }


def draws_per_answer(tree) -> np.ndarray:
    """Per item, the expected draws until a reply is an answer, ``E_h[1 / valid_mass(h)]``
    over the histories ``h`` before it (the tree's histories read, their probabilities
    renormalised over what was read: exact on an exact tree)."""
    prob = np.ones(tree.parent.size)
    for n in range(1, prob.size):  # parents come before their children
        prob[n] = prob[tree.parent[n]] * tree.pmf[tree.parent[n], tree.answer[n]]
    read = tree.read
    num = np.bincount(tree.item[read], prob[read] / tree.valid_mass[read], minlength=tree.n_items)
    return num / np.bincount(tree.item[read], prob[read], minlength=tree.n_items)


def transcripts_needed(p: np.ndarray, tol: float) -> int:
    """N for the largest error of the counted marginals ``p`` to be within ``tol`` with
    probability :data:`CONFIDENCE` (normal approximation, Bonferroni over the cells)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / (2 * p.size))
    return math.ceil(z * z * float((p * (1 - p)).max()) / tol**2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="K = 2; one tol; 4 transcripts")
    ap.add_argument("--model", default="smollm2-135m-instruct", help="a built-in zoo model")
    ap.add_argument("--items", type=int, nargs="+", default=None, help="battery lengths K")
    ap.add_argument("--tols", type=float, nargs="+", default=None, help="certified errors")
    ap.add_argument("--exact-max", type=int, default=None, help="longest battery read exactly")
    ap.add_argument("--max-passes", type=int, default=20_000, help="passes per tree run")
    ap.add_argument("--samples", type=int, default=None, help="transcripts sampled")
    ap.add_argument("--batch", type=int, default=8, help="transcripts per generate call")
    ap.add_argument("--max-new-tokens", type=int, default=4)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    quick = args.quick
    args.items = args.items or ([2] if quick else [2, 3, 4])
    args.tols = args.tols or ([5e-2] if quick else [3e-2, 1e-2])
    args.exact_max = args.exact_max or (2 if quick else 3)
    args.samples = args.samples or (4 if quick else 8)
    return args


def main(argv: list[str] | None = None) -> int:
    import xlikert.collect.backends.transformers as backend
    from xlikert.collect.options import CollectOptions

    args = parse_args(argv)
    load = load_average()
    model = backend.open(
        {"name": args.model, "source": args.model}, CollectOptions(scale=range(1, 8))
    )
    full = battery_of(max(args.items))
    tree_rows, exact, runs = [], {}, []
    for k in args.items:
        for tol in [0.0] * (k <= args.exact_max) + list(args.tols):
            res, row = run_tree(model, head(full, k), tol, args.max_passes)
            runs.append((res.marginals()["pmf"], draws_per_answer(res.tree)))
            pmfs = [r[0] for r in runs]
            if tol == 0.0:
                exact[k] = runs[-1]
            elif k in exact:
                row["actual_error"] = float(np.abs(pmfs[-1] - exact[k][0]).max())
            tree_rows.append(row)
            print(f"tree K={k} tol={tol:g}: {row['passes']} passes, {row['seconds']:.1f} s, "
                  f"bound {row['certified_error']:.2e}", flush=True)  # fmt: skip
    t0 = time.perf_counter()
    s = sample_transcripts(model, full, args.samples, args.batch, args.max_new_tokens, seed=0)
    sample_wall = time.perf_counter() - t0
    rows = sampling_rows(tree_rows, runs, exact, s)
    out = {
        "benchmark": "context",
        "quick": args.quick,
        "machine": machine(["torch", "transformers"]),
        "model": args.model,
        "battery": {"instrument": "cetscale", "target": "USA", "items": list(full.items)},
        "confidence": CONFIDENCE,
        "tree": tree_rows,
        "sampling": {
            "n": s["n"],
            "wall_s": sample_wall,
            "batch": args.batch,
            "max_new_tokens": args.max_new_tokens,
            "valid_replies": s["valid_replies"],
            "seconds_per_draw": s["seconds_per_draw"],
            "passes_per_draw": s["passes_per_draw"],
            "prompt_tokens_per_draw": s["prompt_tokens_per_draw"],
        },
        "compare": rows,
        **load_record(load),
    }
    print(format_table(
        [[r["items"], r["tol"], r["passes"], r["seconds"], r["certified_error"],
          r["sampling_n"], r["sampling_passes"], r["sampling_seconds"]] for r in rows],
        ["K", "tol", "passes", "s", "bound", "N transcripts", "passes", "s"],
    ))  # fmt: skip
    write_json(result_path("context", args.quick, args.out), out)
    return 0


def sampling_rows(tree_rows, runs, exact, s) -> list[dict[str, Any]]:
    """Each certified tree run beside the transcripts that reach its tol with 95%: N and
    the draws per answer from the exact tree, else (no exact run) from the run's own."""
    out = []
    for row, run in zip(tree_rows, runs, strict=True):
        k, tol = row["items"], row["tol"]
        if tol == 0.0:
            continue
        pmf, draws = exact.get(k, run)
        n = transcripts_needed(pmf, tol)
        per_s = float((draws * np.asarray(s["seconds_per_draw"][:k])).sum())
        per_pass = float((draws * np.asarray(s["passes_per_draw"][:k])).sum())
        out.append({
            **{key: row[key] for key in ("items", "tol", "passes", "seconds", "certified_error")},
            "sampling_n": n,
            "sampling_from": "the exact tree" if k in exact else f"this run's tree (tol {tol:g})",
            "draws_per_answer": draws.tolist(),
            "sampling_passes": n * per_pass,
            "sampling_seconds": n * per_s,
            "sampling_seconds_per_transcript": per_s,
            "sampling_passes_per_transcript": per_pass,
            "projected": True,
        })  # fmt: skip
    return out


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table on the benchmarks page.
TITLE = "Context: sequential administration against sampling transcripts"


def render(d: dict[str, Any]) -> list[str]:
    s = d["sampling"]
    out = [
        f"{d['model']}, the first CETSCALE items (target USA) in one conversation; "
        "xlikert reads the answer-history tree best first in batches of up to 64 histories "
        "(`administer`'s default; certified: `|returned - exact| <= tol` on every marginal); "
        f"sampling: {s['n']} transcripts generated at temperature 1 in the same run "
        f"({duration(s['wall_s'])}; each turn re-reads the whole conversation), the cost of "
        "one draw per turn measured; a transcript of K items costs the draws each answer "
        "takes (E[1 / valid mass] over the histories, from the tree) times that; N is where "
        f"the largest marginal error is within tol with probability {d['confidence']} "
        "(normal, Bonferroni, exact p: the sampler's best case). Projected from the "
        "measured costs.",
        "",
    ]
    exact = [r for r in d["tree"] if r["tol"] == 0.0]
    out += table(
        ["items K", "exact: histories read", "passes", "tokens run", "time"],
        [[r["items"], r["histories"], r["passes"], r["tokens_run"], duration(r["seconds"])]
         for r in exact],
    )  # fmt: skip
    actual = {(r["items"], r["tol"]): r.get("actual_error") for r in d["tree"]}
    rows = []
    for r in d["compare"]:
        ratio = r["sampling_seconds"] / max(r["seconds"], 1e-9)
        rows.append([
            r["items"], fmt(r["tol"]), r["passes"], duration(r["seconds"]),
            fmt(r["certified_error"]), fmt(actual.get((r["items"], r["tol"]))),
            r["sampling_n"], fmt(r["sampling_passes"]), duration(r["sampling_seconds"]),
            fmt(ratio),
        ])  # fmt: skip
    return out + table(
        ["items K", "tol", "xlikert passes", "xlikert time", "certified error",
         "actual error (vs exact)", "transcripts N (95%)", "sampling passes",
         "sampling time", "sampling / xlikert time"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
