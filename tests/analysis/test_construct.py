"""Composite, mixtures, contrasts, trends, summaries, Dask, and input errors."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from support.pmfs import make_pmf

import xlikert as xl
from xlikert.core.errors import DesignError, InvalidPMFError, XlikertError


# ----------------------------------------------------------------- composite
@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_composite_equals_sequential_np_convolve(kernels):
    pmf = make_pmf([2, 3], n_items=4, n_scores=5, zeros=0.3, seed=4)
    pmf.attrs["instrument"] = "demo"
    s = xl.composite(pmf, kernels=kernels)
    assert s.dims == ("f0", "f1", "score")
    assert s.score.values.tolist() == list(range(4, 21))
    assert s.attrs["instrument"] == "demo"
    for i in range(2):
        for j in range(3):
            ref = pmf.values[i, j, 0]
            for k in range(1, 4):
                ref = np.convolve(ref, pmf.values[i, j, k])
            np.testing.assert_allclose(s.values[i, j], ref, atol=1e-15)


def test_engines_agree_on_decompose_contrast_trend():
    pmf = make_pmf([3, 2, 2], n_items=3, n_scores=4, zeros=0.2, seed=7)
    pmf = pmf.assign_coords(size=("f0", [1.0, 3.0, 10.0]))
    a = xl.decompose(pmf, kernels="numba")
    b = xl.decompose(pmf, kernels="numpy")
    for node in a.subtree:
        for v in node.data_vars:
            xr.testing.assert_allclose(node[v], b[node.path][v], atol=1e-13)
    xr.testing.assert_allclose(
        xl.contrast(pmf, "f0", kernels="numba"), xl.contrast(pmf, "f0", kernels="numpy"), atol=1e-13
    )
    xr.testing.assert_allclose(
        xl.trend(pmf, "f0", kernels="numba"), xl.trend(pmf, "f0", kernels="numpy"), atol=1e-13
    )


def test_decompose_accepts_composites_and_datasets():
    pmf = make_pmf([2, 3], n_items=2)
    a = xl.decompose(pmf)
    b = xl.decompose(xl.composite(pmf))
    c = xl.decompose(pmf.to_dataset())
    for other in (b, c):
        for node in a.subtree:
            for v in node.data_vars:
                xr.testing.assert_equal(node[v], other[node.path][v])
    assert a.attrs["decompose_factors"] == ["f0", "f1"]
    assert a.attrs["xlikert_version"] == xl.__version__


def test_main_effect_is_paired_difference_against_blocked_grand_mean():
    pmf = make_pmf([3], n_items=2, n_scores=3, seed=2)
    s = xl.composite(pmf)
    dec = xl.decompose(s)
    base = s.mean("f0")
    for lev in s.f0.values:
        terms = xr.concat([s.sel(f0=lev, drop=True), base], dim="term")
        ref = xl.comonotone_contrast(terms, [1, -1])
        got = dec["f0"].pmf.sel(f0=lev, drop=True)
        xr.testing.assert_allclose(got.reindex_like(ref, fill_value=0.0), ref, atol=1e-15)


def test_effect_coordinate_is_tight_integer_range():
    pmf = make_pmf([2, 2], n_items=2, n_scores=3, seed=1)
    dec = xl.decompose(pmf)
    for name in ["f0", "f1", "f0:f1"]:
        eff = dec[name].pmf
        assert np.issubdtype(eff.effect.dtype, np.integer)
        assert np.all(np.diff(eff.effect.values) == 1)
        other = [d for d in eff.dims if d != "effect"]
        edge = eff.isel(effect=[0, -1]).max(other).values
        assert np.all(edge > 0)


# ----------------------------------------------------------------- dask
def test_dask_stays_lazy_and_equals_eager():
    pytest.importorskip("dask")
    pmf = make_pmf([3, 2, 2], n_items=3, n_scores=4, seed=5)
    lazy = pmf.chunk({"f0": 1, "f1": 1})
    s_lazy = xl.composite(lazy)
    assert s_lazy.chunks is not None
    xr.testing.assert_allclose(s_lazy.compute(), xl.composite(pmf), atol=1e-15)
    dec_lazy = xl.decompose(lazy)
    dec = xl.decompose(pmf)
    for node in dec_lazy.subtree:
        for v in node.data_vars:
            assert node[v].chunks is not None, (node.path, v)
    for node in dec.subtree:
        for v in node.data_vars:
            got = dec_lazy[node.path][v].compute()
            if "effect" in got.dims:  # lazy output keeps the full attainable range
                assert set(node[v].effect.values) <= set(got.effect.values)
                np.testing.assert_allclose(got.sum("effect"), 1.0, atol=1e-12)
                got = got.sel(effect=node[v].effect)
            xr.testing.assert_allclose(got, node[v], atol=1e-13)
    c_lazy = xl.contrast(lazy, "f0")
    assert c_lazy.chunks is not None
    c = xl.contrast(pmf, "f0")
    xr.testing.assert_allclose(c_lazy.compute().sel(effect=c.effect), c, atol=1e-13)
    # trend, chunked along the ordered factor itself
    sizes = [1.0, 2.0, 5.0]
    t_lazy = xl.trend(pmf.chunk({"f0": 1}), "f0", values=sizes)
    assert t_lazy.chunks is not None
    t, got = xl.trend(pmf, "f0", values=sizes), t_lazy.compute()
    assert set(t.slope.values) <= set(got.slope.values)  # lazy keeps the full support
    np.testing.assert_allclose(got.sum("slope"), 1.0, atol=1e-12)
    xr.testing.assert_allclose(got.sel(slope=t.slope), t, atol=1e-13)


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda v: v.__setitem__((1, 0, 1, 0), -0.1), r"negative mass at f0='f0_1', f1='f1_0'"),
        (lambda v: v.__setitem__((0, 1, 0, 2), np.nan), r"NaN mass at f0='f0_0', f1='f1_1'"),
        (lambda v: v.__setitem__((1, 1, 1), v[1, 1, 1] * 1.5), r"sum to 1 .*f0='f0_1', f1='f1_1'"),
    ],
)
def test_dask_bad_input_raises_when_computed(spoil, message):
    """Lazy input stays lazy, and its bad cells are still reported, by name, at compute time."""
    pytest.importorskip("dask")
    pmf = make_pmf([2, 2], n_items=2, n_scores=3, seed=8)
    spoil(pmf.values)
    lazy = pmf.chunk({"f0": 1})
    for result in (
        xl.composite(lazy),
        xl.decompose(lazy)["f0:f1"].pmf,
        xl.consensus(lazy, tol=1e-3),
        xl.contrast(lazy, "f0"),
    ):
        assert result.chunks is not None
        with pytest.raises(InvalidPMFError, match=message):
            result.compute()


# ----------------------------------------------------------------- contrast / trend
def test_contrast_pairs_and_means():
    pmf = make_pmf([3, 2], n_items=3, n_scores=4, seed=9)
    pmf = pmf.assign_coords(f0=["USA", "China", "France"])
    s = xl.composite(pmf)
    mm = (xl.marginal_slice(s, "f0") * s.score).sum("score")
    c = xl.contrast(pmf, "f0")
    assert c.pair.values.tolist() == ["USA − China", "USA − France", "China − France"]
    summ = xl.summarize(c)
    np.testing.assert_allclose(
        summ.E.sel(pair="USA − China"), mm.sel(f0="USA") - mm.sel(f0="China"), atol=1e-9
    )
    one = xl.contrast(pmf, "f0", "China", "France")
    xr.testing.assert_allclose(
        one, c.sel(pair="China − France", drop=True).sel(effect=one.effect), atol=1e-15
    )
    # reversed contrast mirrors the PMF
    rev = xl.contrast(pmf, "f0", "France", "China")
    np.testing.assert_allclose(rev.values[::-1], one.values, atol=1e-15)
    np.testing.assert_array_equal(rev.effect.values[::-1], -one.effect.values)
    with pytest.raises(DesignError, match="'Mars'"):
        xl.contrast(pmf, "f0", "USA", "Mars")


def test_trend_secant_slope_uneven_spacing():
    pmf = make_pmf([4, 2], n_items=3, n_scores=4, seed=12, zeros=0.2)
    sizes = [0.6, 4.0, 8.0, 32.0]
    pmf = pmf.assign_coords(model_size=("f0", [sizes[i] for i in (2, 0, 3, 1)]))
    g = xl.trend(pmf, "f0")
    assert g.dims == ("slope",)
    assert g.slope.dtype == np.float64
    assert np.all(np.diff(g.slope.values) > 0)
    np.testing.assert_allclose(float(g.sum()), 1.0, atol=1e-12)
    assert float(g.min()) >= 0
    s = xl.composite(pmf)
    mm = (xl.marginal_slice(s, "f0") * s.score).sum("score")
    hi = mm.isel(f0=2)  # size 32
    lo = mm.isel(f0=1)  # size 0.6
    expect = float(hi - lo) / (32.0 - 0.6)
    np.testing.assert_allclose(float(xl.summarize(g, dim="slope").E), expect, atol=1e-9)
    # values passed explicitly give the same result
    g2 = xl.trend(pmf.drop_vars("model_size"), "f0", values=pmf.model_size.values)
    xr.testing.assert_allclose(g, g2)


def test_trend_merges_equal_slopes():
    # spacings 1 and 2: slope 1 arises from z=1 (delta 1) and z=2 (delta 2)
    pmf = make_pmf([3], n_items=1, n_scores=3, seed=3)
    g = xl.trend(pmf, "f0", values=[0.0, 1.0, 3.0])
    assert np.unique(g.slope.values).size == g.slope.size
    assert 1.0 in g.slope.values


def test_trend_needs_numeric_values():
    pmf = make_pmf([3], n_items=1)
    with pytest.raises(DesignError, match="numeric coordinate"):
        xl.trend(pmf, "f0")
    with pytest.raises(DesignError, match="distinct"):
        xl.trend(pmf, "f0", values=[1, 1, 2])


# ----------------------------------------------------------------- summaries
@pytest.mark.parametrize(
    "support, mass",
    [
        ([-25, -20], [0.9, 0.1]),
        ([1, 100], [0.99, 0.01]),
        ([-1, 100], [0.49, 0.51]),
        ([-5, 0, 5], [0.33, 0.33, 0.34]),
    ],
)
def test_summarize_follows_the_formulas(support, mass):
    p = xr.DataArray(mass, dims="effect", coords={"effect": support})
    s = xl.summarize(p)
    z, w = np.array(support, float), np.array(mass)
    e = (z * w).sum()
    sd = np.sqrt(((z - e) ** 2 * w).sum())
    assert float(s.E) == pytest.approx(e)
    assert float(s.SD) == pytest.approx(sd)
    assert float(s.SNR) == pytest.approx(abs(e) / sd)
    assert float(s.dPD) == pytest.approx(max(w[z > 0].sum(), w[z < 0].sum()))


def test_summarize_case_b_mean_is_1_99():
    p = xr.DataArray([0.99, 0.01], dims="effect", coords={"effect": [1, 100]})
    assert float(xl.summarize(p).E) == pytest.approx(1.99)


def test_snr_convention_for_deterministic_effects():
    p = xr.DataArray(
        [[0, 1.0, 0], [0, 0, 1.0]], dims=("x", "effect"), coords={"effect": [-1, 0, 1]}
    )
    s = xl.summarize(p)
    assert s.SNR.values.tolist() == [0.0, np.inf]
    assert s.dPD.values.tolist() == [0.0, 1.0]
    composite = xr.DataArray([0.5, 0.5], dims="score", coords={"score": [3, 4]})
    assert float(xl.summarize(composite, dim="score").E) == 3.5


def test_snr_does_not_depend_on_units():
    # a trend over model size in billions or in parameters: same SNR and dPD
    p = xr.DataArray([0.2, 0.3, 0.5], dims="effect", coords={"effect": [-0.4, 0.1, 0.3]})
    ref = xl.summarize(p)
    assert 0 < float(ref.SNR) < np.inf
    for scale in (1e-9, 1e-3, 1e6):
        got = xl.summarize(p.assign_coords(effect=p.effect * scale))
        assert float(got.SNR) == pytest.approx(float(ref.SNR), rel=1e-9)
        assert float(got.dPD) == float(ref.dPD)
        assert float(got.E) == pytest.approx(float(ref.E) * scale, rel=1e-12)


def test_summary_table_labels():
    pmf = make_pmf([2, 2], n_items=2)
    pmf = pmf.assign_coords(f0=["Aya-32B", "Gemma"], f1=["USA", "China"])
    pmf = pmf.rename(f0="model", f1="target")
    tab = xl.summary_table(xl.decompose(pmf))
    assert tab.columns.tolist() == ["term", "level", "E", "SD", "SNR", "dPD"]
    assert tab.iloc[0].term == "grand"
    assert np.isnan(tab.iloc[0].SNR)
    assert "Aya-32B × China" in tab.level.tolist()
    assert len(tab) == 1 + 2 + 2 + 4


def test_comonotone_contrast_public():
    p = xr.DataArray(
        [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]], dims=("term", "score"), coords={"score": [1, 2, 3]}
    )
    out = xl.comonotone_contrast(p, [1, -1])
    assert out.effect.values.tolist() == [-1]
    assert out.values.tolist() == [1.0]
    with pytest.raises(XlikertError, match="integers"):
        xl.comonotone_contrast(p, [0.5, -1])
    with pytest.raises(XlikertError, match=r"3 coefficients but 'term' has 2 terms"):
        xl.comonotone_contrast(p, [1, -1, 1])


# ----------------------------------------------------------------- bad input
def test_negative_mass_names_cell():
    pmf = make_pmf([2, 2], n_items=2)
    pmf[1, 0, 1, 0] = -0.1
    with pytest.raises(InvalidPMFError, match=r"negative mass at f0='f0_1', f1='f1_0', item='q1'"):
        xl.composite(pmf)


def test_nan_mass_names_cell():
    pmf = make_pmf([2], n_items=2)
    pmf[0, 1, 2] = np.nan
    with pytest.raises(InvalidPMFError, match=r"NaN mass at f0='f0_0', item='q1'"):
        xl.decompose(pmf)


def test_not_normalised_states_tolerance():
    pmf = make_pmf([2], n_items=2)
    pmf[1, 0] = pmf[1, 0] * 0.9
    with pytest.raises(InvalidPMFError, match=r"tolerance 1e-06.*f0='f0_1', item='q0'"):
        xl.composite(pmf)


def test_score_coords_must_be_consecutive_integers():
    pmf = make_pmf([2], n_items=2).assign_coords(score=[1, 2, 4])
    with pytest.raises(InvalidPMFError, match="consecutive"):
        xl.composite(pmf)
    pmf = pmf.assign_coords(score=[1.0, 1.5, 2.0])
    with pytest.raises(InvalidPMFError, match="integers"):
        xl.decompose(pmf)
    pmf = pmf.assign_coords(score=["a", "b", "c"])
    with pytest.raises(InvalidPMFError, match=r"score coordinate 'score' must hold integers"):
        xl.composite(pmf)


def test_one_level_factor_is_held_constant(tmp_path):
    pmf = make_pmf([1, 3], n_items=2)
    dec = xl.decompose(pmf)
    # the same tree as the design without the constant factor, which stays a scalar coord
    alone = xl.decompose(pmf.isel(f0=0, drop=True))
    assert sorted(dec.children) == sorted(alone.children) == ["f1", "grand"]
    for name in alone.children:
        xr.testing.assert_identical(
            dec[name].to_dataset().drop_vars("f0"), alone[name].to_dataset()
        )
        assert dec[name]["f0"].item() == "f0_0"
    attrs = xl.core.io.read_attrs(dec)
    assert attrs["decompose_constant_factors"] == {"f0": "f0_0"}
    assert attrs["decompose_factors"] == ["f1"] and attrs["decompose_max_order"] == 1
    table = xl.summary_table(dec)
    assert table.term.unique().tolist() == ["grand", "f1"]
    assert table.attrs["constant_factors"] == {"f0": "f0_0"}
    # an explicit max_order above what varies is held to it; below 1 is still an error
    assert sorted(xl.decompose(pmf, max_order=2).children) == ["f1", "grand"]
    with pytest.raises(DesignError, match="max_order must be between 1 and 2"):
        xl.decompose(pmf, max_order=0)
    # a contrast of a constant factor has nothing to compare
    with pytest.raises(DesignError, match="'f0' has 1 level"):
        xl.contrast(pmf, "f0")
    # netCDF-ready as it stands, one-element lists included
    dec.to_netcdf(tmp_path / "dec.nc")
    back = xl.open_decomposition(tmp_path / "dec.nc")
    assert xl.core.io.read_attrs(back)["decompose_factors"] == ["f1"]


def test_every_factor_constant_gives_the_grand_mixture_alone():
    pmf = make_pmf([1, 1], n_items=3, seed=4)
    dec = xl.decompose(pmf)
    assert list(dec.children) == ["grand"]
    np.testing.assert_allclose(
        dec["grand"]["pmf"].values, xl.composite(pmf).squeeze().values, atol=1e-15
    )
    assert xl.core.io.read_attrs(dec)["decompose_constant_factors"] == {"f0": "f0_0", "f1": "f1_0"}
    assert xl.summary_table(dec).term.tolist() == ["grand"]
    # no factor dim at all: the same
    assert list(xl.decompose(pmf.isel(f0=0, f1=0, drop=True)).children) == ["grand"]
    with pytest.raises(DesignError, match="'f0' has no level"):
        xl.decompose(make_pmf([2, 3], n_items=2).isel(f0=[]))


def test_missing_cells():
    pmf = make_pmf([2, 3], n_items=2)
    s = xl.composite(pmf)
    s[1, 2] = np.nan
    with pytest.raises(DesignError, match=r"missing cells at f0='f0_1', f1='f1_2'"):
        xl.decompose(s)
    pmf[0, 1] = np.nan
    with pytest.raises(DesignError, match=r"missing cells at f0='f0_0', f1='f1_1'"):
        xl.decompose(pmf)


def test_empty_item_dim():
    pmf = make_pmf([2], n_items=2).isel(item=slice(0, 0))
    with pytest.raises(InvalidPMFError, match="item dimension 'item' has length 0"):
        xl.composite(pmf)


def test_unknown_factor_and_bad_max_order():
    pmf = make_pmf([2, 2], n_items=1)
    with pytest.raises(DesignError, match="'model' is not a dimension"):
        xl.decompose(pmf, factors=["model"])
    with pytest.raises(DesignError, match="max_order"):
        xl.decompose(pmf, max_order=3)
