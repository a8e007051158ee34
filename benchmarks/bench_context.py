"""Sequential administration: forward passes and time against battery length and ``tol``,
beside sampling whole transcripts (the peers' method), in one run.

The first K items of CETSCALE (the demo experiment's target USA) are asked in one
conversation (:mod:`xlikert.collect.context`) on a built-in offline model
(SmolLM2-135M-Instruct by default), for several battery lengths K:

* **xlikert**: :func:`~xlikert.collect.context.administer` reads the answer-history
  tree, one forward pass per history, each from its parent's cached prefix: exact
  (``tol = 0``, every one of the ``1 + 7 + ... + 7^(K-1)`` histories, up to
  ``--exact-max`` items) and certified at each ``--tols`` (``|returned - exact| <= tol``
  on every marginal, the bound stored). Measured: passes, tokens run, seconds, the
  certified bound, and the actual error against the exact run where there is one.
* **sampling transcripts** (EDSL's survey memory, QSTN's sequential mode): ``--samples``
  whole conversations of K_max items are generated at temperature 1 (``generate``,
  ``top_k = 0``, ``top_p = 1``, ``--max-new-tokens``), in batches, each turn
  re-reading the whole conversation as a chat API call does; each reply is parsed
  (its first non-space character must be an answer label; any other reply is
  drawn again, so the transcripts follow the same distribution as the tree, whose
  histories continue through valid answers) and written into the conversation as
  the label, as xlikert writes it. Measured: seconds and forward passes (tokens
  generated, one pass each) per transcript of each length K (the first K turns),
  and the actual error of the counted marginals at that N.

**The same maximum error on the marginals.** Counting N transcripts gives every
marginal ``P(a_j = y)`` with the error ``|p_hat - p|``, random; the table gives the
N at which the largest of the ``K x 7`` errors is at most ``tol`` with probability
0.95: by the normal approximation with a Bonferroni correction over the ``K x 7``
marginals, ``N = z^2 max p (1 - p) / tol^2``, ``z = Phi^-1(1 - 0.05 / (2 K 7))``, with
``p`` the exact marginals (a sampler's best case: it does not know them). The time
and passes of those N transcripts are the measured per-transcript costs times N
(projected: N is far beyond what is sampled here; the JSON says so). xlikert's
bound holds with certainty, not with probability 0.95.

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
    """``n`` sampled conversations of every item of ``battery``, turn by turn in batches."""
    import torch

    from xlikert.collect.protocol import conversation_model

    conv, lm, tok = conversation_model(model), model.lm.model, model.tokenizer
    K, S = len(battery.questions), len(battery.replies)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    torch.manual_seed(seed)
    counts, passes = np.zeros((K, S)), np.zeros(K)
    seconds, redrawn, tokens = np.zeros(K), np.zeros(K, dtype=int), np.zeros(K)
    answers = np.zeros((n, K), dtype=int)
    for j in range(K):
        todo = list(range(n))
        while todo:
            take, todo = todo[:batch], todo[batch:]
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
            print(f"  sampled turn {j + 1}: {len(take)} replies in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
            tokens[j] += sum(len(x) for x in ids)
            for b, t in enumerate(take):
                new = out[b, width:].tolist()
                done = new.index(tok.eos_token_id) + 1 if tok.eos_token_id in new else len(new)
                passes[j] += done  # one forward pass per token generated
                reply = tok.decode(new[:done], skip_special_tokens=True).strip()
                label = next((a for a, r in enumerate(battery.replies) if reply[:1] == r), None)
                if label is None:  # not an answer: drawn again
                    redrawn[j] += 1
                    todo.append(t)
                    if redrawn[j] > 50 * n:
                        raise RuntimeError(f"item {j + 1}: over {50 * n} replies were no answer")
                else:
                    answers[t, j] = label
                    counts[j, label] += 1
    return {
        "n": n,
        "marginals": counts / n,
        "seconds_per_turn": seconds / n,
        "passes_per_turn": passes / n,
        "prompt_tokens_per_turn": tokens / n,
        "redrawn": redrawn.tolist(),
    }


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
    tree_rows, exact, pmfs = [], {}, []
    for k in args.items:
        for tol in [0.0] * (k <= args.exact_max) + list(args.tols):
            res, row = run_tree(model, head(full, k), tol, args.max_passes)
            pmfs.append(res.marginals()["pmf"])
            if tol == 0.0:
                exact[k] = pmfs[-1]
            elif k in exact:
                row["actual_error"] = float(np.abs(pmfs[-1] - exact[k]).max())
            tree_rows.append(row)
            print(f"tree K={k} tol={tol:g}: {row['passes']} passes, {row['seconds']:.1f} s, "
                  f"bound {row['certified_error']:.2e}", flush=True)  # fmt: skip
    t0 = time.perf_counter()
    s = sample_transcripts(model, full, args.samples, args.batch, args.max_new_tokens, seed=0)
    sample_wall = time.perf_counter() - t0
    rows = sampling_rows(tree_rows, pmfs, exact, s)
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
            "redrawn": s["redrawn"],
            "seconds_per_turn": s["seconds_per_turn"],
            "passes_per_turn": s["passes_per_turn"],
            "prompt_tokens_per_turn": s["prompt_tokens_per_turn"],
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


def sampling_rows(tree_rows, pmfs, exact, s) -> list[dict[str, Any]]:
    """Each certified tree run beside the transcripts that reach its tol with 95%: N from
    the exact marginals, else (no exact run) from the run's own, within tol of them."""
    out = []
    for row, pmf in zip(tree_rows, pmfs, strict=True):
        k, tol = row["items"], row["tol"]
        if tol == 0.0:
            continue
        n = transcripts_needed(exact.get(k, pmf), tol)
        per_s = float(s["seconds_per_turn"][:k].sum())
        per_pass = float(s["passes_per_turn"][:k].sum())
        measured = None
        if k in exact:
            measured = float(np.abs(s["marginals"][:k] - exact[k]).max())
        out.append({
            **{key: row[key] for key in ("items", "tol", "passes", "seconds", "certified_error")},
            "sampling_n": n,
            "sampling_p_from": "exact" if k in exact else f"this run (within {tol:g})",
            "sampling_passes": n * per_pass,
            "sampling_seconds": n * per_s,
            "sampling_seconds_per_transcript": per_s,
            "sampling_passes_per_transcript": per_pass,
            "sampled_error_at_n_measured": measured,
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
        f"xlikert reads the answer-history tree (certified: `|returned - exact| <= tol` on "
        f"every marginal); sampling: {s['n']} transcripts generated at temperature 1 in the "
        f"same run ({duration(s['wall_s'])}), their per-transcript cost times the N at which "
        f"the largest marginal error is within tol with probability {d['confidence']} "
        "(normal, Bonferroni, exact p: the sampler's best case; projected).",
        "",
    ]
    exact = [r for r in d["tree"] if r["tol"] == 0.0]
    out += table(
        ["items K", "exact: histories read", "passes", "tokens run", "time"],
        [[r["items"], r["histories"], r["passes"], r["tokens_run"], duration(r["seconds"])]
         for r in exact],
    )  # fmt: skip
    rows = []
    for r in d["compare"]:
        ratio = r["sampling_seconds"] / max(r["seconds"], 1e-9)
        rows.append([
            r["items"], fmt(r["tol"]), r["passes"], duration(r["seconds"]),
            fmt(r["certified_error"]), r["sampling_n"], fmt(r["sampling_passes"]),
            duration(r["sampling_seconds"]),
            fmt(ratio),
        ])  # fmt: skip
    return out + table(
        ["items K", "tol", "xlikert passes", "xlikert time", "certified error",
         "transcripts N (95%)", "sampling passes", "sampling time", "time ratio"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
