"""xl.validity: which reading of the model is closest to the people."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.spatial.distance import cityblock, jensenshannon
from scipy.stats import wasserstein_distance

import xlikert as xl
from xlikert.analysis.individual import individual_scores, individual_summary
from xlikert.analysis.validity.core import distance_gradients
from xlikert.core.errors import DesignError, InputTypeError

LEVELS = ["first_token", "greedy", "stated"]


def _pmfs(shape: tuple[int, ...], k: int, rng: np.random.Generator) -> np.ndarray:
    mass = rng.gamma(0.7, size=(*shape, k))
    return mass / mass.sum(-1, keepdims=True)


def _case(seed: int = 0, n_people: int = 400):
    """Two models x three levels x four items on 1..5; humans in two parties."""
    rng = np.random.default_rng(seed)
    items = ["a", "b", "c", "d"]
    pmf = xr.DataArray(
        _pmfs((2, 3, 4), 5, rng), dims=("model", "elicitation", "item", "score"),
        coords={"model": ["m1", "m2"], "elicitation": LEVELS, "item": items,
                "score": np.arange(1, 6)},
    )  # fmt: skip
    table = pd.DataFrame({i: rng.integers(1, 6, n_people) for i in items})
    table["party"] = rng.choice(["D", "R"], n_people)
    human = xl.human_pmf(table, items, scale=(1, 5), by=["party"])
    return pmf, human


def test_distances_equal_scipy_on_every_cell():
    pmf, human = _case()
    v = xl.validity(pmf, human)
    y = np.arange(1, 6)
    checked = 0
    for idx in np.ndindex(v["estimate"].shape[:-1]):
        cell = dict(zip(v["estimate"].dims[:-1], idx, strict=True))
        sel = {d: v[d].values[i] for d, i in cell.items()}
        p = pmf.sel({d: sel[d] for d in pmf.dims if d in sel}).values
        q = human["pmf"].sel({d: sel[d] for d in ("party", "item")}).values
        est = v["estimate"].sel(sel)
        assert float(est.sel(metric="wasserstein")) == pytest.approx(
            wasserstein_distance(y, y, p, q), abs=1e-12
        )
        assert float(est.sel(metric="total_variation")) == pytest.approx(
            0.5 * cityblock(p, q), abs=1e-12
        )
        assert float(est.sel(metric="jensen_shannon")) == pytest.approx(
            jensenshannon(p, q, base=2) ** 2, abs=1e-12
        )
        checked += 1
    assert checked == 2 * 3 * 2 * 4


def test_estimates_and_ses_equal_alignment():
    """The per-cell estimate and SE are xl.alignment's (its numba kernel, another code)."""
    pmf, human = _case(1)
    v = xl.validity(pmf, human)
    a = xl.alignment(pmf, human)
    for m in ("wasserstein", "total_variation", "jensen_shannon"):
        for var in ("estimate", "se"):
            xr.testing.assert_allclose(
                v[var].sel(metric=m, drop=True).transpose(*a[var].dims[:-1]),
                a[var].sel(metric=m, drop=True), atol=1e-12,
            )  # fmt: skip


def _numeric_gradient(f, q: np.ndarray, h: float = 1e-7) -> np.ndarray:
    g = np.zeros_like(q)
    for j in range(q.size):
        up, down = q.copy(), q.copy()
        up[j] += h
        down[j] -= h
        g[j] = (f(up) - f(down)) / (2 * h)
    return g


def test_paired_se_equals_a_by_hand_delta_method():
    """(g' Sigma g) / N with Sigma = diag q - q q' and g the finite-difference gradient of
    metric(p_a, q) - metric(p_b, q) in q."""
    pmf, human = _case(2)
    v = xl.validity(pmf, human)
    y = np.arange(1, 6)
    metrics = {
        "wasserstein": lambda p, q: np.abs(np.cumsum(p - q)[:-1]).sum(),
        "total_variation": lambda p, q: 0.5 * np.abs(p - q).sum(),
        "jensen_shannon": lambda p, q: jensenshannon(p, q, base=2) ** 2,
    }
    assert y.size == 5
    for pair in v["pair"].values:
        a, b = (str(v["level_a"].sel(pair=pair).values), str(v["level_b"].sel(pair=pair).values))
        for model in ("m1", "m2"):
            for party in ("D", "R"):
                for item in ("a", "c"):
                    pa = pmf.sel(model=model, elicitation=a, item=item).values
                    pb = pmf.sel(model=model, elicitation=b, item=item).values
                    q = human["pmf"].sel(party=party, item=item).values
                    n = float(human["n"].sel(party=party, item=item))
                    sigma = np.diag(q) - np.outer(q, q)
                    for name, f in metrics.items():
                        g = _numeric_gradient(lambda x, f=f, pa=pa, pb=pb: f(pa, x) - f(pb, x), q)
                        want = np.sqrt(g @ sigma @ g / n)
                        got = v["difference_se"].sel(pair=pair, model=model, party=party,
                                                     item=item, metric=name)  # fmt: skip
                        assert float(got) == pytest.approx(want, rel=1e-5, abs=1e-9)
                        diff = v["difference"].sel(pair=pair, model=model, party=party,
                                                   item=item, metric=name)  # fmt: skip
                        assert float(diff) == pytest.approx(f(pa, q) - f(pb, q), abs=1e-12)


