"""``xlikert prompts``."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from xlikert.cli import main

EXPECTED_COLUMNS = ["target", "item", "reverse_keyed", "subscale", "system", "user"]


def test_prompts_summary_and_csv(tmp_path):
    out = tmp_path / "prompts.csv"
    result = CliRunner().invoke(main, ["prompts", "examples/demo.toml", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "target (lexicon, 4 levels): USA, China, Canada, France" in text
    assert "17 items" in text and "= 68 prompts" in text and "204 forward passes" in text
    assert "--- prompt 1 of 68: target=USA, item=1" in text
    assert "Americans should always buy American-made products instead of imports." in text
    df = pd.read_csv(out, keep_default_na=False, dtype=str)
    assert list(df.columns) == EXPECTED_COLUMNS
    assert len(df) == 68
    row = df[(df.target == "Canada") & (df["item"] == "1")].iloc[0]
    assert row.user == "Canadians should always buy Canadian-made products instead of imports."
    assert row.system.splitlines()[0] == "You are a consumer in a market research study."


def test_prompts_jsonl_builtin_name(tmp_path):
    out = tmp_path / "prompts.jsonl"
    result = CliRunner().invoke(main, ["prompts", "framing", "-o", str(out), "--show", "0"])
    assert result.exit_code == 0, result.output
    assert "prompt (framing, 6 levels)" in result.output
    assert "4 x 6 = 24 conditions x 17 items = 408 prompts" in result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 408
    assert {r["prompt"] for r in rows} >= {"v0_original", "v5_original_no_whitespace"}
    assert rows[0]["reverse_keyed"] is False


def test_prompts_bad_config_writes_nothing(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[experiment]\ninstrument = "cetscale"\n[factors.target]\nlevels = []\n')
    out = tmp_path / "p.csv"
    result = CliRunner().invoke(main, ["prompts", str(cfg), "-o", str(out)])
    assert result.exit_code != 0
    assert "bad.toml" in result.output and "'levels' is empty" in result.output
    assert not out.exists()
    result = CliRunner().invoke(main, ["prompts", "demo", "-o", str(tmp_path / "p.txt")])
    assert result.exit_code != 0 and "use .csv or .jsonl" in result.output
    missing = tmp_path / "no" / "such" / "p.csv"
    result = CliRunner().invoke(main, ["prompts", "demo", "-o", str(missing)])
    assert result.exit_code != 0 and "does not exist" in result.output
    assert "Traceback" not in result.output and not missing.parent.exists()
