"""The report's section "Elicitation": the validity table, only with the factor."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
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