def test_paired_se_is_below_the_unpaired_one_for_close_levels():
    """Two near levels read against the same humans: the paired SE is far below the SEs
    combined as if independent (what pairing buys)."""
    rng = np.random.default_rng(3)
    q = _pmfs((), 5, rng)
    near = 0.97 * q + 0.03 * _pmfs((), 5, rng)
    far = 0.9 * q + 0.1 * _pmfs((), 5, rng)
    pmf = xr.DataArray(np.stack([near, far])[:, None], dims=("elicitation", "item", "score"),
                       coords={"elicitation": ["a", "b"], "item": ["q"], "score": [1, 2, 3, 4, 5]})  # fmt: skip
    h = xl.human_pmf_from_counts(xr.DataArray(np.round(q * 1000)[None], dims=("item", "score"),
                                              coords={"item": ["q"], "score": [1, 2, 3, 4, 5]}))  # fmt: skip
    v = xl.validity(pmf, h).sel(metric="total_variation")
    unpaired = np.sqrt((v["se"] ** 2).sum("elicitation"))
    assert float(v["difference_se"].isel(pair=0, item=0)) < float(unpaired.isel(item=0))


def test_the_level_that_is_the_human_distribution_ranks_first():
    """Humans drawn from the 'truth' level: it is the closest in at least 95% of 400 draws."""
    rng = np.random.default_rng(4)
    n_items, k, n_people, draws = 3, 5, 300, 400
    truth = _pmfs((n_items,), k, rng)
    others = [0.8 * truth + 0.2 * _pmfs((n_items,), k, rng) for _ in range(3)]
    levels = ["first_token", "truth", "greedy", "own_words"]
    pmf = xr.DataArray(
        np.stack([others[0], truth, others[1], others[2]]),
        dims=("elicitation", "item", "score"),
        coords={"elicitation": levels, "item": ["a", "b", "c"], "score": np.arange(1, k + 1)},
    )
    counts = np.stack([rng.multinomial(n_people, truth[j], size=draws) for j in range(n_items)], 1)
    h = xl.human_pmf_from_counts(xr.DataArray(
        counts, dims=("draw", "item", "score"),
        coords={"draw": np.arange(draws), "item": ["a", "b", "c"], "score": np.arange(1, k + 1)},
    ))  # fmt: skip
    v = xl.validity(pmf, h)
    for metric in ("wasserstein", "total_variation", "jensen_shannon"):
        first = (v["closest"].sel(metric=metric) == "truth").mean()
        assert float(first) >= 0.95, (metric, float(first))
    # the confidence says the same: the truth's lead is mostly large
    conf = v["closest_probability"].where(v["closest"] == "truth")
    assert float(conf.median()) > 0.8


def test_a_cell_without_a_pmf_is_counted_not_compared():
    pmf, human = _case(5)
    pmf = pmf.copy()
    pmf.loc[{"model": "m1", "elicitation": "greedy", "item": "b"}] = np.nan
    v = xl.validity(pmf, human)
    assert int(v["cells_unanswered"].sel(model="m1", elicitation="greedy")) == 1
    assert int(v["cells_unanswered"].sum()) == 1
    assert int(v["items_compared"].sel(model="m1")) == 3
    assert int(v["items_compared"].sel(model="m2")) == 4
    assert bool(v["estimate"].sel(model="m1", elicitation="greedy", item="b").isnull().all())
    # the overall means of m1 are over the three items every level answers
    want = v["estimate"].sel(model="m1", item=["a", "c", "d"]).mean("item")
    xr.testing.assert_allclose(
        v["overall"].sel(model="m1"), want.transpose(*v["overall"].sel(model="m1").dims)
    )


def test_bad_input_is_refused_by_name():
    pmf, human = _case(6)
    with pytest.raises(DesignError, match=r"lack the results' items \['d'\]"):
        xl.validity(pmf, human.sel(item=["a", "b", "c"]))
    with pytest.raises(DesignError, match="factor 'elicitation'"):
        xl.validity(pmf.isel(elicitation=0, drop=True), human)
    with pytest.raises(DesignError, match="one level"):
        xl.validity(pmf.isel(elicitation=[0]), human)
    with pytest.raises(DesignError, match="sample size"):
        xl.validity(pmf, human[["pmf"]])
    with pytest.raises(InputTypeError, match="human PMF Dataset"):
        xl.validity(pmf, human["pmf"])
    with pytest.raises(DesignError, match="no 'respondent' factor"):
        xl.validity(pmf, human, answers=pd.DataFrame({"a": [1]}))


def test_attrs_kept_and_accessor_delegates():
    pmf, human = _case(7)
    ds = pmf.to_dataset(name="pmf")
    ds.attrs["instrument"] = "test"
    v = xl.validity(ds, human)
    assert v.attrs["instrument"] == "test"
    assert "delta method" in v.attrs["se_method"]
    xr.testing.assert_identical(ds.likert.validity(human), v)
    xr.testing.assert_identical(pmf.likert.validity(human), xl.validity(pmf, human))


