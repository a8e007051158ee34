"""Answers that are not opinions: failure rate, human counts, model-minus-human rates and SE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xlikert as xl
from xlikert.analysis.nonsubstantive import nonsubstantive_alignment
from xlikert.core.errors import DesignError, InvalidPMFError

DK, REF = "Don't know", "Refused"


def _results() -> xr.Dataset:
    """Two items on 1..3; q1 offers Don't know and Refused, q2 only Don't know."""
    pmf = np.array([[[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]], [[1 / 3] * 3, [0.1, 0.1, 0.8]]])
    valid = np.array([[0.7, 0.8], [0.5, 0.9]])
    ns = np.array([[[0.2, 0.05], [0.1, np.nan]], [[0.3, 0.1], [0.05, np.nan]]])
    return xr.Dataset(
        {
            "pmf": (("model", "item", "score"), pmf),
            "valid_mass": (("model", "item"), valid),
            "nonsubstantive_mass": (("model", "item", "option"), ns),
        },
        coords={
            "model": ["m1", "m2"],
            "item": ["q1", "q2"],
            "score": [1, 2, 3],
            "option": [DK, REF],
        },
    )


def test_failure_rate_leaves_out_the_nonsubstantive_mass():
    ds = _results()
    fr = xl.failure_rate(ds)
    want = 1 - ds.valid_mass - ds.nonsubstantive_mass.fillna(0).sum("option")
    np.testing.assert_allclose(fr.values, want.values, atol=1e-15)
    assert fr.sel(model="m1", item="q1") == pytest.approx(0.05)
    # valid_mass alone (or an old file) is as before
    np.testing.assert_allclose(xl.failure_rate(ds.valid_mass).values, 1 - ds.valid_mass.values)
    too_much = ds.assign(valid_mass=ds.valid_mass + 0.1)
    with pytest.raises(InvalidPMFError, match="nonsubstantive_mass"):
        xl.failure_rate(too_much)


def test_model_nonsubstantive_rate_is_the_share_among_answers():
    ds = _results()
    r = xl.nonsubstantive_rate(ds)
    assert float(r.sel(model="m1", item="q1", option=DK)) == pytest.approx(0.2 / 0.95)
    assert bool(r.sel(item="q2", option=REF).isnull().all())
    with pytest.raises(DesignError, match="no 'nonsubstantive_mass'"):
        xl.nonsubstantive_rate(ds.drop_vars("nonsubstantive_mass"))


def test_human_codes_are_counted_apart_from_missing_and_scale():
    t = pd.DataFrame(
        {
            "g": ["a"] * 5 + ["b"] * 5,
            "q1": [1, 2, 8, 9, np.nan, 3, 3, 8, 8, 99],
            "q2": [1, 1, 2, 2, 3, 3, 8, 1, 2, 3],
        }
    )
    h = xl.human_pmf(
        t, ["q1", "q2"], scale=(1, 3), by=["g"], missing=[99], nonsubstantive={DK: [8], REF: [9]}
    )
    a = {"g": "a", "item": "q1"}
    assert int(h.n.sel(a)) == 2 and int(h.n_missing.sel(a)) == 1
    assert h.n_nonsubstantive.sel(a).values.tolist() == [1, 1]
    assert int(h.n_answered.sel(a)) == 4
    np.testing.assert_allclose(h.nonsubstantive_rate.sel(a).values, [0.25, 0.25])
    np.testing.assert_allclose(h.pmf.sel(a).values, [0.5, 0.5, 0.0])  # the scale only
    b = {"g": "b", "item": "q1"}
    assert h.n_nonsubstantive.sel(b).values.tolist() == [2, 0] and int(h.n_missing.sel(b)) == 1
    pooled = xl.human_marginal(h)
    np.testing.assert_allclose(
        pooled.nonsubstantive_rate.sel(item="q1").values, [3 / 8, 1 / 8], atol=1e-15
    )
    with pytest.raises(DesignError, match="means both 'missing' and \"Don't know\""):
        xl.human_pmf(t, ["q1"], scale=(1, 3), missing=[8], nonsubstantive={DK: [8]})
    with pytest.raises(DesignError, match="outside the scale"):
        xl.human_pmf(t, ["q1"], scale=(1, 3), nonsubstantive={DK: [8]})  # 9 and 99 undeclared


def test_an_option_offered_by_some_items_is_nan_where_it_is_not_offered():
    # as in a results file: an item that does not offer "Refused" has no rate of it, not 0
    t = pd.DataFrame({"g": ["a", "a", "b", "b"], "q1": [1, 9, 8, 2], "q2": [1, 2, 8, 3]})
    h = xl.human_pmf(t, ["q1", "q2"], scale=(1, 3), by=["g"],
                     nonsubstantive={DK: [8], REF: {"q1": [9]}})  # fmt: skip
    assert h.n_nonsubstantive.sel(g="a", item="q1").values.tolist() == [0, 1]
    np.testing.assert_allclose(h.nonsubstantive_rate.sel(g="a", item="q1").values, [0, 0.5])
    q2 = h.nonsubstantive_rate.sel(item="q2")
    np.testing.assert_allclose(q2.sel(option=DK).values, [0.0, 0.5])
    assert bool(q2.sel(option=REF).isnull().all())  # not offered by q2
    pooled = xl.human_marginal(h).nonsubstantive_rate
    assert bool(pooled.sel(item="q2", option=REF).isnull())
    np.testing.assert_allclose(pooled.sel(item="q1").values, [0.25, 0.25])
    assert h.likert.attrs["human_nonsubstantive_codes"][REF] == {"q1": [9]}
    # a code of an option that the item does not offer is no answer of that item's scale
    with pytest.raises(DesignError, match="column 'q2' holds 1 answer"):
        xl.human_pmf(t.assign(q2=[9, 2, 8, 3]), ["q1", "q2"], scale=(1, 3),
                     nonsubstantive={DK: [8], REF: {"q1": [9]}})  # fmt: skip
    with pytest.raises(DesignError, match=r"names item\(s\) \['q3'\]"):
        xl.human_pmf(t, ["q1", "q2"], scale=(1, 3), nonsubstantive={REF: {"q3": [9]}})


def test_an_instrument_gives_each_items_scale_and_codes(tmp_path):
    # the questionnaire as fielded (support.survey): 'self' 1..7 with Don't know = 8, 'tv'
    # 0..7 with no option, 'trust' 1..4 with Don't know and Refused (no codes: not in data)
    from support.survey import SURVEY

    from xlikert.design import load_instrument

    (tmp_path / "survey.toml").write_text(SURVEY)
    survey = load_instrument(tmp_path / "survey.toml")
    t = pd.DataFrame({"self": [1, 7, 8, 4], "tv": [0, 7, 3, 3], "trust": [1, 2, 4, 4]})
    h = xl.human_pmf(t, ["self", "tv", "trust"], instrument=survey)
    assert h.score_min.values.tolist() == [1, 0, 1] and h.score_max.values.tolist() == [7, 7, 4]
    assert h.option.values.tolist() == [DK]  # the one option with a code
    rate = h.nonsubstantive_rate.sel(option=DK)
    assert float(rate.sel(item="self")) == 0.25
    assert bool(rate.sel(item=["tv", "trust"]).isnull().all())
    np.testing.assert_allclose(h.pmf.sel(item="tv").values, [0.25, 0, 0, 0.5, 0, 0, 0, 0.25])
    # what the caller says wins: code 8 counted as missing, and no option left
    missed = xl.human_pmf(t, ["self", "tv", "trust"], instrument=survey, missing=[8])
    assert "option" not in missed.dims and int(missed.n_missing.sel(item="self")) == 1


def test_weighted_pooling_equals_the_pooled_table():
    rng = np.random.default_rng(3)
    n = 400
    t = pd.DataFrame(
        {
            "g": rng.choice(["a", "b", "c"], n),
            "q": rng.choice([1, 2, 3, 8], n, p=[0.3, 0.3, 0.2, 0.2]),
            "w": rng.uniform(0.2, 3.0, n),
        }
    )
    kw = {"scale": (1, 3), "weights": "w", "nonsubstantive": {DK: [8]}}
    pooled = xl.human_marginal(xl.human_pmf(t, ["q"], by=["g"], **kw))
    whole = xl.human_pmf(t, ["q"], **kw)
    for v in ("nonsubstantive_rate", "n_answered", "nonsubstantive_weight"):
        np.testing.assert_allclose(pooled[v].values, whole[v].values, rtol=1e-12)
    w = t.w.to_numpy()
    assert float(whole.n_answered[0]) == pytest.approx(w.sum() ** 2 / (w**2).sum())


def test_alignment_compares_the_rates_beside_the_opinion_metrics():
    ds = _results()
    rng = np.random.default_rng(0)
    t = pd.DataFrame(
        {q: rng.choice([1, 2, 3, 8, 9], 200, p=[0.3, 0.3, 0.2, 0.15, 0.05]) for q in ("q1", "q2")}
    )
    h = xl.human_pmf(t, ["q1", "q2"], scale=(1, 3), nonsubstantive={DK: [8], REF: [9]})
    a = xl.alignment(ds, h)
    assert {"estimate", "nonsubstantive_difference", "nonsubstantive_se"} <= set(a.data_vars)
    diff = a.nonsubstantive_difference.sel(model="m1", item="q1", option=DK)
    want = 0.2 / 0.95 - float(h.nonsubstantive_rate.sel(item="q1", option=DK))
    assert float(diff) == pytest.approx(want, abs=1e-15)
    r = float(h.nonsubstantive_rate.sel(item="q1", option=DK))
    se = float(a.nonsubstantive_se.sel(item="q1", option=DK))
    assert se == pytest.approx(np.sqrt(r * (1 - r) / int(h.n_answered.sel(item="q1"))))
    assert bool(a.nonsubstantive_difference.sel(item="q2", option=REF).isnull().all())
    # a bare PMF (no masses) gets the opinion metrics only
    assert "nonsubstantive_difference" not in xl.alignment(ds.pmf, h)
    with pytest.raises(DesignError, match=r"human only \['Refused'\]"):
        nonsubstantive_alignment(ds.sel(option=[DK]), h)


@pytest.mark.parametrize("weighted", [False, True])
def test_nonsubstantive_se_matches_a_simulation(weighted):
    """The SE formula against the spread of the human rate over simulated surveys.

    The simulation checks the formula only; no result of xlikert is simulated.
    """
    rng = np.random.default_rng(11)
    n, r_true, reps = 250, 0.18, 4000
    weights = rng.uniform(0.3, 3.0, n) if weighted else np.ones(n)
    codes = np.where(rng.random((reps, n)) < r_true, 8, rng.integers(1, 6, (reps, n)))
    t = pd.DataFrame(
        {"rep": np.repeat(np.arange(reps), n), "q": codes.ravel(), "w": np.tile(weights, reps)}
    )
    h = xl.human_pmf(  # each simulated survey is one group
        t, ["q"], scale=(1, 5), by=["rep"], weights="w" if weighted else None,
        nonsubstantive={DK: [8]},
    )  # fmt: skip
    rates = h.nonsubstantive_rate.squeeze(["item", "option"]).values
    ses = np.sqrt(rates * (1 - rates) / h.n_answered.squeeze("item").values)
    sd = np.std(rates, ddof=1)
    # the SD of a sample SD over 4000 replicates is ~1.1 %: 5 % is a real check
    assert np.mean(ses) == pytest.approx(sd, rel=0.05)
    assert np.mean(rates) == pytest.approx(r_true, abs=3 * sd / np.sqrt(reps) + 1e-3)


def test_human_counts_with_nonsubstantive_counts_equal_the_table():
    t = pd.DataFrame({"g": ["a", "a", "a", "b", "b"], "q": [1, 2, 8, 2, 8]})
    from_table = xl.human_pmf(t, ["q"], scale=(1, 2), by=["g"], nonsubstantive={DK: [8]})
    counts = xr.DataArray(
        [[[1, 1]], [[0, 1]]], dims=("g", "item", "score"),
        coords={"g": ["a", "b"], "item": ["q"], "score": [1, 2]},
    )  # fmt: skip
    ns = xr.DataArray([[[1]], [[1]]], dims=("g", "item", "option"), coords={"option": [DK]})
    from_counts = xl.human_pmf_from_counts(counts, nonsubstantive=ns)
    for v in ("pmf", "n", "n_nonsubstantive", "nonsubstantive_rate", "n_answered"):
        np.testing.assert_array_equal(from_counts[v].values, from_table[v].values)
    with pytest.raises(DesignError, match="non-negative integers"):
        xl.human_pmf_from_counts(counts, nonsubstantive=ns - 2)
