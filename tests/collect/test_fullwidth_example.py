"""The example ``examples/fullwidth_answers.py``: where a cell's mass goes, by hand.

The example's real run (Qwen, 26 cells, about a minute) is not part of the suite: its
output is committed in ``examples/fullwidth_output/``. Here its reading of a cell's
listed tokens is checked on a cell made by hand.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fullwidth_answers.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("fullwidth_answers", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_numbers_named_outside_the_rule(example):
    named = [example.named_number(t) for t in ("五", "④", "Ⅳ", " Four", "six", "百")]
    assert named == [5, 4, 4, 4, 6, 100]
    # the rule's own numbers (any decimal script) and words that name none: not counted
    assert [example.named_number(t) for t in ("5", "５", "٥", "x", "**", "一般")] == [None] * 6


def test_a_cells_mass_split_by_hand(example):
    tokens = [["1", "６", "五", "0", "x"], ["２", "3", "7", "Two", "\\xe2\\x91"]]
    probs = np.array([[0.5, 0.2, 0.1, 0.05, 0.05], [0.4, 0.3, 0.1, 0.1, 0.05]])
    ds = xr.Dataset(
        {
            "valid_mass": (("format", "item"), [[0.5], [0.7]]),
            "script_mass": (("format", "item", "script"), [[[0.5, 0.0]], [[0.3, 0.4]]]),
            "topk_token": (("format", "item", "rank"), np.array(tokens)[:, None, :]),
            "topk_logprob": (("format", "item", "rank"), np.log(probs)[:, None, :]),
        },
        coords={"format": ["ascii", "fullwidth"], "item": ["a"],
                "script": ["ascii", "fullwidth"], "score": [1, 2, 3, 4, 5]},
    )  # fmt: skip
    got = example.answered(ds).set_index("format")
    # ascii: ６ and 0 off the scale (0.25), 五 names 5 (0.1), 0.1 not listed
    assert got.loc["ascii", "off_scale_lower"] == pytest.approx(0.25)
    assert got.loc["ascii", "off_scale_upper"] == pytest.approx(0.35)
    assert got.loc["ascii", "named_lower"] == pytest.approx(0.1)
    # full-width: 7 off the scale, "Two" names 2, a partial character is neither
    assert got.loc["fullwidth", "off_scale_lower"] == pytest.approx(0.1)
    assert got.loc["fullwidth", "named_lower"] == pytest.approx(0.1)
    assert got.loc["fullwidth", "other_upper"] == pytest.approx(1 - 0.7 - 0.1 - 0.1)
    assert got.loc["fullwidth", "valid_fullwidth"] == pytest.approx(0.4)
