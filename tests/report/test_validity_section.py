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
