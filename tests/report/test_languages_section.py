"""The report's section "Languages" (issue 40, item 5)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import xarray as xr

from xlikert.datasets import synthetic_pmf
from xlikert.report import write_report


def _results(pmf: xr.DataArray) -> xr.Dataset:
    ds = xr.Dataset({"pmf": pmf, "valid_mass": xr.ones_like(pmf.isel(score=0)) * 0.99})
    ds.attrs.update(
        language_factor="language",
        instrument_languages=json.dumps(
            {"en": "own", "de": "project's own", "zh": "project's own"}
        ),
    )
    return ds


def test_languages_section_names_the_item_that_moves_most(tmp_path):
    pmf = synthetic_pmf({"model": 2, "language": ["en", "de", "zh"]}, n_items=3, seed=7)
    # item 2 answered at the top of the scale in zh, everywhere else as drawn
    top = xr.zeros_like(pmf.isel(item=1, language=2))
    top[..., -1] = 1.0
    pmf = pmf.copy()
    pmf.loc[{"item": pmf["item"].values[1], "language": "zh"}] = top
    out = tmp_path / "r"
    ds = _results(pmf)
    ds["valid_mass"].loc[{"language": "zh"}] = 0.5
    html = write_report(ds, out, figures=False).read_text(encoding="utf-8")
    assert "Languages" in html
    table = (out / "tables" / "language_items.csv").read_text(encoding="utf-8").splitlines()
    assert table[1].split(",")[0] == str(pmf["item"].values[1])
    # the W1 distance by hand: the largest over pairs of languages, mixed over the models
    per = pmf.mean("model").sel(item=pmf["item"].values[1]).transpose("language", "score").values
    d = max(np.abs(np.cumsum(per[i]) - np.cumsum(per[j])).sum()
            for i in range(3) for j in range(i + 1, 3))  # fmt: skip
    assert abs(float(table[1].split(",")[1]) - d) < 1e-9
    comp = pd.read_csv(out / "tables" / "language_composite.csv")
    assert list(comp.language) == ["en", "de", "zh"]
    # each language's translation source and mean valid mass beside its composite
    assert list(comp.translation) == ["own", "project's own", "project's own"]
    np.testing.assert_allclose(comp["valid mass"], [0.99, 0.99, 0.5], atol=1e-12)
    assert "moves while the others stay" in html


def test_one_item_is_not_said_to_move_against_the_others(tmp_path):
    pmf = synthetic_pmf({"language": ["en", "de"]}, n_items=1, seed=3)
    html = write_report(_results(pmf), tmp_path / "r", figures=False).read_text(encoding="utf-8")
    assert "with one item" in html and "while the others stay" not in html
    assert "× 1 item on scores" in html and "No composite: a single item (1)" in html


def test_no_languages_section_without_a_language_factor(tmp_path):
    pmf = synthetic_pmf({"model": 2, "language": ["en", "de"]}, n_items=2, seed=1)
    ds = _results(pmf)
    del ds.attrs["language_factor"]
    html = write_report(ds, tmp_path / "r", figures=False).read_text(encoding="utf-8")
    assert 'id="languages"' not in html.lower() and ">Languages<" not in html


def test_per_language_table_has_a_column_per_subscale(tmp_path):
    pmf = synthetic_pmf({"language": ["en", "de"]}, n_items=4, seed=5)
    pmf = pmf.assign_coords(subscale=("item", ["a", "a", "b", "b"]),
                            reverse_keyed=("item", [False] * 4))  # fmt: skip
    out = tmp_path / "r"
    write_report(_results(pmf), out, figures=False)
    comp = pd.read_csv(out / "tables" / "language_composite.csv")
    assert list(comp.columns) == ["language", "E[a]", "E[b]", "valid mass", "translation"]
    mean = (pmf * pmf.score).sum("score")
    by_hand = mean.where(pmf.subscale == "b").sum("item").sel(language="de")
    assert abs(comp.loc[comp.language == "de", "E[b]"].item() - float(by_hand)) < 1e-9
    items = pd.read_csv(out / "tables" / "language_items.csv")
    assert list(items.columns[:2]) == ["item", "subscale"]
