"""``xlikert plan``: the cost counted before a run (only tokenizers load) is what the run
then spends: cells, forward passes and prompt tokens; own-words within their bound."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_answering_tiny

from xlikert.collect import collect, cost_plan, cost_spent
from xlikert.design import load_experiment

KW = {"batch_size": 4, "chunk_size": 4, "top_k": 3, "reply_tokens": 3,
      "own_words_tol": 0.05, "own_words_max_passes": 12}  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> list[dict]:
    return [{"name": "tiny", "source": str(save_answering_tiny(tmp_path_factory.mktemp("cost")
                                                                / "m"))}]  # fmt: skip


def demo(items: int = 3, levels: tuple[str, ...] = ("first_token",)):
    """The built-in demo experiment's prompts: 2 targets, the first ``items`` items."""
    prompts = load_experiment("demo").build_prompts().isel(target=[0, 1], item=slice(0, items))
    return prompts.expand_dims(elicitation=list(levels)) if len(levels) > 1 else prompts


def test_plan_counts_are_what_the_run_spends(model, tmp_path):
    out = tmp_path / "r.nc"
    plan = cost_plan(demo(), model, out, tokens_per_second=1000.0, **KW)
    row = plan.loc["tiny"]
    assert row["found"] == 0 and row["to_compute"] == row["cells"] == 6
    assert row["passes"] == row["passes_max"] == 6  # one per first-token cell
    assert row["tokens_max"] == row["prompt_tokens"] > 0
    assert row["parameters"] > 0 and row["flops"] == 2 * row["parameters"] * row["tokens_max"]
    assert row["seconds"] == pytest.approx(row["tokens_max"] / 1000.0)
    assert "2 x parameters x tokens" in plan.attrs["assumptions"]["flops"]
    ds = collect(demo(), model, out, progress=False, **KW)
    spent = cost_spent(ds).loc["tiny"]
    for k in ("to_compute", "passes", "prompt_tokens"):
        assert spent[k] == row[k], k
    # the finished output: every cell found, nothing left
    again = cost_plan(demo(), model, out, **KW).loc["tiny"]
    assert again["found"] == 6 and again["to_compute"] == again["passes"] == 0
    assert np.isnan(again["seconds"])  # no throughput stated: no projection


def test_plan_finds_reused_cells_and_bounds_own_words(model, tmp_path):
    first = tmp_path / "first.nc"
    collect(demo(2), model, first, progress=False, **KW)
    levels = ("first_token", "own_words")
    plan = cost_plan(demo(3, levels), model, tmp_path / "grown.nc", reuse=[first], **KW)
    row = plan.loc["tiny"]
    ds = collect(demo(3, levels), model, tmp_path / "grown.nc", reuse=[first], progress=False, **KW)
    assert row["found"] == int(ds.attrs["cells_reused"]) + int(ds.attrs["cells_copied"])
    spent = cost_spent(ds).loc["tiny"]
    assert spent["to_compute"] == row["to_compute"] == row["cells"] - row["found"]
    assert spent["prompt_tokens"] == row["prompt_tokens"]
    # own-words cells read up to own_words_max_passes prefixes: within the plan's bound
    assert row["passes"] <= spent["passes"] <= row["passes_max"]
    own_words_cells = 2 * 3  # 2 targets x 3 items, none in the first file
    assert row["passes_max"] - row["passes"] == own_words_cells * (KW["own_words_max_passes"] - 1)


def test_xlikert_plan_prints_the_table_and_its_assumptions(model, tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main

    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "cost"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA"]\n\n[collect]\nchunk_size = 5\ntop_k = 3\n\n'
        f'[[models]]\nname = "tiny"\nsource = "{model[0]["source"]}"\n'
    )
    res = CliRunner().invoke(main, ["plan", str(cfg), "--throughput", "tiny=2000"])
    assert res.exit_code == 0, res.output
    assert "prompt_tokens" in res.output and "2 x parameters x tokens" in res.output
    assert "{'tiny': 'given'}" in res.output
    bad = CliRunner().invoke(main, ["plan", str(cfg), "--throughput", "fast"])
    assert bad.exit_code != 0 and "MODEL=tokens per second" in bad.output


BUILT_IN = ["demo", "formats", "framing", "languages", "paper", "anes96", "anes96_survey",
            "wvs_immig"]  # fmt: skip


