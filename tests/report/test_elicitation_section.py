"""The report's section "Elicitation": the validity table, only with the factor."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import xarray as xr
from support.elicitation import results

from xlikert.analysis.elicitation import elicitation_validity
from xlikert.report import SECTIONS
from xlikert.report.sections import elicitation_section


def test_the_section_writes_the_validity_table_and_is_absent_without_the_factor(tmp_path):
    ds = results()
    section = elicitation_section(SimpleNamespace(ds=ds, out=tmp_path))
    assert section is not None and section.title == "Elicitation"
    csv = pd.read_csv(tmp_path / "tables" / "elicitation_validity.csv")
    want = elicitation_validity(ds).to_dataframe().reset_index()
    assert list(csv["model"]) == list(want["model"])
    for name in ("greedy_agreement", "greedy_no_answer", "own_words_tv", "own_words_tv_bound"):
        assert (csv[name] - want[name]).abs().max() < 1e-12, name
    plain = ds.sel(elicitation="first_token", drop=True)
    assert elicitation_section(SimpleNamespace(ds=plain, out=tmp_path)) is None
    assert elicitation_section in SECTIONS


def test_the_report_renders_with_greedy_cells_that_have_no_pmf(tmp_path):
    """Greedy replies without an answer leave NaN PMF cells: the report renders, the
    sections that need a PMF in every cell (the decomposition among them) leave the level
    greedy out and say so, and the failure-rate section points to the section Elicitation."""
    from xlikert.report import write_report

    ds = results()
    empty = ds["pmf"].isnull().all("score")
    n_empty = int(empty.sum())
    assert n_empty and bool(empty.sel(elicitation="greedy").any())  # the case under test
    ds["valid_mass"] = xr.where(empty, np.nan, 0.5 + 0.4 * (ds["pmf"].max("score").fillna(0)))
    out = write_report(ds, tmp_path / "report", figures=False).parent
    md = (out / "report.md").read_text()
    design = md.split("## Design", 1)[1].split("\n## ", 1)[0]
    assert f"{empty.size - n_empty} exact item PMFs and {n_empty} cells without one" in design
    failure = md.split("## Constraint: failure rate", 1)[1].split("\n## ", 1)[0]
    assert "section **Elicitation**" in failure and "names the level left out" in failure
    eli = md.split("## Elicitation", 1)[1].split("\n## ", 1)[0]
    m = int(empty.sel(elicitation="greedy").size)
    assert f"the level `greedy` ({int(empty.sel(elicitation='greedy').sum())} of {m} cells)" in eli
    effects = pd.read_csv(out / "tables" / "effects.csv")
    levels = set(effects.loc[effects["term"] == "elicitation", "Parameter"].astype(str))
    assert levels == {"first_token", "own_words"}
    assert "model:elicitation" in set(effects["term"])
    html = (out / "index.html").read_text()
    assert "<h2" in html and "Elicitation" in html and "nan" not in html.lower().split("<body")[1]


def test_the_section_says_which_own_words_cells_missed_tol(tmp_path):
    """Own-words cells whose budget was spent before tol: counted per model, their bound
    named as the one reached, the no-answer mass called a lower bound; the settings read
    from the file's attributes."""
    ds = results()
    met = xr.ones_like(ds["no_answer_mass"], dtype=int)
    met.loc[{"model": "m2", "elicitation": "own_words", "target": "USA"}] = 0
    ds["elicitation_tol_met"] = met
    ds.attrs.update(elicitation_reply_tokens=8, own_words_temperature=0.7, own_words_top_p=0.9,
                    own_words_tol=0.01, own_words_max_passes=64)  # fmt: skip
    section = elicitation_section(SimpleNamespace(ds=ds, out=tmp_path))
    text = "\n".join(md for _, _, md in section.blocks)
    k = ds.sizes["item"]
    assert f"**{k} of {met.sel(elicitation='own_words').size} own-words cells did not meet" in text
    assert f"(m1: 0 of {2 * k}, m2: {k} of {2 * k})" in text and "lower bound" in text
    worst = float(ds["elicitation_error"].sel(elicitation="own_words").max())
    assert f"up to {worst:.3g}" in text
    assert "at most 8 tokens" in text and "temperature 0.7 and top-p 0.9" in text
    assert "certified to 0.01 within 64 forward passes" in text
    csv = pd.read_csv(tmp_path / "tables" / "elicitation_validity.csv")
    assert list(csv.columns[:2]) == ["model", "target"]
