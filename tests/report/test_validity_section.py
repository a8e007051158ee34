"""The report's section "Which reading is closest to people" (xl.validity)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from support.browser import chromium, rendered_dom
from support.elicitation import results

import xlikert as xl
from xlikert.report import SECTIONS
from xlikert.report.sections import closest_reading_section


def _human(ds, seed: int = 0, n: int = 300):
    rng = np.random.default_rng(seed)
    items = [str(i) for i in ds["item"].values]
    table = pd.DataFrame({i: rng.integers(1, 6, n) for i in items})
    return xl.human_pmf(table, items, scale=(1, 5))


def _inputs(ds, out, human):
    factors = tuple(d for d in ds["pmf"].dims if d not in ("item", "score"))
    return SimpleNamespace(ds=ds, out=out, human=human, respondents=None, factors=factors)


def test_the_table_is_validity_and_the_section_needs_humans_and_two_levels(tmp_path):
    ds = results()
    human = _human(ds)
    section = closest_reading_section(_inputs(ds, tmp_path, human))
    assert section is not None and section.title == "Which reading is closest to people"
    csv = pd.read_csv(tmp_path / "tables" / "closest_reading.csv")
    v = xl.validity(ds, human)
    want = v["overall"].sel(metric="wasserstein", drop=True).to_series().reset_index()
    assert len(csv) == len(want)
    merged = csv.merge(want, on=["model", "elicitation", "target"])
    assert (merged["W1"] - merged["overall"]).abs().max() < 1e-12
    # one closest level per condition, the one validity names
    best = csv[csv["closest by W1"] == "yes"]
    compared = v["items_compared"].broadcast_like(v["closest"].sel(metric="wasserstein"))
    assert len(best) == int((compared > 0).sum())  # none where no item has every level
    assert int((compared > 0).sum()) >= 2
    for _, row in best.iterrows():
        name = v["closest"].sel(metric="wasserstein", model=row["model"], target=row["target"])
        assert row["elicitation"] == str(name.values)
    # greedy cells without a PMF are said, counted
    text = "\n".join(md for _, _, md in section.blocks)
    assert "counted, not compared" in text and "`greedy`" in text
    assert (tmp_path / "figures").is_dir()
    assert closest_reading_section(_inputs(ds, tmp_path, None)) is None
    one = ds.isel(elicitation=[0])
    assert closest_reading_section(_inputs(one, tmp_path, human)) is None
    assert closest_reading_section in SECTIONS


def test_the_report_renders_the_section(tmp_path):
    ds = results()
    ds["valid_mass"] = ds["pmf"].max("score") * 0 + 0.9
    out = xl.report.write_report(ds, tmp_path / "report", human=_human(ds)).parent
    md = (out / "report.md").read_text()
    part = md.split("## Which reading is closest to people", 1)[1].split("\n## ", 1)[0]
    assert "closest_reading" in part
    assert (out / "figures" / "closest_reading.png").is_file()
    if chromium() is None:
        pytest.skip("no Chromium on the PATH: the rendered DOM is not checked")
    dom = rendered_dom(out / "index.html")
    assert "Which reading is closest to people" in dom and "closest_reading" in dom


def test_the_report_renders_a_stated_level(tmp_path):
    """A stated level (valid_mass 1 where the reply parsed, NaN and no PMF where not) is
    read by every section like the other levels."""
    import xarray as xr

    ds = results().assign_coords(elicitation=["first_token", "greedy", "stated"])
    no_pmf = ds["pmf"].isnull().all("score")
    ds["valid_mass"] = xr.where(no_pmf, np.nan, 0.8)
    ds["valid_mass"].loc[{"elicitation": "stated"}] = 1.0
    out = xl.report.write_report(ds, tmp_path / "r", human=_human(ds), figures=False).parent
    md = (out / "report.md").read_text()
    assert "## Elicitation" in md and "## Which reading is closest to people" in md
    table = pd.read_csv(out / "tables" / "closest_reading.csv")
    assert set(table["elicitation"]) == {"first_token", "greedy", "stated"}


def test_the_section_renders_the_committed_example_output(tmp_path):
    """The example's committed WVS output (Qwen, five levels, en and de) against the WVS
    respondents it was run against: the section's table is validity's, and headless
    Chromium renders it."""
    from pathlib import Path

    import xarray as xr

    from xlikert.datasets import wvs_immig_respondents
    from xlikert.design import load_instrument

    committed = Path(__file__).resolve().parents[2] / "examples" / "validity_output" / "wvs.nc"
    ds = xr.load_dataset(committed)
    countries = {"United States": "en", "Germany": "de"}
    people = wvs_immig_respondents()
    people = people[people.country.isin(list(countries))]
    people = people.assign(country=people.country.cat.set_categories(list(countries)))
    human = xl.human_pmf(people, ["e143"], instrument=load_instrument("wvs_immig"), by="country")
    human = human.assign_coords(country=list(countries.values())).rename(country="language")
    out = xl.report.write_report(ds, tmp_path / "report", human=human).parent
    table = pd.read_csv(out / "tables" / "closest_reading.csv")
    assert set(table["elicitation"]) == set(ds["elicitation"].values) and len(table) == 10
    v = xl.validity(ds, human)
    for _, row in table.iterrows():
        want = v["overall"].sel(metric="wasserstein", model=row["model"],
                                elicitation=row["elicitation"], language=row["language"])  # fmt: skip
        assert abs(row["W1"] - float(want)) < 1e-12
    closest = table[table["closest by W1"] == "yes"]
    assert sorted(closest["language"]) == ["de", "en"]
    assert (out / "figures" / "closest_reading.png").is_file()
    if chromium() is None:
        pytest.skip("no Chromium on the PATH: the rendered DOM is not checked")
    dom = rendered_dom(out / "index.html")
    assert "Which reading is closest to people" in dom and "closest_reading.png" in dom
    assert "stated" in dom.split("Which reading is closest to people", 1)[1]


def test_levels_without_any_pmf_are_counted_and_left_out(tmp_path):
    """The example's committed ANES by-group output (SmolLM2: its greedy and stated replies
    wrote no answer in any of the 3 cells, one item): those levels are said with their
    counts and left out, so the other three are compared (else no item is answered by
    every level and the table is empty)."""
    from pathlib import Path

    import xarray as xr

    from xlikert.datasets import anes96_respondents
    from xlikert.design import load_instrument

    out = Path(__file__).resolve().parents[2] / "examples" / "validity_output"
    ds = xr.load_dataset(out / "anes_groups.nc")
    groups = {"party": ["Democrat", "Independent", "Republican"], "education": ["college"]}
    human = xl.human_pmf(anes96_respondents(), ["selfLR"], instrument=load_instrument("anes96"),
                         by=["party", "education"]).sel(**groups)  # fmt: skip
    assert ds["pmf"].sel(elicitation=["greedy", "stated"]).isnull().all()
    section = closest_reading_section(_inputs(ds, tmp_path, human))
    text = "\n".join(md for _, _, md in section.blocks)
    assert "counted and left out: `greedy` 3, `stated` 3." in text
    table = pd.read_csv(tmp_path / "tables" / "closest_reading.csv")
    assert set(table["elicitation"]) == {"first_token", "prefix", "own_words"}
    v = xl.validity(ds.sel(elicitation=["first_token", "prefix", "own_words"]), human)
    assert table["W1"].notna().all() and len(table) == 9
    for _, row in table.iterrows():
        want = v["overall"].sel(metric="wasserstein", model=row["model"],
                                elicitation=row["elicitation"], party=row["party"],
                                education=row["education"])  # fmt: skip
        assert abs(row["W1"] - float(want)) < 1e-12