@pytest.mark.parametrize("name", BUILT_IN)
def test_plan_counts_equal_the_run_on_the_built_in_experiments(name, model, tmp_path, capsys):
    """Every built-in experiment's prompts (the first two levels of each factor, the first
    two items; read by the tiny model): the plan's cells, passes and prompt tokens are
    what the run spends, by its own closing summary and by the file (``cost_spent``)."""
    from xlikert.collect.options import CollectOptions

    exp = load_experiment(name)
    prompts = exp.build_prompts()
    prompts = prompts.isel({d: slice(0, 2) for d in prompts.user.dims})
    opts = CollectOptions.from_mapping(exp.collect, where=name).replace(**KW)
    out = tmp_path / "r.nc"
    plan = cost_plan(prompts, model, out, options=opts).loc["tiny"]
    ds = collect(prompts, model, out, options=opts, progress=True)
    spent = cost_spent(ds).loc["tiny"]
    said = summary_row(capsys.readouterr().err, "tiny")
    assert plan["to_compute"] == plan["cells"] == prompts.user.size
    for k in ("to_compute", "passes", "prompt_tokens"):
        assert plan[k] == spent[k] == said[k], k
    assert said["spent_cells"] == said["to_compute"] and said["spent_passes"] == plan["passes"]
    assert said["spent_prompt_tokens"] == plan["prompt_tokens"] > 0


def summary_row(err: str, name: str) -> dict[str, float]:
    """The row of model ``name`` in the run's closing summary (stderr), by column."""
    lines = err[err.index("projected beside spent") :].splitlines()
    header = next(line for line in lines if line.lstrip().startswith("to_compute")).split()
    row = next(line for line in lines if line.split()[:1] == [name]).split()[1:]
    return dict(zip(header, map(float, row), strict=True))


def test_the_run_sets_its_projection_beside_what_it_spent(model, tmp_path):
    """``xlikert run --throughput``: the closing summary gives the projection (passes, their
    bound, prompt tokens, seconds at the throughput) beside what the run spent (cells,
    passes, prompt tokens, scoring seconds); own-words cells within their bound."""
    from click.testing import CliRunner

    from xlikert.cli import main

    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "cost"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA"]\n\n[factors.elicitation]\n'
        'levels = ["first_token", "own_words"]\n\n[collect]\nchunk_size = 4\ntop_k = 3\n'
        "own_words_tol = 0.05\nown_words_max_passes = 6\n\n"
        f'[[models]]\nname = "tiny"\nsource = "{model[0]["source"]}"\n'
    )
    out = tmp_path / "o.nc"
    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--throughput", "tiny=500"])
    assert res.exit_code == 0, res.output
    said = summary_row(res.output, "tiny")
    plan = cost_plan(load_experiment(str(cfg)).build_prompts(), model,
                     options=None, **KW | {"chunk_size": 4, "own_words_max_passes": 6}).loc["tiny"]  # fmt: skip
    assert said["to_compute"] == said["spent_cells"] == plan["cells"] == 34
    assert said["passes"] == plan["passes"] <= said["spent_passes"] <= said["passes_max"]
    assert said["prompt_tokens"] == said["spent_prompt_tokens"] == plan["prompt_tokens"]
    assert said["seconds"] == pytest.approx(said["tokens_max"] / 500, rel=1e-3)
    assert said["spent_seconds"] > 0
    assert said["spent_tokens_per_second"] == pytest.approx(
        said["spent_prompt_tokens"] / said["spent_seconds"], rel=1e-3)  # fmt: skip
    quiet = CliRunner().invoke(main, ["run", str(cfg), "-o", str(tmp_path / "q.nc"), "--quiet"])
    assert quiet.exit_code == 0 and "projected beside spent" not in quiet.output


def test_the_probe_times_whole_units_of_the_run(model):
    """``probe``: whole units of the plan (their shared prefix read as the run reads it),
    at least ``probe`` prompts, the model loaded here; the projection is tokens_max at the
    rate measured (no timing asserted: the accuracy is benchmarks/bench_plan.py's)."""
    import re

    plan = cost_plan(demo(3), model, probe=3, **KW)
    row, how = plan.loc["tiny"], plan.attrs["assumptions"]["tokens_per_second"]["tiny"]
    got = re.fullmatch(r"probe: (\d+) prompts in (\d+) unit\(s\) of the run, on this machine", how)
    assert got and int(got[1]) >= 3 and int(got[2]) >= 1, how
    assert 0 < row["tokens_per_second"] < np.inf
    assert row["seconds"] == pytest.approx(row["tokens_max"] / row["tokens_per_second"])
