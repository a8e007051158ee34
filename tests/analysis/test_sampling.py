"""Sampling-cost formulas against brute force and against simulation.

Simulation is used here, and only here, to check the analytic formulas.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from xlikert import sampling
from xlikert.core.errors import DesignError, InvalidPMFError, XlikertError
from xlikert.datasets import synthetic_pmf


def _draw_composites(pmf: xr.DataArray, size: tuple[int, ...], rng) -> np.ndarray:
    """Simulated composite answers: shape (*factors, *size), items drawn independently."""
    p = pmf.transpose(..., "item", "score").values
    cdf = np.cumsum(p, axis=-1)
    scores = pmf["score"].values
    cond_shape = p.shape[:-2]
    n_items = p.shape[-2]
    u = rng.random((*cond_shape, *size, n_items))
    cdf_b = cdf.reshape(*cond_shape, *(1,) * len(size), n_items, -1)
    idx = (u[..., None] > cdf_b).sum(-1).clip(max=len(scores) - 1)
    return scores[idx].sum(-1)


def test_composite_moments_brute_force():
    pmf = synthetic_pmf({"m": 2}, n_items=3, scale=(1, 4), seed=3)
    mom = sampling.composite_moments(pmf)
    for i in range(2):
        p = pmf.isel(m=i).values
        mean = var = 0.0
        mean2 = 0.0
        for combo in itertools.product(range(4), repeat=3):
            w = np.prod([p[k, combo[k]] for k in range(3)])
            s = sum(c + 1 for c in combo)
            mean += w * s
            mean2 += w * s * s
        var = mean2 - mean**2
        assert mom["mean"].values[i] == pytest.approx(mean, rel=1e-12)
        assert mom["var"].values[i] == pytest.approx(var, rel=1e-10)


def test_standard_error_matches_simulation():
    rng = np.random.default_rng(1)
    pmf = synthetic_pmf({"model": 2, "target": 2}, n_items=5, seed=2)
    n, reps = 20, 3000
    draws = _draw_composites(pmf, (reps, n), rng)  # (model, target, reps, n)
    sim_se = draws.mean(-1).std(-1, ddof=1)
    se = sampling.standard_error(pmf, n=n).sel(n=n).values
    # SD of a sample SD from `reps` replications is about se / sqrt(2 reps)
    tol = 4 * se / np.sqrt(2 * reps)
    assert np.all(np.abs(sim_se - se) < tol)


def test_standard_error_of_mean_over_dim_matches_simulation():
    rng = np.random.default_rng(5)
    pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=4, seed=4)
    n, reps = 10, 3000
    draws = _draw_composites(pmf, (reps, n), rng)  # (model, target, reps, n)
    est = draws.mean(-1).mean(1)  # model-level score averaged over targets
    sim_se = est.std(-1, ddof=1)
    se = sampling.standard_error(pmf, n=n, dim="target").sel(n=n).values
    assert np.all(np.abs(sim_se - se) < 4 * se / np.sqrt(2 * reps))


def test_standard_error_scaling_and_errors():
    pmf = synthetic_pmf({"model": 2}, n_items=3)
    se = sampling.standard_error(pmf, n=[1, 100])
    np.testing.assert_allclose(se.sel(n=1) / se.sel(n=100), 10.0)
    np.testing.assert_allclose(se.sel(n=1) ** 2, sampling.composite_moments(pmf)["var"])
    with pytest.raises(XlikertError, match="positive integers"):
        sampling.standard_error(pmf, n=0)
    with pytest.raises(DesignError, match="target"):
        sampling.standard_error(pmf, n=10, dim="target")


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 4), min_size=1, max_size=3),
    seed=st.integers(0, 10_000),
)
def test_effects_against_explicit_coefficients(sizes, seed):
    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in range(len(sizes))]
    mu = xr.DataArray(rng.normal(size=sizes), dims=names)
    var = xr.DataArray(rng.gamma(2.0, size=sizes), dims=names)
    dims_sizes = dict(zip(names, sizes, strict=True))
    recon = xr.zeros_like(mu) + float(mu.mean())
    for r in range(1, len(names) + 1):
        for term in itertools.combinations(names, r):
            e = sampling.effect_means(mu, term)
            v = sampling.effect_variances(var, term)
            for lv in itertools.product(*(range(dims_sizes[f]) for f in term)):
                levels = dict(zip(term, lv, strict=True))
                alpha = sampling.effect_coefficients(dims_sizes, term, levels)
                # sum to zero over every factor in the term
                for f in term:
                    assert np.allclose(alpha.sum(axis=names.index(f)), 0.0)
                sel = dict(zip(term, lv, strict=True))
                assert float(e.isel(sel)) == pytest.approx(
                    float((alpha * mu.values).sum()), abs=1e-12
                )
                assert float(v.isel(sel)) == pytest.approx(
                    float((alpha**2 * var.values).sum()), rel=1e-10, abs=1e-14
                )
            recon = recon + e
    # ANOVA identity: grand mean plus every effect rebuilds every cell mean
    np.testing.assert_allclose(recon.transpose(*names).values, mu.values, atol=1e-12)


def test_main_effect_is_marginal_minus_grand():
    pmf = synthetic_pmf({"model": 3, "target": 4}, n_items=4, seed=9)
    mean = sampling.composite_moments(pmf)["mean"]
    df = sampling.flip_probability(pmf, n=[10])
    got = df[df.term == "target"].set_index("level")["E"]
    want = (mean.mean("model") - mean.mean()).to_pandas()
    np.testing.assert_allclose(got.loc[want.index].values, want.values, atol=1e-12)


def _draw_cell_means(pmf: xr.DataArray, n: int, reps: int, rng) -> np.ndarray:
    """Simulated per-condition means of ``n`` composite answers: shape (reps, *factors).

    Exact in law and independent of the engine: the ``n`` answers to one item are
    summarised by their score counts, Multinomial(n, item PMF), so the cost does not
    grow with ``n``.
    """
    p = pmf.transpose(..., "item", "score").values
    counts = rng.multinomial(n, p, size=(reps, *p.shape[:-1]))  # (reps, *cells, item, score)
    return (counts @ pmf["score"].values.astype(float)).sum(-1) / n


def test_flip_probability_matches_simulation():
    """The estimator's mean and SD, and P(sign flip), against 40,000 simulated studies.

    Monte Carlo tolerances are 4 standard errors. A sign flip counts an estimate of
    exactly zero as half a flip (the discrete estimator puts mass on 0); with that,
    the normal approximation was within 0.0005 of 2,000,000-replication simulations of
    this design for N = 10, 30 and 100, so 0.002 is allowed for it. A 10% error in the
    estimator's SD moves the informative flip probabilities by 0.02 or more.
    """
    rng = np.random.default_rng(11)
    pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=4, seed=12, concentration=0.8)
    n, reps, approx = 100, 40_000, 0.002
    df = sampling.flip_probability(pmf, n=[n])
    est_cells = xr.DataArray(
        _draw_cell_means(pmf, n, reps, rng),
        dims=("rep", "model", "target"),
        coords={"model": pmf.model, "target": pmf.target},
    )
    checked = informative = 0
    for term in [("model",), ("target",), ("model", "target")]:
        est = sampling.effect_means(  # linear, so applies per replication
            est_cells, term, factors=("model", "target")
        )
        exact = df[df.term == ":".join(term)]
        stacked = est.stack(_p=list(term)).transpose("_p", "rep")
        for j, idx in enumerate(stacked["_p"].values):
            idx = idx if isinstance(idx, tuple) else (idx,)
            row = exact[exact.level == " × ".join(idx)].iloc[0]
            sims = stacked.values[j]
            what = (term, idx)
            assert abs(sims.mean() - row.E) < 4 * row.se / np.sqrt(reps), what
            # SD of a sample SD of `reps` near-normal draws is about se / sqrt(2 reps)
            assert abs(sims.std(ddof=1) / row.se - 1) < 4 / np.sqrt(2 * reps), what
            emp = np.mean(np.sign(sims) == -np.sign(row.E)) + 0.5 * np.mean(sims == 0)
            p = row.p_flip
            tol = 4 * np.sqrt(p * (1 - p) / reps) + approx
            assert abs(emp - p) < tol, (*what, emp, p, tol)
            checked += 1
            informative += 0.05 < p < 0.45
    assert checked == 2 + 3 + 6
    assert informative >= 4  # flip probabilities sensitive to the SD, not all ~0


def test_flip_table_bins_and_shares():
    pmf = synthetic_pmf({"model": 3, "target": 3}, n_items=6, seed=1)
    df = sampling.flip_probability(pmf, n=[10, 100])
    tab = sampling.flip_table(df, bins=[0, 1, 3, np.inf])
    assert list(tab.columns) == ["Params (%)", "N=10", "N=100"]
    assert tab["Params (%)"].sum() == pytest.approx(100.0)
    one = df[df.n == 10]
    small = one[one.E.abs() < 1]
    if len(small):
        assert tab.loc["[0, 1)", "N=10"] == pytest.approx(small.p_flip.mean())
    # more samples never raise the mean flip probability
    ok = tab.dropna()
    assert np.all(ok["N=100"].values <= ok["N=10"].values + 1e-15)


def test_flip_probability_zero_effect_and_errors():
    pmf = synthetic_pmf({"model": 2}, n_items=2, seed=0)
    same = xr.concat([pmf.isel(model=0)] * 2, dim="model").assign_coords(model=["a", "b"])
    df = sampling.flip_probability(same, n=[10])
    np.testing.assert_allclose(df.p_flip, 0.5)
    with pytest.raises(DesignError, match="at least one factor"):
        sampling.flip_probability(pmf.isel(model=0), n=[10])
    with pytest.raises(DesignError, match="nope"):
        sampling.flip_probability(pmf, factors=["nope"])


def test_flip_probability_holds_one_level_factors_constant():
    pmf = synthetic_pmf({"model": 1, "target": 3}, n_items=3, seed=2)
    df = sampling.flip_probability(pmf, n=[10, 100])
    alone = sampling.flip_probability(pmf.isel(model=0, drop=True), n=[10, 100])
    pd.testing.assert_frame_equal(df, alone, check_like=False, check_flags=False)
    assert df.term.unique().tolist() == ["target"]  # no model row with p_flip 0.5
    assert df.attrs["constant_factors"] == {"model": str(pmf.model.values[0])}
    none = sampling.flip_probability(pmf.isel(target=[0]), n=[10])
    assert none.empty and list(none.columns) == list(df.columns)
    with pytest.raises(DesignError, match="every factor has one level"):
        sampling.flip_table(none)


def _decoding_grid(pmf: xr.DataArray, temps, top_ps) -> xr.DataArray:
    """Temperature-scaled then nucleus-truncated PMFs (brute-force construction)."""
    out = np.empty((*pmf.shape[:-1], len(temps), len(top_ps), pmf.sizes["score"]))
    flat = pmf.values.reshape(-1, pmf.sizes["score"])
    res = out.reshape(-1, len(temps), len(top_ps), pmf.sizes["score"])
    for r, p in enumerate(flat):
        for i, t in enumerate(temps):
            q = p ** (1.0 / t)
            q = q / q.sum()
            for j, tp in enumerate(top_ps):
                order = np.argsort(-q, kind="stable")
                cum = np.cumsum(q[order])
                keep = order[: int(np.searchsorted(cum, tp - 1e-12) + 1)]
                z = np.zeros_like(q)
                z[keep] = q[keep]
                res[r, i, j] = z / z.sum()
    dims = (*pmf.dims[:-1], "temperature", "top_p", "score")
    coords = {d: pmf[d] for d in pmf.dims}
    coords.update(temperature=list(temps), top_p=list(top_ps))
    return xr.DataArray(out, dims=dims, coords=coords)


def test_decoding_bias_brute_force_and_table():
    pmf = synthetic_pmf({"model": 2, "target": 2}, n_items=3, seed=7)
    grid = _decoding_grid(pmf, [0.5, 1.0, 1.3], [0.8, 1.0])
    ds = xr.Dataset({"pmf": pmf, "decoding_pmf": grid})
    bias = sampling.decoding_bias(ds)
    assert set(bias.dims) == {"model", "target", "temperature", "top_p"}
    assert float(abs(bias.sel(temperature=1.0, top_p=1.0)).max()) < 1e-12
    y = pmf.score.values
    for m, t, ti, pi in itertools.product(range(2), range(2), range(3), range(2)):
        g = grid.isel(model=m, target=t, temperature=ti, top_p=pi).values
        native = pmf.isel(model=m, target=t).values
        want = float((g * y).sum() - (native * y).sum())
        assert float(bias.isel(model=m, target=t, temperature=ti, top_p=pi)) == pytest.approx(want)
    cns = xr.DataArray(
        [[0.9, 0.8], [0.7, 0.6]],
        dims=("model", "target"),
        coords={"model": pmf.model, "target": pmf.target},
    )
    tab, stats = sampling.decoding_bias_table(bias, consensus=cns)
    a = abs(bias.sel(model="model0"))
    assert tab.loc["model0", "M|Bias|"] == pytest.approx(float(a.mean()))
    assert tab.loc["model0", "SD_Bias"] == pytest.approx(float(bias.sel(model="model0").std()))
    per = abs(bias).mean(["temperature", "top_p"]).transpose("model", "target").values.ravel()
    assert stats["r"] == pytest.approx(np.corrcoef(cns.values.ravel(), per)[0, 1])
    assert stats["n"] == 4


def test_decoding_bias_undefined_where_nucleus_has_no_valid_token():
    pmf = synthetic_pmf({"model": 2}, n_items=3, seed=3)
    grid = _decoding_grid(pmf, [0.1, 1.0], [0.8, 1.0]).copy()
    # the collector's encoding of "no valid token in the nucleus": all-NaN PMF
    grid[0, 1, 0, 0, :] = np.nan
    ds = xr.Dataset({"pmf": pmf, "decoding_pmf": grid})
    bias = sampling.decoding_bias(ds)
    assert bias.attrs["n_undefined"] == 1
    assert bias.attrs["n_unmeasured"] == 0
    # not measured (NaN valid mass, as a top-k-bounded server writes) is counted apart
    vm = xr.ones_like(grid.isel(score=0, drop=True))
    vm[0, 1, 0, 0] = 0.0
    vm[1, :, 1, 1] = np.nan
    g2 = grid.copy()
    g2[1, :, 1, 1, :] = np.nan
    b2 = sampling.decoding_bias(
        xr.Dataset({"pmf": pmf, "decoding_pmf": g2, "decoding_valid_mass": vm})
    )
    assert (b2.attrs["n_undefined"], b2.attrs["n_unmeasured"]) == (1, 1)
    assert np.isnan(float(bias.isel(model=0, temperature=0, top_p=0)))
    assert int(bias.isnull().sum()) == 1
    tab, _ = sampling.decoding_bias_table(bias)
    assert np.isfinite(tab.to_numpy()).all()
    # a PMF with only some scores missing is malformed, not "undefined"
    grid[1, 2, 0, 0, 3] = np.nan
    with pytest.raises(InvalidPMFError, match="NaN"):
        sampling.decoding_bias(xr.Dataset({"pmf": pmf, "decoding_pmf": grid}))


def test_decoding_bias_needs_grid():
    ds = xr.Dataset({"pmf": synthetic_pmf({"model": 2}, n_items=2)})
    with pytest.raises(InvalidPMFError, match="decoding_pmf"):
        sampling.decoding_bias(ds)


def test_se_table_sorted_by_consensus():
    pmf = synthetic_pmf({"model": 3, "target": 2}, n_items=3)
    cns = xr.DataArray(
        [[0.5, 0.5], [0.9, 0.9], [0.7, 0.7]],
        dims=("model", "target"),
        coords={"model": pmf.model, "target": pmf.target},
    )
    tab = sampling.sampling_se_table(pmf, n=[10, 1_000_000], consensus=cns)
    assert list(tab.index) == ["model1", "model2", "model0"]
    assert list(tab.columns) == ["Cns", "N=10", "N=10^6"]
    se = sampling.standard_error(pmf, n=10).sel(n=10).mean("target")
    assert tab.loc["model0", "N=10"] == pytest.approx(float(se.sel(model="model0")))


def test_tables_take_dask_input():
    # flip_probability fed the lazy moments to a numpy-only ufunc and raised a raw ValueError
    pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=3, seed=2)
    lazy = pmf.chunk({"model": 1})
    eager = sampling.flip_probability(pmf, n=[10, 100])
    assert sampling.flip_probability(lazy, n=[10, 100]).equals(eager)
    assert sampling.sampling_se_table(lazy, n=[10]).equals(sampling.sampling_se_table(pmf, n=[10]))
