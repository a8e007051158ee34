"""``xlikert prompts`` and ``xlikert example``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from xlikert.cli import main
from xlikert.design import load_experiment

EXPECTED_COLUMNS = ["target", "item", "reverse_keyed", "subscale", "system", "user"]


def test_example_writes_an_editable_copy_of_a_builtin(tmp_path):
    runner = CliRunner()
    listed = runner.invoke(main, ["example"])
    assert listed.exit_code == 0 and "paper" in listed.output and "5 open models" in listed.output
    copy = tmp_path / "mine.toml"
    made = runner.invoke(main, ["example", "demo", "-o", str(copy)])
    assert made.exit_code == 0, made.output
    assert copy.read_bytes() == Path(load_experiment("demo").path).read_bytes()
    again = runner.invoke(main, ["example", "demo", "-o", str(copy)])
    assert again.exit_code != 0 and "--force" in again.output
    assert runner.invoke(main, ["example", "demo", "-o", str(copy), "--force"]).exit_code == 0
    unknown = runner.invoke(main, ["example", "papr"])
    assert unknown.exit_code != 0 and "built-ins: anes96, anes96_survey, demo" in unknown.output


def test_prompts_summary_and_csv(tmp_path):
    demo = tmp_path / "demo.toml"  # a file, as a user's edited copy
    assert CliRunner().invoke(main, ["example", "demo", "-o", str(demo)]).exit_code == 0
    out = tmp_path / "prompts.csv"
    result = CliRunner().invoke(main, ["prompts", str(demo), "-o", str(out)])
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


def test_prompts_shows_each_languages_prompts_and_sources():
    """With a language factor, -n N prints the first N prompts of every language, and the
    summary says where each language's text comes from (the model check fails offline
    only if the zoo cannot load Qwen: the prompts are printed before it)."""
    result = CliRunner().invoke(main, ["prompts", "languages", "-n", "2"])
    text = result.output
    heads = [line for line in text.splitlines() if line.startswith("--- prompt")]
    assert heads == [
        "--- prompt 1 of 30: language=en, item=1",
        "--- prompt 2 of 30: language=en, item=2",
        "--- prompt 11 of 30: language=de, item=1",
        "--- prompt 12 of 30: language=de, item=2",
        "--- prompt 21 of 30: language=zh, item=1",
        "--- prompt 22 of 30: language=zh, item=2",
    ], text
    assert "我认为自己是一个比较内敛、含蓄的人。" in text
    line = next(x for x in text.splitlines() if x.startswith("Languages   "))
    assert "en: the instrument's own text" in line and "zh: the project's own translation" in line


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


def test_prompts_checks_model_sources_without_loading(tmp_path, monkeypatch):
    cfg = tmp_path / "mine.toml"
    cfg.write_text(
        '[experiment]\ninstrument = "mini_ipip"\n\n'
        '[[models]]\nname = "small"\nsource = "smollm2-135m"\n\n'
        f'[[models]]\nname = "local"\nsource = "{tmp_path / "no-such-dir"}"\n\n'
        '[[models]]\nname = "hub"\nsource = "someone/not-downloaded-model"\n\n'
        '[[models]]\nname = "ok"\nsource = "gemma-3-270m"\n',
        encoding="utf-8",
    )
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    result = CliRunner().invoke(main, ["prompts", str(cfg), "--show", "0"])
    assert result.exit_code != 0
    out = result.output
    assert f"{cfg}: 2 model source(s) cannot be loaded" in out
    assert "model 'small': source 'smollm2-135m'" in out
    assert "did you mean 'smollm2-135m-instruct'?" in out
    assert "model 'local'" in out and "no such local directory" in out
    assert "'hub'" not in out and "'ok'" not in out
    # offline, a Hugging Face id must be in the local cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf"))
    result = CliRunner().invoke(main, ["prompts", str(cfg), "--show", "0"])
    assert "3 model source(s)" in result.output and "model 'hub'" in result.output
    assert "not in the local Hugging Face cache" in result.output
    (tmp_path / "hf" / "models--someone--not-downloaded-model" / "snapshots" / "abc").mkdir(
        parents=True
    )
    result = CliRunner().invoke(main, ["prompts", str(cfg), "--show", "0"])
    assert "2 model source(s)" in result.output and "'hub'" not in result.output


def test_builtin_model_first_assembly_says_so(tmp_path, monkeypatch, capsys):
    """A line on stderr before the one-off assembly of a chunked built-in, none after."""
    import pytest

    from xlikert.collect import zoo

    name = next((n for n, m in zoo.ZOO.items() if len(m.chunks) > 1), None)
    try:
        chunks = zoo._chunk_paths(zoo.ZOO[name])
    except Exception:  # the offline-model packages are not installed
        pytest.skip("chunked built-in model not installed")
    monkeypatch.setenv("XLIKERT_CACHE", str(tmp_path))
    path = zoo.resolve_gguf(name)
    err = capsys.readouterr().err
    size = sum(c.stat().st_size for c in chunks) / 1e6
    assert f"assembling built-in model {name!r} for the first time ({size:.0f} MB" in err
    assert "one-off" in err and path.is_file()
    zoo.resolve_gguf(name)
    assert capsys.readouterr().err == ""
