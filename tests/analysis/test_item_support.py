"""Items with their own options: mixed scales and nominal items, on hand-made results.

The results files carry the item coordinates ``score_min``, ``score_max`` and ``nominal``
(xlikert.core.schema.ITEM_SCALE_VARIABLES); everything that depends on the scale uses the item's own
support, everything that needs an order refuses a nominal item by name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import wasserstein_distance

import xlikert as xl
from xlikert.core.errors import InvalidPMFError, NominalItemError

#: item -> (min, max) on the file's one score axis 0..7 (the union).
SUPPORTS = {"a": (1, 4), "b": (0, 7), "c": (1, 7), "vote": (1, 2)}
AXIS = np.arange(0, 8)


def _results(nominal: bool = False, seed: int = 0) -> xr.Dataset:
    """Results ``(model, party, item, score)``: each item's PMF on its own support only."""
    rng = np.random.default_rng(seed)
    items = list(SUPPORTS) if nominal else [i for i in SUPPORTS if i != "vote"]
    pmf = np.zeros((2, 2, len(items), AXIS.size))
    for j, item in enumerate(items):
        lo, hi = SUPPORTS[item]
        pmf[:, :, j, lo : hi + 1] = rng.dirichlet(np.ones(hi - lo + 1), size=(2, 2))
    coords = {
        "model": ["m1", "m2"],
        "party": ["D", "R"],
        "item": items,
        "score": AXIS,
        "score_min": ("item", [SUPPORTS[i][0] for i in items]),
        "score_max": ("item", [SUPPORTS[i][1] for i in items]),
        "nominal": ("item", [i == "vote" for i in items]),
        "reverse_keyed": ("item", [i == "a" for i in items]),
    }
    valid = rng.uniform(0.7, 0.9, (2, 2, len(items)))
    return xr.Dataset(
        {
            "pmf": (("model", "party", "item", "score"), pmf),
            "valid_mass": (("model", "party", "item"), valid),
        },
        coords=coords,
    )


def _human(items=("a", "b", "c"), seed: int = 1, n: int = 300) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    table = {"party": rng.choice(["D", "R"], n)}
    for item in items:
        lo, hi = SUPPORTS[item]
        table[item] = rng.integers(lo, hi + 1, n)
    return xl.human_pmf(
        pd.DataFrame(table), list(items), scale={i: SUPPORTS[i] for i in items}, by=["party"]
    )


