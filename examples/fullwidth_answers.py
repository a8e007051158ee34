"""Shown full-width, answered where? The valid mass of a scale shown in full-width digits.

Asks Qwen2.5-Coder-0.5B-Instruct (from the zoo) the same items with the scale shown in
ASCII digits (``1 2 3``) and in full-width digits (``１ ２ ３``, as Chinese and Japanese
questionnaires print it), under the numeral rule (a number in any script is that
number), and splits each cell's next-token mass into

* ``valid``: the scale's points, in any script (``valid_mass``), and of it the part
  answered in ASCII and in full-width digits (``script_mass``);
* ``off_scale``: numbers that are no point of the scale (``0``, ``6``, ``０``, ...): the
  model answered a number, but not one it was offered; invalid under any rule;
* ``named``: a point of the scale named another way, outside the rule: a number word
  (``Four``, ``six``) or a one-character numeral of another system (Chinese ``五``,
  circled ``④``, Roman ``Ⅳ``), read from the listed tokens;
* ``other``: everything else (words, punctuation, a line break).

``off_scale`` is read from the cell's 200 most likely tokens, so it is a certified
interval: the listed numbers off the scale, and at most the mass of the tokens not
listed on top of them. Two designs: CETSCALE items 1-3 in English (1..7, target China,
the scale's labels listed in the system prompt) and the Chinese BFI-10 (the built-in
``bfi_short`` in ``zh``, 1..5, all ten items). About a minute on a laptop CPU.

    python examples/fullwidth_answers.py [OUT_DIR]

writes ``fullwidth.json`` (every cell) and prints, per design and item, the valid mass
in each format and what the full-width format moved where.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from xlikert.collect import collect
from xlikert.collect.answers.numerals import read_numeral
from xlikert.design import load_experiment

MODEL = '[[models]]\nname = "qwen"\nsource = "qwen2.5-coder-0.5b-instruct"\n'
FORMATS = """
[factors.format]
kind = "format"
[factors.format.levels]
ascii = "original"
fullwidth = {{ labels = "{labels}" }}
"""
DESIGNS = {
    "cetscale_en": (
        """[experiment]
name = "cetscale_en"
instrument = "cetscale"
items = ["1", "2", "3"]
system = '''You are a consumer in a market research study.
Response format: {anchors}.
Respond with ONLY one of {answer_labels}.'''
[factors.target]
levels = ["China"]
""",
        "１ ２ ３ ４ ５ ６ ７",
    ),
    "bfi_short_zh": (
        """[experiment]
name = "bfi_short_zh"
instrument = "bfi_short"
[factors.language]
kind = "language"
levels = ["zh"]
""",
        "１ ２ ３ ４ ５",
    ),
}
TOP_K = 200
WORDS = {w: k for k, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])}  # fmt: skip


def named_number(text: str) -> int | None:
    """The number a token names outside the numeral rule: an English number word or one
    character with a Unicode numeric value that is no decimal digit (五, ④, Ⅳ)."""
    text = text.strip()
    if text.lower() in WORDS:
        return WORDS[text.lower()]
    if len(text) == 1 and read_numeral(text) is None:
        value = unicodedata.numeric(text, None)
        return int(value) if value is not None and value == int(value) else None
    return None


def answered(ds: xr.Dataset) -> pd.DataFrame:
    """Each cell's mass split into valid (per script), off-scale numbers (an interval
    from the listed tokens) and the rest."""
    lo, hi = int(ds.score.min()), int(ds.score.max())
    rows = []
    for fmt in ds.format.values:
        for item in ds.item.values:
            cell = ds.sel(format=fmt, item=item).squeeze()
            probs = np.exp(cell.topk_logprob.values.astype(float))
            # the rule's reading: one leading space, then a number in one script
            numbers = [read_numeral(str(t).removeprefix(" ")) for t in cell.topk_token.values]
            off = sum(p for p, n in zip(probs, numbers, strict=True)
                      if n is not None and not lo <= n[0] <= hi)  # fmt: skip
            named = sum(p for p, t in zip(probs, cell.topk_token.values, strict=True)
                        if (n := named_number(str(t))) is not None and lo <= n <= hi)  # fmt: skip
            unlisted = max(0.0, 1.0 - float(probs.sum()))
            script = cell.script_mass.to_series().dropna()
            valid = float(cell.valid_mass)
            rows.append({
                "format": str(fmt), "item": str(item), "valid": valid,
                "valid_ascii": float(script.get("ascii", np.nan)),
                "valid_fullwidth": float(script.get("fullwidth", np.nan)),
                "off_scale_lower": off, "off_scale_upper": off + unlisted,
                "named_lower": named, "other_upper": 1.0 - valid - off - named,
            })  # fmt: skip
    return pd.DataFrame(rows)


def main(out: Path) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    for name, (head, labels) in DESIGNS.items():
        path = out / f"{name}.toml"
        path.write_text(head + FORMATS.format(labels=labels) + MODEL, encoding="utf-8")
        exp = load_experiment(path)
        ds = collect(exp.build_prompts(), exp.models, out / f"{name}.nc", top_k=TOP_K)
        tables.append(answered(ds).assign(design=name))
    cells = pd.concat(tables, ignore_index=True)
    (out / "fullwidth.json").write_text(
        json.dumps({"model": "Qwen2.5-Coder-0.5B-Instruct", "top_k": TOP_K,
                    "cells": cells.to_dict(orient="records")}, indent=1),
        encoding="utf-8",
    )  # fmt: skip
    wide = cells.pivot_table(index=["design", "item"], columns="format", sort=False,
                             values=["valid", "off_scale_lower", "named_lower"])  # fmt: skip
    wide.columns = [f"{v} {f}" for v, f in wide.columns]
    wide["valid gap"] = wide["valid ascii"] - wide["valid fullwidth"]
    wide["off-scale gain"] = wide["off_scale_lower fullwidth"] - wide["off_scale_lower ascii"]
    wide["named gain"] = wide["named_lower fullwidth"] - wide["named_lower ascii"]
    shown = ["valid ascii", "valid fullwidth", "valid gap", "off-scale gain", "named gain"]
    with pd.option_context("display.width", 160, "display.precision", 4,
                           "display.max_columns", 10):  # fmt: skip
        print(wide[shown])
    within = (wide["valid gap"].abs() <= 0.01).sum()
    print(f"valid mass within 0.01 of ASCII's: {within} of {len(wide)} items")
    return cells


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("fullwidth-example"))
