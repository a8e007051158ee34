"""The tables of the example ``examples/validity.py`` (issue 52), on numbers made by hand.

The example's real run (both offline models, five levels, ANES and WVS respondents) is
committed in ``examples/validity_output/``; its reduced real run is
``tests/integration/test_validity_example_anes.py`` (costly). Here the tables it prints are
checked against :func:`xlikert.validity` on a results array written out by hand.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xlikert as xl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "validity.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("validity_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _part(example):
    human = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3, 3, 3] * 20}), ["q"], scale=(1, 3))
    levels = ["first_token", "prefix", "greedy", "own_words", "stated"]
    pmf = np.array([[0.6, 0.3, 0.1], [0.2, 0.3, 0.5], [np.nan] * 3, [0.5, 0.3, 0.2],
                    [1 / 6, 1 / 3, 1 / 2]])  # fmt: skip
    ds = xr.Dataset(
        {"pmf": (("model", "elicitation", "item", "score"), pmf[None, :, None, :])},
        coords={"model": ["m"], "elicitation": levels, "item": ["q"], "score": [1, 2, 3]},
    )
    return example.Part(ds, human), pmf


def test_the_closest_table_is_validitys_numbers(example):
    part, pmf = _part(example)
    v, notes = example.compare(part)
    # greedy wrote no answer: left out, and said so (the others are compared)
    assert notes == ["m: greedy has no PMF in 1 of 1 cells (counted, not compared)"]
    direct = xl.validity(part.results.drop_sel(elicitation="greedy"), part.human)
    table = example.closest_table(v, "by hand")
    row = table.loc[("by hand", "m", "all")]
    assert row["greedy"] == "no PMF"
    # the stated PMF is the people's: W1 0, the closest; prefix the runner-up
    assert row["stated"].startswith("0.000 ± ")
    assert row["closest"] == "stated" and row["runner_up"] == "prefix"
    w1 = direct.sel(metric="wasserstein", model="m")
    for level in ("first_token", "prefix", "own_words", "stated"):
        est = float(w1.overall.sel(elicitation=level))
        se = float(w1.overall_se.sel(elicitation=level))
        assert row[level] == f"{est:.3f} ± {se:.3f}"
    assert row["closest_probability"] == round(float(w1.closest_probability), 3)
    # W1 by hand: the sum of the CDFs' absolute differences
    q = np.array([1, 2, 3]) / 6
    want = np.abs(np.cumsum(pmf[1]) - np.cumsum(q))[:-1].sum()
    assert float(w1.overall.sel(elicitation="prefix")) == pytest.approx(want, abs=1e-12)


def test_a_model_with_fewer_than_two_levels_read_is_not_compared(example):
    part, _ = _part(example)
    one = example.Part(part.results.sel(elicitation=["greedy", "stated"]), part.human)
    v, notes = example.compare(one)
    assert v is None
    assert notes[-1] == "m: fewer than two levels with a PMF in every cell: no comparison"