def test_support_helpers_read_the_item_coordinates():
    ds = _results(nominal=True)
    assert xl.item_points(ds.pmf).values.tolist() == [4, 8, 7, 2]
    assert xl.nominal_items(ds.pmf) == ["vote"]
    mask = xl.item_support(ds.pmf)
    assert mask.sel(item="a").values.tolist() == [
        False,
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    old = ds.pmf.drop_vars(["score_min", "score_max", "nominal"])
    assert int(xl.item_points(old)) == 8 and xl.nominal_items(old) == []
    with pytest.raises(InvalidPMFError, match="score_max"):
        xl.item_points(ds.pmf.drop_vars("score_max"))
    bad = ds.pmf.assign_coords(score_max=("item", [4, 9, 7, 2]))
    with pytest.raises(InvalidPMFError, match=r"\['b'\]"):
        xl.item_points(bad)


def test_w1_representativeness_on_each_items_own_support_equal_scipy():
    ds, h = _results(), _human()
    w1 = xl.wasserstein(ds, h)
    rep = xl.representativeness(ds, h)
    a = xl.alignment(ds, h)
    for item, (lo, hi) in SUPPORTS.items():
        if item == "vote":
            continue
        y = np.arange(lo, hi + 1)
        for m in ("m1", "m2"):
            for g in ("D", "R"):
                p = ds.pmf.sel(model=m, party=g, item=item, score=y).values
                q = h.pmf.sel(party=g, item=item, score=y).values
                ref = wasserstein_distance(y, y, p, q)
                cell = {"model": m, "party": g, "item": item}
                assert float(w1.sel(cell)) == pytest.approx(ref, abs=1e-12)
                want = 1 - ref / (y.size - 1)  # the item's own K - 1
                assert float(rep.sel(cell)) == pytest.approx(want, abs=1e-12)
                est = a.estimate.sel(cell)
                assert float(est.sel(metric="representativeness")) == pytest.approx(want, abs=1e-12)
    assert a.n_points.values.tolist() == [4, 8, 7]
    # the upper end of W1's interval is the item's own K - 1
    assert bool((a.upper.sel(metric="wasserstein") <= a.n_points - 1).all())


def test_tastle_consensus_uses_each_items_own_width():
    ds = _results()
    got = xl.tastle_consensus(ds.pmf)
    for item, (lo, hi) in SUPPORTS.items():
        if item == "vote":
            continue
        y = np.arange(lo, hi + 1)
        p = ds.pmf.sel(item=item, score=y).values
        mu = (p * y).sum(-1, keepdims=True)
        with np.errstate(divide="ignore"):
            terms = np.where(p > 0, p * np.log2(1 - np.abs(y - mu) / (hi - lo)), 0.0)
        np.testing.assert_allclose(got.sel(item=item).values, 1 + terms.sum(-1), atol=1e-12)
    # one item alone, after .sel (scalar coordinates), is the same
    one = xl.tastle_consensus(ds.pmf.sel(item="a"))
    np.testing.assert_allclose(one.values, got.sel(item="a").values, atol=1e-15)


def test_reflection_on_each_items_own_min_plus_max():
    ds = _results()
    ref = xl.reflect_reverse_keyed(ds.pmf)
    lo, hi = SUPPORTS["a"]
    for y in range(lo, hi + 1):
        np.testing.assert_array_equal(
            ref.sel(item="a", score=y).values, ds.pmf.sel(item="a", score=lo + hi - y).values
        )
    assert float(ref.sel(item="a", score=[0, 5, 6, 7]).sum()) == 0.0
    np.testing.assert_array_equal(ref.sel(item="b").values, ds.pmf.sel(item="b").values)


def test_composite_of_unequal_ranges_is_the_exact_sum():
    ds = _results()
    comp = xl.composite(ds.pmf, reflect=False)
    y = ds.score.values
    item_means = (ds.pmf * y).sum("score").sum("item")
    np.testing.assert_allclose((comp * comp.score).sum("score"), item_means, atol=1e-12)
    lo = sum(SUPPORTS[i][0] for i in ("a", "b", "c"))
    hi = sum(SUPPORTS[i][1] for i in ("a", "b", "c"))
    on = (comp.score >= lo) & (comp.score <= hi)
    assert float(comp.where(~on, 0.0).sum()) == pytest.approx(0.0, abs=1e-15)


def test_multivariate_consensus_needs_one_scale():
    ds = _results()
    with pytest.raises(xl.DesignError, match=r"a: 1..4.*b: 0..7"):
        xl.consensus(ds.pmf)
    one = ds.pmf.sel(item=["a"])
    np.testing.assert_allclose(
        xl.consensus(one, tol=1e-10).values, xl.tastle_consensus(one.isel(item=0)).values, atol=1e-9
    )


def test_mass_off_an_items_support_is_an_error_naming_it():
    ds = _results()
    bad = ds.pmf.copy()
    bad.loc[{"item": "a", "score": 0}] = 0.2
    bad.loc[{"item": "a", "score": 1}] = 0.0
    bad = bad / bad.sum("score")
    with pytest.raises(InvalidPMFError, match=r"\['a'\].*own support"):
        xl.tastle_consensus(bad)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda p, h: xl.wasserstein(p, h), id="wasserstein"),
        pytest.param(lambda p, h: xl.representativeness(p, h), id="representativeness"),
        pytest.param(lambda p, h: xl.mean_difference(p, h), id="mean_difference"),
        pytest.param(lambda p, h: xl.tastle_consensus(p), id="tastle"),
        pytest.param(lambda p, h: xl.consensus(p), id="consensus"),
        pytest.param(lambda p, h: xl.consensus_bounds(p), id="consensus_bounds"),
        pytest.param(lambda p, h: xl.dissension(p), id="dissension"),
        pytest.param(lambda p, h: xl.composite(p), id="composite"),
        pytest.param(lambda p, h: xl.subscale_composites(p), id="subscale_composites"),
        pytest.param(lambda p, h: xl.decompose(p), id="decompose"),
        pytest.param(lambda p, h: xl.contrast(p, "party"), id="contrast"),
        pytest.param(lambda p, h: xl.trend(p, "party", values=[0, 1]), id="trend"),
        pytest.param(
            lambda p, h: xl.comonotone_contrast(p.sel(item="vote").rename(model="term"), [1, -1]),
            id="comonotone_contrast",
        ),
        pytest.param(lambda p, h: xl.reliability(p, dim="party"), id="reliability"),
        pytest.param(
            lambda p, h: xl.reflect_reverse_keyed(p, ["vote"]), id="reflect_reverse_keyed"
        ),
        pytest.param(lambda p, h: xl.sampling.standard_error(p), id="sampling.standard_error"),
        pytest.param(lambda p, h: xl.sampling.flip_probability(p), id="sampling.flip_probability"),
        pytest.param(lambda p, h: p.likert.composite(), id="accessor.composite"),
        pytest.param(lambda p, h: p.likert.tastle_consensus(), id="accessor.tastle"),
        pytest.param(lambda p, h: p.likert.wasserstein(h), id="accessor.wasserstein"),
        pytest.param(lambda p, h: p.likert.reliability(dim="party"), id="accessor.reliability"),
    ],
)
def test_order_needing_functions_refuse_a_nominal_item_by_name(call):
    ds = _results(nominal=True)
    h = _human(items=("a", "b", "c", "vote"))
    with pytest.raises(NominalItemError, match=r"\['vote'\].*nominal"):
        call(ds.pmf, h)


