"""Consensus layer: Tastle, certified Multivariate Consensus, dissension, entropy."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import dask
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import xlikert as xl
from xlikert.core.errors import InvalidPMFError, XlikertError
from xlikert.kernels.consensus import (
    _consensus_core_numpy,
    consensus_bounds,
    consensus_bounds_numpy,
    consensus_core,
)

# --------------------------------------------------------------------------- oracle


def exact_consensus(p: np.ndarray, y: np.ndarray) -> float:
    """Eq. consensus-multivariate by enumerating every response vector.

    Means and squared distances are exact rationals of the float inputs, and
    ``1 - sqrt(D)/d_max`` is formed as ``(1 - r) / (1 + sqrt(r))`` with
    ``r = D / d_max^2`` exact, so no cancellation spoils the reference.
    Vectors with probability 0 contribute 0 and are skipped.
    """
    p = np.asarray(p, dtype=float)
    K, n = p.shape
    y_int = [int(v) for v in y]
    c2 = Fraction(K * (y_int[-1] - y_int[0]) ** 2)
    rows = []
    for k in range(K):
        w = [Fraction(float(v)) for v in p[k]]
        tot = sum(w)
        mu = sum(Fraction(yy) * ww for yy, ww in zip(y_int, w, strict=True)) / tot
        rows.append(
            [(float(w[i] / tot), (Fraction(y_int[i]) - mu) ** 2) for i in range(n) if w[i] > 0]
        )
    total = 0.0
    for combo in itertools.product(*rows):
        prob = math.prod(c[0] for c in combo)
        r = sum(c[1] for c in combo) / c2
        total += prob * math.log2(float(1 - r) / (1.0 + math.sqrt(float(r))))
    return 1.0 + total


def naive_tastle(p, y):
    """Eq. consensus-original term by term, in exact rationals up to the final log2."""
    w = [Fraction(float(v)) for v in p]
    w = [v / sum(w) for v in w]
    y = [int(v) for v in y]
    mu = sum(Fraction(yi) * wi for yi, wi in zip(y, w, strict=True))
    dmax = y[-1] - y[0]
    terms = (
        float(wi) * math.log2(float(1 - abs(yi - mu) / dmax))
        for wi, yi in zip(w, y, strict=True)
        if wi > 0
    )
    return 1.0 + sum(terms)


def as_pmf(p, y=None, factors=None):
    p = np.asarray(p, dtype=float)
    y = np.arange(1, p.shape[-1] + 1) if y is None else np.asarray(y)
    dims = [*(factors or [f"f{i}" for i in range(p.ndim - 2)]), "item", "score"]
    coords = {"score": y, "item": [f"q{i}" for i in range(p.shape[-2])]}
    return xr.DataArray(p, dims=dims, coords=coords, name="pmf")


# --------------------------------------------------------------------------- strategies


@st.composite
def pmf_sets(draw, max_vectors=3125):
    """K item PMFs on a scale of n points: with zeros, point masses, near-singular ones."""
    n = draw(st.integers(2, 7))
    k_max = max(1, min(5, int(math.log(max_vectors) / math.log(n))))
    K = draw(st.integers(1, k_max))
    lo = draw(st.integers(-3, 2))
    rows = []
    for _ in range(K):
        kind = draw(st.sampled_from(["dense", "sparse", "point", "near-point", "poles"]))
        if kind == "point":
            row = np.zeros(n)
            row[draw(st.integers(0, n - 1))] = 1.0
        elif kind == "near-point":
            row = np.zeros(n)
            i = draw(st.integers(0, n - 1))
            j = draw(st.integers(0, n - 1))
            eps = draw(st.sampled_from([1e-3, 1e-9, 1e-15]))
            row[i] += 1.0 - eps
            row[j] += eps
        elif kind == "poles":
            row = np.zeros(n)
            a = draw(st.floats(1e-6, 1 - 1e-6))
            row[0], row[-1] = a, 1 - a
        else:
            row = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
            if kind == "sparse":
                row[np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))] = 0.0
            if row.sum() == 0:
                row[draw(st.integers(0, n - 1))] = 1.0
        rows.append(row / row.sum())
    return np.array(rows), np.arange(lo, lo + n)


# --------------------------------------------------------------------------- paper examples

PAPER_CASES = [  # (PMF on 1..7, Cns, entropy): appendix table tab:consensus-dissension-visual
    ([0, 0, 0, 1, 0, 0, 0], 1.00, 0.00),
    ([1 / 7] * 7, 0.47, 2.81),
    ([0, 0, 0.5, 0, 0.5, 0, 0], 0.74, 1.00),
    ([0.5, 0, 0, 0, 0, 0, 0.5], 0.00, 1.00),
]


@pytest.mark.parametrize(("p", "cns", "ent"), PAPER_CASES)
def test_paper_one_item_examples(p, cns, ent):
    pmf = as_pmf([p])
    assert round(float(xl.tastle_consensus(pmf.isel(item=0))), 2) == cns
    assert round(float(xl.consensus(pmf, tol=1e-9)), 2) == cns
    assert round(float(xl.entropy(pmf.isel(item=[0]))), 2) == ent
    assert float(xl.dissension(pmf, tol=1e-9)) == pytest.approx(1 - cns, abs=0.005)


def test_paper_exact_values():
    pmf = as_pmf([c[0] for c in PAPER_CASES])
    tas = xl.tastle_consensus(pmf)
    expect = [1.0, 1 + 2 * (-1 + math.log2(2 / 3) + math.log2(5 / 6)) / 7, 1 + math.log2(5 / 6), 0]
    np.testing.assert_allclose(tas.values, expect, atol=1e-15)
    np.testing.assert_allclose(
        xl.entropy(pmf, item_dim=None).values, [0, math.log2(7), 1, 1], atol=1e-15
    )
    per_item = xl.consensus(pmf, item_dim=None)
    xr.testing.assert_identical(per_item.drop_attrs(), tas.rename("consensus").drop_attrs())


# --------------------------------------------------------------------------- Tastle


@settings(max_examples=40, deadline=None)
@given(pmf_sets(max_vectors=7))
def test_tastle_matches_naive_formula(case):
    p, y = case
    got = xl.tastle_consensus(as_pmf(p, y)).values
    want = [naive_tastle(row, y) for row in p]
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert np.all((got >= -1e-15) & (got <= 1 + 1e-15))


@settings(max_examples=25, deadline=None)
@given(pmf_sets(max_vectors=7))
def test_k1_multivariate_equals_tastle(case):
    p, y = case
    pmf = as_pmf(p[:1], y)
    ds = xl.consensus_bounds(pmf, tol=1e-10)
    tas = float(xl.tastle_consensus(pmf.isel(item=0)))
    assert abs(float(ds.consensus) - tas) <= 1e-10 + 1e-14
    assert float(ds.lower) - 1e-14 <= tas <= float(ds.upper) + 1e-14


# --------------------------------------------------------------------------- certified bounds


@settings(max_examples=40, deadline=None)
@given(pmf_sets(), st.sampled_from([0.3, 1e-2, 1e-4, 1e-7]))
def test_multivariate_within_tol_of_enumeration(case, tol):
    p, y = case
    exact = exact_consensus(p, y)
    ds = xl.consensus_bounds(as_pmf(p, y), tol=tol)
    val, lo, hi, err = (float(ds[v]) for v in ("consensus", "lower", "upper", "error"))
    slack = 1e-13  # float64 round-off of the oracle itself
    assert lo - slack <= exact <= hi + slack
    assert abs(val - exact) <= tol + slack
    assert err <= tol
    assert lo <= val <= hi <= 1.0  # Cns <= 1, so the certified upper bound is capped there
    # numba kernel == plain-numpy twin (the public values carry the cap at 1)
    v2, lo2, hi2 = _consensus_core_numpy(p, y.astype(float), tol)
    np.testing.assert_allclose([min(v2, 1), lo2, min(hi2, 1)], [val, lo, hi], rtol=0, atol=1e-12)


def test_k5_seven_point_scale_enumeration():
    rng = np.random.default_rng(11)
    p = rng.dirichlet(np.full(7, 0.4), size=5)
    p[1] = [0, 0, 0.2, 0.8, 0, 0, 0]
    exact = exact_consensus(p, np.arange(1, 8))
    for tol in (1e-3, 1e-6):
        ds = xl.consensus_bounds(as_pmf(p), tol=tol)
        assert float(ds.lower) <= exact <= float(ds.upper)
        assert abs(float(ds.consensus) - exact) <= tol


def test_k17_with_degenerate_items_against_enumeration():
    # 17 items, 14 of them point masses: the n^K sum has 7^3 non-zero terms,
    # but d_max and the centroid are those of all 17 items.
    rng = np.random.default_rng(3)
    p = np.zeros((17, 7))
    p[np.arange(17), rng.integers(0, 7, 17)] = 1.0
    p[[2, 9, 16]] = rng.dirichlet(np.full(7, 0.7), size=3)
    exact = exact_consensus(p, np.arange(1, 8))
    for tol in (1e-4, 1e-6):
        ds = xl.consensus_bounds(as_pmf(p), tol=tol)
        assert float(ds.lower) <= exact <= float(ds.upper)
        assert abs(float(ds.consensus) - exact) <= tol


def test_singular_ends_stay_finite_and_certified():
    # D near d_max^2 (item at one extreme with a sliver at the other) and
    # D = 0 (point masses) both appear; the exact value is finite.
    y = np.arange(1, 8)
    for eps in (1e-3, 1e-12, 1e-200, 5e-324):
        p = np.zeros((3, 7))
        p[:, 0], p[:, 6] = 1 - eps, eps
        p[2] = [0, 0, 0, 1, 0, 0, 0]
        exact = exact_consensus(p, y)
        ds = xl.consensus_bounds(as_pmf(p), tol=1e-8)
        assert np.isfinite(ds.lower) and np.isfinite(ds.upper)
        assert float(ds.lower) - 1e-13 <= exact <= float(ds.upper) + 1e-13


def test_point_masses_give_one():
    p = np.eye(7)[[0, 3, 6, 2]]
    ds = xl.consensus_bounds(as_pmf(p))
    assert float(ds.consensus) == pytest.approx(1.0, abs=1e-15)
    assert float(ds.upper) >= 1.0 >= float(ds.lower)


def test_large_k_intervals_nest():
    # No oracle at K = 17 / 50: the interval of a tight tol must lie in (or at
    # least overlap) that of a loose one -- both are certified.
    pmf = xl.datasets.synthetic_pmf({"model": 3}, n_items=50, concentration=0.3, seed=5)
    for K in (17, 50):
        sub = pmf.isel(item=slice(K))
        loose = xl.consensus_bounds(sub, tol=1e-3)
        tight = xl.consensus_bounds(sub, tol=1e-7)
        assert bool((tight.error <= 1e-7).all()) and bool((loose.error <= 1e-3).all())
        assert bool((tight.consensus >= loose.lower).all())
        assert bool((tight.consensus <= loose.upper).all())
        assert bool(((tight.consensus > 0) & (tight.consensus < 1)).all())


def test_kernel_equals_numpy_twin_batched():
    pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=17, sparsity=0.3, seed=2)
    y = pmf.score.values.astype(float)
    for tol in (1e-4, 1e-6):
        a = consensus_bounds(pmf.values, y, tol, 1 << 22)
        b = consensus_bounds_numpy(pmf.values, y, tol)
        for x1, x2 in zip(a, b, strict=True):
            np.testing.assert_allclose(x1, x2, rtol=0, atol=1e-12)
        v, lo, hi = consensus_core(pmf.values[1, 2], y, tol, 1 << 22)
        assert (v, lo, hi) == (a[0][1, 2], a[1][1, 2], a[2][1, 2])
    with xl.kernels.use_kernels("numpy"):
        via_numpy = xl.consensus(pmf, tol=1e-6)
    xr.testing.assert_allclose(via_numpy, xl.consensus(pmf, tol=1e-6, kernels="numba"), atol=1e-12)


def test_max_cells_warns_and_stays_certified():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=3)
    exact = exact_consensus(p, np.arange(1, 8))
    with pytest.warns(RuntimeWarning, match="exceeds tol=1e-10"):
        ds = xl.consensus_bounds(as_pmf(p), tol=1e-10, max_cells=40)
    assert float(ds.error) > 1e-10
    assert float(ds.lower) <= exact <= float(ds.upper)


# --------------------------------------------------------------------------- xarray layer


def test_dims_attrs_and_dissension():
    pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=6, seed=4)
    cns = xl.consensus(pmf)
    assert cns.name == "consensus" and cns.dims == ("model", "target")
    assert cns.attrs["tol"] == 1e-4 and cns.attrs["n_items"] == 6
    ds = xl.dissension_bounds(pmf)
    assert set(ds.data_vars) == {"dissension", "lower", "upper", "error"}
    xr.testing.assert_allclose(ds.dissension, 1 - cns.rename("dissension"))
    assert bool((ds.lower <= ds.dissension).all() and (ds.dissension <= ds.upper).all())
    # item_dim=None: Tastle per item
    per_item = xl.consensus_bounds(pmf, item_dim=None)
    assert per_item.consensus.dims == ("model", "target", "item")
    assert bool((per_item.error == 0).all())
    # transposed input and renamed dims give the same numbers
    other = pmf.rename(item="question", score="answer").transpose("answer", "question", ...)
    res = xl.consensus(other, item_dim="question", score_dim="answer")
    xr.testing.assert_allclose(res.transpose(*cns.dims), cns)


def test_dask_chunked_equals_eager_and_stays_lazy():
    pmf = xl.datasets.synthetic_pmf({"model": 4, "target": 3}, n_items=9, seed=8)
    lazy = pmf.chunk({"model": 1, "target": 2, "item": 3})  # core dim chunked on purpose

    def refuse(*args, **kwargs):
        raise AssertionError("computed eagerly")

    with dask.config.set(scheduler=refuse):
        c = xl.consensus_bounds(lazy, tol=1e-6)
        e = xl.entropy(lazy)
        t = xl.tastle_consensus(lazy)
    assert c.consensus.chunks is not None and e.chunks is not None and t.chunks is not None
    xr.testing.assert_allclose(c.compute(), xl.consensus_bounds(pmf, tol=1e-6))
    xr.testing.assert_allclose(e.compute(), xl.entropy(pmf))
    xr.testing.assert_allclose(t.compute(), xl.tastle_consensus(pmf))


# --------------------------------------------------------------------------- entropy


@settings(max_examples=20, deadline=None)
@given(pmf_sets(max_vectors=400))
def test_joint_entropy_equals_entropy_of_product(case):
    p, y = case
    joint = np.ones(())
    for row in p:
        joint = np.multiply.outer(joint, row)
    q = joint.ravel()
    q = q[q > 0]
    want = float(-(q * np.log2(q)).sum())
    assert float(xl.entropy(as_pmf(p, y))) == pytest.approx(want, abs=1e-9)
    per_item = xl.entropy(as_pmf(p, y), item_dim=None)
    assert float(per_item.sum()) == pytest.approx(want, abs=1e-9)
    assert xl.entropy(as_pmf(p, y)).attrs["units"] == "bit"


# --------------------------------------------------------------------------- bad input


def bad(values, score=range(1, 4)):
    return xr.DataArray(
        np.asarray(values, float),
        dims=("model", "item", "score"),
        coords={"model": ["a", "b"], "item": ["1", "2"], "score": list(score)},
    )


GOOD = [[[0.2, 0.3, 0.5], [1, 0, 0]], [[0, 1, 0], [0.5, 0.25, 0.25]]]


@pytest.mark.parametrize("fn", [xl.consensus, xl.dissension, xl.entropy, xl.tastle_consensus])
def test_bad_input_names_problem_and_cells(fn):
    nan = np.array(GOOD)
    nan[1, 0, 2] = np.nan
    with pytest.raises(InvalidPMFError, match=r"NaN.*model='b', item='1'"):
        fn(bad(nan))
    neg = np.array(GOOD)
    neg[0, 1] = [1.2, -0.2, 0]
    with pytest.raises(InvalidPMFError, match=r"negative.*model='a', item='2'"):
        fn(bad(neg))
    unnorm = np.array(GOOD)
    unnorm[1, 1, 0] = 0.6
    with pytest.raises(InvalidPMFError, match=r"sum to 1 \(tolerance 1e-06\).*model='b', item='2'"):
        fn(bad(unnorm))
    with pytest.raises(InvalidPMFError, match="consecutive"):
        fn(bad(GOOD, score=[1, 2, 4]))
    with pytest.raises(InvalidPMFError, match="no score dimension"):
        fn(bad(GOOD).rename(score="answer"))


def test_bad_input_consensus_specific():
    with pytest.raises(InvalidPMFError, match="item dimension 'item' has length 0"):
        xl.consensus(bad(GOOD).isel(item=[]))
    with pytest.raises(InvalidPMFError, match="no item dimension 'question'"):
        xl.consensus(bad(GOOD), item_dim="question")
    single = xr.DataArray([[1.0]], dims=("item", "score"), coords={"score": [4]})
    with pytest.raises(InvalidPMFError, match="at least two points"):
        xl.consensus(single)
    with pytest.raises(InvalidPMFError, match="at least two points"):
        xl.tastle_consensus(single)
    for tol in (0, -1e-3, 1e-11, float("nan"), "x"):
        with pytest.raises(XlikertError, match="tol must be"):
            xl.consensus(bad(GOOD), tol=tol)
    with pytest.raises(XlikertError, match="unknown kernels"):
        xl.consensus(bad(GOOD), kernels="cuda")
    with pytest.raises(XlikertError, match="max_cells"):
        xl.consensus(bad(GOOD), max_cells=0)
    with pytest.raises(TypeError):
        xl.consensus(np.array(GOOD))
