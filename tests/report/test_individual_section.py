"""Section "Individual respondents": a respondent factor plus the respondents' answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from xlikert.analysis.individual import individual_summary
from xlikert.core.errors import DesignError
from xlikert.report import SECTIONS, write_report
from xlikert.report.sections import individual_respondents_section

NASTY_ITEM = "q$x$<img src=x>"
NASTY_PERSON = "p<img src=y>$z$"
TITLE = "Individual respondents"


def _results(people: list[str], seed: int = 0) -> xr.Dataset:
    """PMFs ``(model, respondent, item, score)`` on 1..4: two models, three items."""
    rng = np.random.default_rng(seed)
    pmf = rng.dirichlet(np.ones(4), size=(2, len(people), 3))
    return xr.Dataset(
        {"pmf": (("model", "respondent", "item", "score"), pmf)},
        coords={
            "model": ["m1", "m2"],
            "respondent": people,
            "item": ["a", "b", NASTY_ITEM],
            "score": [1, 2, 3, 4],
        },
        attrs={"instrument": "toy"},
    )


def _answers(people: list[str], seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(
        rng.integers(1, 5, size=(len(people), 3)).astype(float),
        index=people,
        columns=["a", "b", NASTY_ITEM],
    )
    table.iloc[0, 1] = np.nan  # one unanswered item
    table["party"] = ["D", "R"] * (len(people) // 2)
    return table


PEOPLE = [NASTY_PERSON, *(f"r{i}" for i in range(7))]


def test_section_is_registered_after_alignment():
    assert SECTIONS.index(individual_respondents_section) == len(SECTIONS) - 1


def test_the_section_renders_scores_and_skill_escaped(tmp_path):
    ds, answers = _results(PEOPLE), _answers(PEOPLE)
    personas = xr.Dataset(
        {"pmf": (("model", "party", "item", "score"),
                 np.random.default_rng(2).dirichlet(np.ones(4), size=(2, 2, 3)))},
        coords={"model": ["m1", "m2"], "party": ["D", "R"], "item": ["a", "b", NASTY_ITEM],
                "score": [1, 2, 3, 4]},
    )  # fmt: skip
    out = tmp_path / "rep"
    write_report(
        ds, out, respondents=answers, persona_results=personas, persona=["party"], figures=False
    )
    html = (out / "index.html").read_text()
    md = (out / "report.md").read_text()
    assert "<h2" in html and TITLE in html and f"## {TITLE}" in md
    # the item name is escaped in HTML (no live tag) and in Markdown ($ and < escaped)
    assert "<img src=x>" not in html and "&lt;img src=x&gt;" in html
    assert "\\$x\\$\\<img src=x\\>" in md
    # the numbers in the tables are those of individual_summary, per model and item
    want = individual_summary(ds, answers, persona_results=personas, persona=["party"])
    scores = pd.read_csv(out / "tables" / "individual_scores.csv")
    assert len(scores) == 2 * 3
    row = scores[(scores.model == "m2") & (scores["item"] == "b")].iloc[0]
    for m in ("answer_probability", "log_score", "rps", "brier", "mode_correct"):
        est = want.estimate.sel(model="m2", item="b", metric=m)
        se = want.se.sel(model="m2", item="b", metric=m)
        assert row[m] == pytest.approx(float(est), abs=5e-4), m
        assert row[f"{m}_se"] == pytest.approx(float(se), abs=5e-4), m
    assert row["n"] == len(PEOPLE) - 1  # one person left item b unanswered
    skill = pd.read_csv(out / "tables" / "individual_skill.csv")
    assert sorted(set(skill.baseline)) == ["group_persona", "population", "uniform"]
    row = skill[(skill.model == "m1") & (skill["item"] == NASTY_ITEM)
                & (skill.baseline == "uniform")].iloc[0]  # fmt: skip
    want_skill = want.skill.sel(model="m1", item=NASTY_ITEM, baseline="uniform", metric="brier")
    assert row["brier"] == pytest.approx(float(want_skill), abs=5e-4)
    assert "group personas' results" in md


def test_respondents_left_out_of_the_group_persona_baseline_are_named(tmp_path):
    ds, answers = _results(PEOPLE), _answers(PEOPLE)
    personas = xr.Dataset(
        {"pmf": (("model", "party", "item", "score"),
                 np.random.default_rng(2).dirichlet(np.ones(4), size=(2, 1, 3)))},
        coords={"model": ["m1", "m2"], "party": ["D"], "item": ["a", "b", NASTY_ITEM],
                "score": [1, 2, 3, 4]},
    )  # fmt: skip
    out = tmp_path / "rep"
    with pytest.warns(UserWarning, match="4 of 8 respondents left out"):
        write_report(
            ds, out, respondents=answers, persona_results=personas, persona=["party"],
            figures=False,
        )  # fmt: skip
    md = (out / "report.md").read_text()
    assert "4 of 8 respondents left out of the group persona baseline" in md
    assert "is not a level of the persona results" in md
    skill = pd.read_csv(out / "tables" / "individual_skill.csv")
    assert sorted(set(skill.baseline)) == ["group_persona", "population", "uniform"]


def test_a_respondent_named_with_markup_is_scored_from_a_csv(tmp_path):
    people = [NASTY_PERSON, "r1", "r2", "r3"]
    ds, answers = _results(people), _answers(people)
    csv = tmp_path / "answers.csv"
    answers.rename_axis("respondent").reset_index().to_csv(csv, index=False)
    out = tmp_path / "rep"
    write_report(ds, out, respondents=csv, figures=False)
    scores = pd.read_csv(out / "tables" / "individual_scores.csv")
    want = individual_summary(ds, answers)
    got = scores[(scores.model == "m1") & (scores["item"] == "a")].iloc[0]["answer_probability"]
    assert got == pytest.approx(
        float(want.estimate.sel(model="m1", item="a", metric="answer_probability")), abs=5e-4
    )
    skill = pd.read_csv(out / "tables" / "individual_skill.csv")
    assert sorted(set(skill.baseline)) == ["population", "uniform"]
    assert "<img src=y>" not in (out / "index.html").read_text()


def test_absent_without_answers_or_without_a_respondent_factor(tmp_path):
    ds = _results(PEOPLE)
    write_report(ds, tmp_path / "a", figures=False)
    assert TITLE not in (tmp_path / "a" / "index.html").read_text()
    plain = ds.rename(respondent="persona")
    write_report(plain, tmp_path / "b", respondents=_answers(PEOPLE), figures=False)
    assert TITLE not in (tmp_path / "b" / "index.html").read_text()
    assert TITLE not in (tmp_path / "b" / "report.md").read_text()


def test_bad_answers_are_named(tmp_path):
    ds, answers = _results(PEOPLE), _answers(PEOPLE)
    answers.iloc[2, 0] = 9
    with pytest.raises(DesignError, match="outside the item's scale"):
        write_report(ds, tmp_path / "r", respondents=answers, figures=False)
    assert not (tmp_path / "r").exists()
    csv = tmp_path / "x.csv"
    answers.to_csv(csv, index=False)
    with pytest.raises(DesignError, match="no column 'respondent'"):
        write_report(ds, tmp_path / "r", respondents=csv, figures=False)


def test_cli_respondent_answers(tmp_path):
    from click.testing import CliRunner

    from xlikert.cli.report import report_command

    people = ["r0", "r1", "r2", "r3"]
    _results(people).to_netcdf(tmp_path / "results.nc")
    answers = _answers(people).rename_axis("respondent").reset_index()
    answers.to_csv(tmp_path / "answers.csv", index=False)
    args = [str(tmp_path / "results.nc"), "-o", str(tmp_path / "rep")]
    res = CliRunner().invoke(
        report_command, [*args, "--respondent-answers", str(tmp_path / "answers.csv")]
    )
    assert res.exit_code == 0, res.output
    assert f"## {TITLE}" in (tmp_path / "rep" / "report.md").read_text()
    answers.loc[1, "a"] = 0
    answers.to_csv(tmp_path / "bad.csv", index=False)
    res = CliRunner().invoke(
        report_command, [*args, "--respondent-answers", str(tmp_path / "bad.csv")]
    )
    assert res.exit_code != 0 and "outside the item's scale" in res.output