def test_order_free_functions_work_on_nominal_items():
    ds = _results(nominal=True)
    h = _human(items=("a", "b", "c", "vote"))
    vote = ds.pmf.sel(item="vote", score=[1, 2])
    ent = xl.entropy(ds.pmf, item_dim=None).sel(item="vote")
    want = -(vote * np.log2(vote)).sum("score")
    np.testing.assert_allclose(ent.values, want.values, atol=1e-12)
    tv = xl.total_variation(ds, h).sel(item="vote")
    hv = h.pmf.sel(item="vote", score=[1, 2])
    np.testing.assert_allclose(tv.values, (abs(vote - hv).sum("score") / 2).values, atol=1e-12)
    assert bool(np.isfinite(xl.jensen_shannon(ds, h)).all())
    sl = xl.marginal_slice(ds.pmf, by="party")
    np.testing.assert_allclose(
        sl.sel(item="vote", score=[1, 2]).values, vote.mean("model").values, atol=1e-15
    )
    assert xl.grand_mixture(ds.pmf).sel(item="vote").sum() == pytest.approx(1.0)
    fr = xl.failure_rate(ds)
    np.testing.assert_allclose(fr.values, 1 - ds.valid_mass.values)
    a = xl.alignment(ds, h)
    order = ["wasserstein", "representativeness", "mean_difference"]
    assert bool(a.estimate.sel(item="vote", metric=order).isnull().all())
    assert bool(a.estimate.sel(item="vote").drop_sel(metric=order).notnull().all())
    assert bool(a.estimate.sel(item=["a", "b", "c"]).notnull().all())
    assert xl.core.io.read_attrs(a)["nominal_items"] == ["vote"]


def test_old_single_scale_files_analyse_identically():
    """Absent item coordinates and explicit whole-axis ones give identical numbers."""
    ds = xl.datasets.load_demo_results(verbose=False)
    y = ds.score.values
    n = ds.sizes["item"]
    explicit = ds.assign_coords(
        score_min=("item", [int(y[0])] * n),
        score_max=("item", [int(y[-1])] * n),
        nominal=("item", [False] * n),
    )
    for f in (
        lambda d: xl.tastle_consensus(d.pmf),
        lambda d: xl.failure_rate(d),
        lambda d: xl.composite(d.pmf),
        lambda d: xl.entropy(d.pmf),
    ):
        np.testing.assert_array_equal(f(ds).values, f(explicit).values)
    if "reverse_keyed" in ds.coords:
        np.testing.assert_array_equal(
            xl.reflect_reverse_keyed(ds.pmf).values, xl.reflect_reverse_keyed(explicit.pmf).values
        )
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {str(i): rng.integers(int(y[0]), int(y[-1]) + 1, 200) for i in ds.item.values}
    )
    h = xl.human_pmf(table, list(table.columns), scale=(int(y[0]), int(y[-1])))
    old, new = xl.alignment(ds, h), xl.alignment(explicit, h)
    for v in ("estimate", "se", "lower", "upper", "ceiling"):
        np.testing.assert_array_equal(old[v].values, new[v].values)
    assert old.attrs["n_points"] == y.size and "n_points" not in old.coords
