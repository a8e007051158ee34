"""Human PMFs and alignment: metrics against independent computations, SEs and the noise
ceiling against simulated human samples, bad human data, silicon samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.spatial.distance import jensenshannon
from scipy.stats import wasserstein_distance

import xlikert as xl
from xlikert import kernels
from xlikert.core.errors import DesignError, InvalidPMFError
from xlikert.kernels.alignment import _gini_binomial_numpy

SCORES = np.arange(1, 8)


def _pmfs(rng, shape, k=7, zeros=True):
    p = rng.dirichlet(np.full(k, 0.7), size=shape)
    if zeros:
        p[rng.random(p.shape) < 0.15] = 0.0
        p[..., 0] += (p.sum(-1) == 0).astype(float)
        p /= p.sum(-1, keepdims=True)
    return p


def _da(values, dims, coords):
    return xr.DataArray(values, dims=dims, coords=coords)


@pytest.mark.parametrize("name", ["alignment_metrics", "noise_ceiling"])
def test_kernels_equal_numpy_twins(name):
    rng = np.random.default_rng(1)
    p, q = _pmfs(rng, (6, 4)), _pmfs(rng, (6, 4))
    y = np.arange(1.0, 8)
    if name == "alignment_metrics":
        args = (p, q, y, np.zeros(8))
    else:  # integer sizes (exact branch) and a non-integer n_eff (normal branch)
        args = (q, y, np.array([1.0, 7.0, 250.0, 61.3]), np.zeros(4))
    got = kernels.get_kernel(name, "numba")(*args)
    want = kernels.get_kernel(name, "numpy")(*args)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_metrics_equal_independent_computations():
    rng = np.random.default_rng(2)
    p = _da(_pmfs(rng, (3, 2)), ("model", "item", "score"), {"item": ["a", "b"], "score": SCORES})
    q = _da(_pmfs(rng, (4, 2)), ("party", "item", "score"), {"item": ["a", "b"], "score": SCORES})
    for which in ("numba", "numpy"):
        w1 = xl.wasserstein(p, q, kernels=which)
        tv = xl.total_variation(p, q, kernels=which)
        js = xl.jensen_shannon(p, q, kernels=which)
        dm = xl.mean_difference(p, q, kernels=which)
        rep = xl.representativeness(p, q, kernels=which)
        assert w1.dims == ("model", "party", "item")
        for m in range(3):
            for g in range(4):
                for i in range(2):
                    a, b = p.values[m, i], q.values[g, i]
                    cell = {"model": m, "party": g, "item": i}
                    ref = wasserstein_distance(SCORES, SCORES, a, b)
                    assert float(w1[cell]) == pytest.approx(ref, abs=1e-12)
                    assert float(rep[cell]) == pytest.approx(1 - ref / 6, abs=1e-12)
                    assert float(tv[cell]) == pytest.approx(np.abs(a - b).sum() / 2, abs=1e-12)
                    mid = (a + b) / 2
                    kl = [np.sum(x[x > 0] * np.log2(x[x > 0] / mid[x > 0])) for x in (a, b)]
                    assert float(js[cell]) == pytest.approx(sum(kl) / 2, abs=1e-12)
                    assert float(js[cell]) == pytest.approx(jensenshannon(a, b, base=2) ** 2)
                    assert float(dm[cell]) == pytest.approx((a - b) @ SCORES, abs=1e-12)


def test_composites_and_mixtures_are_pmfs_alike():
    rng = np.random.default_rng(3)
    items = _da(_pmfs(rng, (2, 3)), ("model", "item", "score"), {"score": SCORES})
    comp = xl.composite(items)
    human = _da(_pmfs(rng, (), k=comp.sizes["score"]), ("score",), {"score": comp.score})
    got = xl.wasserstein(comp, human)
    for m in range(2):
        want = wasserstein_distance(comp.score, comp.score, comp.values[m], human.values)
        assert float(got[m]) == pytest.approx(want, abs=1e-10)
    rep = xl.representativeness(comp, human)
    np.testing.assert_allclose(rep, 1 - got / (comp.sizes["score"] - 1))
    mix = xl.grand_mixture(items)  # a mixture (mean over models), per item
    np.testing.assert_allclose(
        xl.mean_difference(mix, items.isel(model=0)),
        xl.mean_difference(items, items.isel(model=0)).mean("model"),
        atol=1e-12,
    )


def _respondents(rng, n, q, groups=None):
    """A table of ``n`` respondents answering items ``a`` and ``b`` with PMF ``q``."""
    t = pd.DataFrame({c: rng.choice(SCORES, size=n, p=q) for c in ("a", "b")})
    for g, levels in (groups or {}).items():
        t[g] = rng.choice(levels, size=n)
    return t


def test_human_pmf_counts_missing_and_weights():
    rng = np.random.default_rng(4)
    t = _respondents(rng, 300, np.full(7, 1 / 7), {"party": ["Dem", "Rep"]})
    t.loc[:9, "a"] = np.nan
    t.loc[10:14, "a"] = 9  # "refused"
    h = xl.human_pmf(t, ["a", "b"], scale=(1, 7), by=["party"], missing=[9])
    assert h.pmf.dims == ("party", "item", "score")
    np.testing.assert_allclose(h.pmf.sum("score"), 1.0)
    assert int(h.n_missing.sel(item="a").sum()) == 15 and int(h.n_missing.sel(item="b").sum()) == 0
    assert int(h.n.sel(item="a").sum()) == 285 and int(h.n.sel(item="b").sum()) == 300
    for party in ("Dem", "Rep"):
        sub = t[t.party == party]
        counts = sub["b"].value_counts().reindex(SCORES, fill_value=0)
        np.testing.assert_allclose(h.pmf.sel(party=party, item="b"), counts / counts.sum())
    # weights: the weighted shares, Kish n_eff, the sum of weights
    t["w"] = rng.uniform(0.2, 3.0, len(t))
    hw = xl.human_pmf(t, ["b"], scale=(1, 7), by=["party"], weights="w")
    assert hw.likert.attrs["human_weighted"] is True
    sub = t[t.party == "Rep"]
    want = sub.groupby("b")["w"].sum().reindex(SCORES, fill_value=0) / sub["w"].sum()
    np.testing.assert_allclose(hw.pmf.sel(party="Rep", item="b"), want)
    assert float(hw.n_eff.sel(party="Rep", item="b")) == pytest.approx(
        sub["w"].sum() ** 2 / (sub["w"] ** 2).sum()
    )
    # the pooled marginal equals the pmf of all respondents
    pooled = xl.human_marginal(hw)
    all_w = t.groupby("b")["w"].sum().reindex(SCORES, fill_value=0) / t["w"].sum()
    np.testing.assert_allclose(pooled.pmf.sel(item="b"), all_w)
    assert float(pooled.n_eff.sel(item="b")) == pytest.approx(
        t["w"].sum() ** 2 / (t["w"] ** 2).sum()
    )
    # the SE uses n_eff
    model = h.pmf.isel(party=0, drop=True).sel(item=["b"])
    a_w = xl.alignment(model, hw.sel(item=["b"]))
    a_u = xl.alignment(model, xl.human_pmf(t, ["b"], scale=(1, 7), by=["party"]))
    assert a_w.attrs["sample_size"] == "n_eff" and a_u.attrs["sample_size"] == "n"
    assert bool((a_w.se > a_u.se).sel(metric="mean_difference").all())


def test_human_from_counts_and_composite():
    counts = xr.DataArray(
        [[[5, 3, 2], [0, 4, 6]]],
        dims=("edu", "item", "score"),
        coords={"edu": ["college"], "item": ["x", "y"], "score": [1, 2, 3]},
    )
    h = xl.human_pmf_from_counts(counts)
    np.testing.assert_allclose(h.pmf.sel(edu="college", item="x"), [0.5, 0.3, 0.2])
    assert h.n.values.tolist() == [[10, 10]]
    t = pd.DataFrame({"x": [1, 2, 3, 3], "y": [1, 1, 3, np.nan]})
    c = xl.human_composite(t, ["x", "y"], scale=(1, 3))
    assert c.pmf.score.values.tolist() == [2, 3, 4, 5, 6]
    np.testing.assert_allclose(c.pmf, [1 / 3, 1 / 3, 0, 0, 1 / 3])
    assert int(c.n) == 3 and int(c.n_missing) == 1


def _simulate(rng, q, n, sims):
    return rng.multinomial(n, q, size=sims) / n


def test_standard_errors_match_simulated_human_samples():
    """Delta-method SEs against the spread of the metric over simulated human samples."""
    rng = np.random.default_rng(5)
    q = np.array([0.05, 0.15, 0.3, 0.25, 0.15, 0.07, 0.03])
    p = np.array([0.3, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02])  # CDFs apart: W1 differentiable
    n, sims = 400, 4000
    counts = _da([np.round(q * n)], ("item", "score"), {"item": ["a"], "score": SCORES})
    human = xl.human_pmf_from_counts(counts)
    q_hat = human.pmf.values[0]
    a = xl.alignment(_da([p], ("item", "score"), {"item": ["a"], "score": SCORES}), human)
    samples = _da(_simulate(rng, q_hat, n, sims), ("sim", "score"), {"score": SCORES})
    model = _da(p, ("score",), {"score": SCORES})
    sim = {
        "wasserstein": xl.wasserstein(model, samples),
        "representativeness": xl.representativeness(model, samples),
        "total_variation": xl.total_variation(model, samples),
        "jensen_shannon": xl.jensen_shannon(model, samples),
        "mean_difference": xl.mean_difference(model, samples),
    }
    # the SD of an SD estimated from S draws is about SD / sqrt(2 S): 5 of them, plus the
    # delta method's own O(1/n) error
    rtol = 5 / np.sqrt(2 * sims) + 0.03
    for metric, values in sim.items():
        se = float(a.se.sel(item="a", metric=metric))
        assert float(values.std()) == pytest.approx(se, rel=rtol), metric
    # Wald coverage of the 95% interval around the simulated estimates
    for metric in ("wasserstein", "mean_difference"):
        se = float(a.se.sel(item="a", metric=metric))
        truth = float(a.estimate.sel(item="a", metric=metric))
        cover = np.mean(np.abs(sim[metric].values - truth) <= 1.96 * se)
        assert abs(cover - 0.95) < 4 * np.sqrt(0.95 * 0.05 / sims) + 0.01, metric


@pytest.mark.parametrize("n", [30, 300])
def test_noise_ceiling_matches_two_simulated_samples(n):
    rng = np.random.default_rng(6 + n)
    q = np.array([0.1, 0.2, 0.3, 0.2, 0.1, 0.07, 0.03])
    counts = _da([q * 1000], ("item", "score"), {"item": ["a"], "score": SCORES})
    human = xl.human_pmf_from_counts(counts).assign(n=lambda d: d.n * 0 + n)
    ceiling = xl.noise_ceiling(human).sel(item="a")
    sims = 4000
    s1, s2 = (
        _da(_simulate(rng, q, n, sims), ("sim", "score"), {"score": SCORES}) for _ in range(2)
    )
    sim = {
        "wasserstein": xl.wasserstein(s1, s2),
        "representativeness": xl.representativeness(s1, s2),
        "total_variation": xl.total_variation(s1, s2),
        "jensen_shannon": xl.jensen_shannon(s1, s2),
        "mean_difference": abs(xl.mean_difference(s1, s2)),
    }
    for metric, values in sim.items():
        bound = 4 * float(values.std()) / np.sqrt(sims)  # Monte Carlo error of the mean
        if metric in ("jensen_shannon", "mean_difference"):  # stated approximations
            bound += (0.25 if n < 100 else 0.05) * float(values.mean())
        got = float(ceiling.sel(metric=metric))
        assert got == pytest.approx(float(values.mean()), abs=bound), metric
    # a weighted sample's non-integer n_eff takes the normal approximation
    approx = _gini_binomial_numpy(np.array(n + 0.5), np.array(0.3))
    assert float(approx) == pytest.approx(2 * np.sqrt(0.21 / (np.pi * (n + 0.5))))


def test_alignment_broadcasts_and_says_how():
    rng = np.random.default_rng(7)
    t = _respondents(rng, 500, _pmfs(rng, (), zeros=False), {"party": ["D", "I", "R"]})
    human = xl.human_pmf(t, ["a", "b"], scale=(1, 7), by=["party"])
    model = xl.datasets.synthetic_pmf({"model": 2}, n_items=2).assign_coords(item=["a", "b"])
    a = xl.alignment(model, human)
    assert a.estimate.dims == ("model", "party", "item", "metric")
    assert a.ceiling.dims == ("party", "item", "metric")
    attrs = a.likert.attrs
    assert attrs["js_log_base"] == 2 and "delta method" in attrs["se_method"]
    assert bool((a.lower <= a.estimate).all()) and bool((a.estimate <= a.upper).all())
    rep = a.sel(metric="representativeness")
    assert bool(((rep.lower >= 0) & (rep.upper <= 1)).all())
    np.testing.assert_allclose(
        a.estimate.sel(metric="wasserstein"),
        xl.wasserstein(model, human).transpose(*a.estimate.dims[:-1]),
    )
    # netCDF-ready as it stands
    back = a.to_netcdf()
    assert xr.open_dataset(back).metric.values.tolist() == list(xl.analysis.alignment.METRICS)
    assert xr.open_dataset(human.to_netcdf()).likert.attrs["human_groups"] == ["party"]


def test_silicon_population_is_the_weighted_persona_mixture():
    rng = np.random.default_rng(8)
    t = _respondents(rng, 400, np.full(7, 1 / 7), {"party": ["D", "R"], "edu": ["lo", "hi"]})
    t = t[~((t.party == "D") & (t.edu == "hi"))].iloc[:-5]  # unequal cells
    t = pd.concat([t, _respondents(rng, 3, np.full(7, 1 / 7)).assign(party="D", edu="hi")])
    human = xl.human_pmf(t, ["a", "b"], scale=(1, 7), by=["party", "edu"])
    # a model whose personas answer exactly like their groups reproduces the marginals
    model = human.pmf.expand_dims(model=["perfect"])
    np.testing.assert_allclose(
        xl.silicon_population(model, human).sel(model="perfect"), xl.human_marginal(human).pmf
    )
    by_party = xl.silicon_population(model, human, dim="edu")
    np.testing.assert_allclose(
        by_party.sel(model="perfect").transpose(*human.pmf.dims[:1], "item", "score"),
        xl.human_marginal(human, dim="edu").pmf,
    )
    a = xl.alignment(xl.silicon_population(model, human), xl.human_marginal(human))
    np.testing.assert_allclose(a.estimate.sel(metric="wasserstein"), 0.0, atol=1e-12)


def test_bad_human_data_names_column_and_value():
    t = pd.DataFrame({"party": ["D", "R", "R"], "a": [1, 12, 3], "w": [1.0, 1.0, -2.0]})
    with pytest.raises(
        DesignError, match=r"column 'a' .* outside the scale 1..7: value\(s\) \[12\]"
    ):
        xl.human_pmf(t, ["a"], scale=(1, 7))
    with pytest.raises(
        DesignError,
        match=r"column 'a' holds 1 answer\(s\) that are not labels of the item: 'x' \(1\)",
    ):
        xl.human_pmf(t.assign(a=["1", "x", "2"]), ["a"], scale=(1, 7))
    with pytest.raises(DesignError, match="column 'zz' is not in the respondents table"):
        xl.human_pmf(t, ["zz"], scale=(1, 7))
    with pytest.raises(DesignError, match=r"weights column 'w' .* -2\.0"):
        xl.human_pmf(t.assign(a=[1, 2, 3]), ["a"], scale=(1, 7), weights="w")
    with pytest.raises(DesignError, match="group column 'party' has no value for 1"):
        xl.human_pmf(
            t.assign(a=[1, 2, 3], party=["D", None, "R"]), ["a"], scale=(1, 7), by=["party"]
        )
    # an empty group: a categorical level nobody has
    party = pd.Categorical(["D", "R", "R"], categories=["D", "I", "R"])
    with pytest.raises(DesignError, match="group party='I' has no respondents"):
        xl.human_pmf(t.assign(a=[1, 2, 3], party=party), ["a"], scale=(1, 7), by=["party"])
    with pytest.raises(DesignError, match="group party='D' has no answer to item 'a'"):
        xl.human_pmf(t.assign(a=[np.nan, 2, 3]), ["a"], scale=(1, 7), by=["party"])
    # an item the instrument does not have
    inst = xl.design.load_instrument("anes96")
    with pytest.raises(DesignError, match="column 'a' is item 'a', which instrument 'anes96'"):
        xl.human_pmf(t.assign(a=[1, 2, 3]), ["a"], instrument=inst)
    # and in the alignment, an item the model does not have
    human = xl.human_pmf(t.assign(a=[1, 2, 3]), {"a": "selfLR"}, instrument=inst)
    model = xl.datasets.synthetic_pmf({"model": 1}, n_items=1).assign_coords(item=["ClinLR"])
    with pytest.raises(
        DesignError, match=r"dim 'item'.*human only \['selfLR'\], model only \['ClinLR'\]"
    ):
        xl.alignment(model, human)
    with pytest.raises(InvalidPMFError, match="different scales"):
        xl.alignment(model.isel(score=slice(0, 5)).pipe(lambda x: x / x.sum("score")), human)


def test_a_scale_mismatch_names_the_fix():
    """The issue's study: the model's file has the run-wide axis 0..8 (an attendance item
    beside happiness), the human PMF of happiness 1..3."""
    t = pd.DataFrame({"happy": [1, 2, 2, 3, 1]})
    human = xl.human_pmf(t, ["happy"], scale=(1, 3))
    pmf = np.zeros((1, 1, 9))
    pmf[0, 0, 1:4] = [0.3, 0.5, 0.2]
    model = xr.DataArray(pmf, dims=("model", "item", "score"),
                         coords={"model": ["m"], "item": ["happy"], "score": np.arange(9)})  # fmt: skip
    want = (
        "model and human PMFs are on different scales: model 'score' 0..8, human 1..3; read "
        "the human answers on each item's own scale with human_pmf(..., instrument=...) (or "
        "scale={item: (min, max)}), or compare on the human scale with "
        "model.sel(score=slice(1, 3)) (an item's PMF is zero off its own scale)"
    )
    with pytest.raises(InvalidPMFError) as err:
        xl.alignment(model, human)
    assert str(err.value) == want
    # the fix it names works
    a = xl.alignment(model.sel(score=slice(1, 3)), human)
    assert float(a.estimate.sel(item="happy", metric="total_variation").item()) >= 0
    wider = xl.human_pmf(t, ["happy"], scale=(0, 8))
    with pytest.raises(
        InvalidPMFError, match=r"the model's scale with human.sel\(score=slice\(1, 3\)\)"
    ):
        xl.alignment(model.sel(score=slice(1, 3)), wider)


def test_accessor_delegates():
    rng = np.random.default_rng(9)
    t = _respondents(rng, 200, np.full(7, 1 / 7), {"party": ["D", "R"]})
    human = xl.human_pmf(t, ["a", "b"], scale=(1, 7), by=["party"])
    model = human.pmf.expand_dims(model=["m"]).roll(score=1)
    xr.testing.assert_identical(model.likert.alignment(human), xl.alignment(model, human))
    for name in ("wasserstein", "representativeness", "total_variation", "jensen_shannon"):
        xr.testing.assert_identical(
            getattr(model.likert, name)(human), getattr(xl, name)(model, human)
        )
    xr.testing.assert_identical(
        model.likert.silicon_population(human), xl.silicon_population(model, human)
    )
    xr.testing.assert_identical(human.likert.human_marginal(), xl.human_marginal(human))
    xr.testing.assert_identical(human.likert.noise_ceiling(), xl.noise_ceiling(human))


def test_report_section_from_a_csv_of_respondents(tmp_path):
    from click.testing import CliRunner

    from xlikert.cli.report import report_command

    rng = np.random.default_rng(10)
    t = _respondents(rng, 300, _pmfs(rng, (), zeros=False), {"party": ["D", "I", "R"]})
    t["edu"] = rng.choice(["lo", "hi"], len(t))
    t["age"] = rng.integers(18, 90, len(t))  # not a factor: ignored, and said so
    t.to_csv(tmp_path / "people.csv", index=False)
    pmf = xl.datasets.synthetic_pmf(
        {"model": 2, "party": ["D", "I", "R"], "edu": ["lo", "hi"]}, n_items=2
    ).assign_coords(item=["a", "b"])
    pmf.to_dataset().to_netcdf(tmp_path / "results.nc")
    res = CliRunner().invoke(
        report_command,
        [
            str(tmp_path / "results.nc"),
            "-o",
            str(tmp_path / "rep"),
            "--human",
            str(tmp_path / "people.csv"),
        ],
    )
    assert res.exit_code == 0, res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Alignment with human respondents" in md and "columns ignored: \\['age'\\]" in md
    tab = pd.read_csv(tmp_path / "rep" / "tables" / "human_representativeness.csv")
    assert set(tab.group) >= {"all respondents", "party=D", "edu=hi", "party=R, edu=lo"}
    human = xl.human_pmf(t, ["a", "b"], scale=(1, 7), by=["party", "edu"])
    row = tab[(tab.model == "model1") & (tab.group == "party=I") & (tab["item"] == "b")]
    want = xl.alignment(
        xl.silicon_population(pmf, human, dim="edu"), xl.human_marginal(human, dim="edu")
    ).sel(model="model1", party="I", item="b", metric="representativeness")
    assert float(row.estimate.iloc[0]) == pytest.approx(float(want.estimate))
    assert float(row.ceiling.iloc[0]) == pytest.approx(float(want.ceiling))
    assert (tmp_path / "rep" / "figures" / "human_pmfs.png").is_file()
    # bad human data: a clear message, not a traceback
    t.assign(a=t.a.where(t.index != 3, 0)).to_csv(tmp_path / "bad.csv", index=False)
    res = CliRunner().invoke(
        report_command,
        [
            str(tmp_path / "results.nc"),
            "-o",
            str(tmp_path / "rep2"),
            "--human",
            str(tmp_path / "bad.csv"),
        ],
    )
    assert res.exit_code != 0 and "column 'a'" in res.output and "[0]" in res.output