def _respondents(seed: int = 8, n: int = 40):
    rng = np.random.default_rng(seed)
    ids = [f"r{i}" for i in range(n)]
    pmf = xr.DataArray(
        _pmfs((3, n, 2), 4, rng), dims=("elicitation", "respondent", "item", "score"),
        coords={"elicitation": LEVELS, "respondent": ids, "item": ["a", "b"],
                "score": [1, 2, 3, 4]},
    )  # fmt: skip
    answers = pd.DataFrame({"a": rng.integers(1, 5, n).astype(float),
                            "b": rng.integers(1, 5, n).astype(float)}, index=ids)  # fmt: skip
    answers.iloc[3, 1] = np.nan
    human = xl.human_pmf(answers, ["a", "b"], scale=(1, 4))
    return pmf, answers, human


def test_individual_scores_per_level_with_paired_ses():
    pmf, answers, human = _respondents()
    v = xl.validity(pmf, human, answers=answers)
    s = individual_scores(pmf, answers)
    person = s[["log_score", "rps", "brier"]].mean("item")  # per person over the items
    for metric in ("log_score", "rps", "brier"):
        x = person[metric]
        xr.testing.assert_allclose(
            v["individual"].sel(metric=metric, drop=True), x.mean("respondent")
        )
        want_se = x.std("respondent", ddof=1) / np.sqrt(x.sizes["respondent"])
        xr.testing.assert_allclose(v["individual_se"].sel(metric=metric, drop=True), want_se)
        d = x.sel(elicitation="first_token") - x.sel(elicitation="stated")
        got = v.sel(pair="first_token − stated", metric=metric)
        assert float(got["individual_difference"]) == pytest.approx(float(d.mean()))
        assert float(got["individual_difference_se"]) == pytest.approx(
            float(d.std(ddof=1)) / np.sqrt(d.size)
        )
    assert v["metric"].values.tolist() == [
        "wasserstein", "total_variation", "jensen_shannon", "log_score", "rps", "brier"
    ]  # fmt: skip
    assert set(np.unique(v["closest"].values)) <= set(LEVELS)


def test_skill_equals_individual_summary_on_one_item():
    """With one item each person's mean is their score: the skill over the population and
    its SE are individual_summary's (its own code)."""
    pmf, answers, human = _respondents(9)
    one = pmf.sel(item=["a"])
    v = xl.validity(one, human.sel(item=["a"]), answers=answers[["a"]])
    s = individual_summary(one, answers[["a"]]).sel(item="a", baseline="population", drop=True)
    for metric in ("log_score", "rps", "brier"):
        xr.testing.assert_allclose(
            v["skill"].sel(metric=metric, drop=True), s["skill"].sel(metric=metric, drop=True)
        )
        xr.testing.assert_allclose(
            v["skill_se"].sel(metric=metric, drop=True),
            s["skill_se"].sel(metric=metric, drop=True),
        )


def test_skill_difference_se_equals_a_by_hand_delta_method():
    pmf, answers, human = _respondents(10)
    v = xl.validity(pmf, human, answers=answers)
    s = individual_scores(pmf, answers)["brier"].mean("item")
    pop = human["pmf"]  # every row's answers: the population marginal
    base = individual_scores(pop.expand_dims(respondent=pmf["respondent"].values), answers)[
        "brier"
    ].mean("item")
    a, c, b = (s.sel(elicitation="greedy").values, s.sel(elicitation="stated").values,
               base.values)  # fmt: skip
    n = a.size
    mean = lambda x: x.sum() / n  # noqa: E731
    gap = 0.0 - mean(b)
    d = (mean(a) - mean(c)) / gap
    # gradient of (A - C)/(0 - B) in (A, C, B), applied to the per-person covariance
    g = np.array([1 / gap, -1 / gap, (mean(a) - mean(c)) / gap**2])
    cov = np.cov(np.stack([a, c, b]), ddof=1) / n
    got = v.sel(pair="greedy − stated", metric="brier")
    assert float(got["skill_difference"]) == pytest.approx(d)
    assert float(got["skill_difference_se"]) == pytest.approx(np.sqrt(g @ cov @ g))


def test_gradient_core_matches_finite_differences():
    rng = np.random.default_rng(11)
    p, q = _pmfs((), 6, rng), _pmfs((), 6, rng)
    values, grads = distance_gradients(p, q)
    fs = [
        lambda x: np.abs(np.cumsum(p - x)[:-1]).sum(),
        lambda x: 0.5 * np.abs(p - x).sum(),
        lambda x: (
            0.5 * (p * np.log2(2 * p / (p + x))).sum() + 0.5 * (x * np.log2(2 * x / (p + x))).sum()
        ),
    ]
    for i, f in enumerate(fs):
        assert values[i] == pytest.approx(f(q))
        np.testing.assert_allclose(grads[i], _numeric_gradient(f, q), rtol=1e-5, atol=1e-8)
