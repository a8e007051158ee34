"""Benchmark: the valid sets of the numeral rule on a 151,643-token vocabulary (issue 40).

Times, on Qwen2.5-Coder-0.5B-Instruct's tokenizer (the offline zoo's), what the answer
rules cost before any forward pass: the tokenizer's bytes
(:func:`xlikert.collect.answers.vocabulary.vocabulary`, once per tokenizer), the index of every
token that is a number in some script (:func:`~xlikert.collect.answers.vocabulary.numeral_index`)
and the answer rule of four label sets (ASCII 1..7, full-width, Arabic-Indic, 0..10);
then the same again, which the per-tokenizer cache answers. No model is loaded: the
rule costs no forward pass.

Usage::

    python benchmarks/bench_valid_sets.py           # about half a minute
    python benchmarks/bench_valid_sets.py --quick   # the same (no smaller run exists)

Writes ``benchmarks/results/valid_sets.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, result_path, write_json
from _render import fmt, table

LABELS = {
    "ascii 1..7": (range(1, 8), None),
    "fullwidth 1..7": (range(1, 8), {y: chr(0xFF10 + y) for y in range(1, 8)}),
    "arabic-indic 1..7": (range(1, 8), {y: chr(0x0660 + y) for y in range(1, 8)}),
    "ascii 0..10": (range(0, 11), None),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="the same run (it is short)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    parse_args(argv)
    from transformers import AutoTokenizer

    from xlikert.collect.answers.spellings import answer_rule
    from xlikert.collect.answers.vocabulary import numeral_index, vocabulary
    from xlikert.testing import engines

    tok = AutoTokenizer.from_pretrained(engines.zoo_folder("qwen2.5-coder-0.5b-instruct"))
    rows = []
    for attempt in ("first", "again (cached)"):
        t0 = time.perf_counter()
        vocab = vocabulary(tok)
        t1 = time.perf_counter()
        index = numeral_index(tok)
        t2 = time.perf_counter()
        row = {"call": attempt, "vocabulary_s": t1 - t0, "numeral_index_s": t2 - t1}
        for name, (scale, labels) in LABELS.items():
            t = time.perf_counter()
            _, ans, _ = answer_rule(tok, scale, labels=labels)
            row[f"rule {name} s"] = time.perf_counter() - t
            row[f"rule {name} spellings"] = len(ans.sequences)
        rows.append(row)
        print(row)
    write_json(
        result_path("valid_sets", False),
        {
            "vocabulary_size": len(vocab.raw),
            "numeral_tokens": len(index),
            "cached": vocabulary(tok) is vocab and numeral_index(tok) is index,
            "rows": rows,
            "machine": machine(["transformers"]),
        },
    )


#: The heading of this benchmark's table on the benchmarks page.
TITLE = "Valid sets: the numeral rule on a 151k-token vocabulary"


def render(d: dict[str, Any]) -> list[str]:
    first, again = d["rows"]
    out = [
        f"Qwen2.5-Coder-0.5B-Instruct's tokenizer ({d['vocabulary_size']:,} tokens, "
        f"{d['numeral_tokens']} of them numbers in some decimal script); no model loaded, no "
        "forward pass. The tokenizer's bytes and the numeral index are built once per "
        f"tokenizer (cached: {d['cached']}); each answer rule is built per label set.",
        "",
    ]
    names = [k.removeprefix("rule ").removesuffix(" s") for k in first if k.endswith(" s")]
    rows = [
        ["tokenizer bytes", "", fmt(first["vocabulary_s"]), fmt(again["vocabulary_s"])],
        ["numeral index", "", fmt(first["numeral_index_s"]), fmt(again["numeral_index_s"])],
    ]
    rows += [[f"answer rule {n}", first[f"rule {n} spellings"], fmt(first[f"rule {n} s"]),
              fmt(again[f"rule {n} s"])] for n in names]  # fmt: skip
    return out + table(["step", "spellings", "first call (s)", "again (s)"], rows)


if __name__ == "__main__":
    main()
