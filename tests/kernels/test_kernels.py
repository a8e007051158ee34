"""Kernels equal their plain-numpy twins and independent formulas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from xlikert import kernels
from xlikert.core.errors import XlikertError
from xlikert.kernels import (
    blocked_comonotone_contrast,
    blocked_comonotone_contrast_numpy,
    convolve_items,
    convolve_items_numpy,
)


@st.composite
def pmfs(draw, shape):
    """Random PMFs along the last axis, with exact zeros."""
    mass = draw(
        arrays(
            np.float64,
            shape,
            elements=st.one_of(st.just(0.0), st.floats(1e-6, 1.0)),
        )
    )
    mass[..., 0] += (mass.sum(-1) == 0).astype(float)
    return mass / mass.sum(-1, keepdims=True)


@st.composite
def item_pmfs(draw):
    batch = draw(st.integers(1, 3))
    k = draw(st.integers(1, 5))
    n = draw(st.integers(1, 6))
    return draw(pmfs((batch, k, n)))


@settings(max_examples=60, deadline=None)
@given(item_pmfs())
def test_convolution_twins_and_np_convolve(p):
    batch, k, n = p.shape
    grid = np.zeros(k * (n - 1) + 1)
    fast = convolve_items(p, grid)
    slow = convolve_items_numpy(p, grid)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-15)
    for b in range(batch):
        ref = p[b, 0]
        for item in range(1, k):
            ref = np.convolve(ref, p[b, item])
        np.testing.assert_allclose(fast[b], ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(fast.sum(-1), 1.0, atol=1e-12)


@st.composite
def contrast_case(draw):
    nb = draw(st.integers(1, 3))
    nr = draw(st.integers(1, 5))
    n = draw(st.integers(1, 6))
    p = draw(pmfs((2, nb, nr, n)))
    alpha = np.array(draw(st.lists(st.integers(-2, 2), min_size=nr, max_size=nr)), float)
    y0 = draw(st.integers(-3, 3))
    return p, alpha, np.arange(y0, y0 + n, dtype=float)


def _grid(alpha, support):
    pos, neg = alpha[alpha > 0].sum(), alpha[alpha < 0].sum()
    lo = pos * support[0] + neg * support[-1]
    hi = pos * support[-1] + neg * support[0]
    return np.arange(lo, hi + 1)


@settings(max_examples=80, deadline=None)
@given(contrast_case())
def test_comonotone_twins_mass_and_mean(case):
    p, alpha, support = case
    grid = _grid(alpha, support)
    fast = blocked_comonotone_contrast(p, support, alpha, grid)
    slow = blocked_comonotone_contrast_numpy(p, support, alpha, grid)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-14)
    assert np.all(fast >= 0)
    np.testing.assert_allclose(fast.sum(-1), 1.0, atol=1e-12)
    # marginals are preserved, so E[sum alpha_r X_r] = sum alpha_r E[X_r] (block mean)
    expect = ((p * support).sum(-1) * alpha).sum(-1).mean(-1)
    np.testing.assert_allclose(fast @ grid, expect, atol=1e-12)


def paired_difference_reference(p, q, x):
    """Paper eq. comonotone-coupling-mass / paired-diff-pmf, written independently."""
    P, Q = np.cumsum(p), np.cumsum(q)
    P0, Q0 = np.concatenate([[0], P[:-1]]), np.concatenate([[0], Q[:-1]])
    out = {}
    for i in range(len(p)):
        for j in range(len(q)):
            w = max(0.0, min(P[i], Q[j]) - max(P0[i], Q0[j]))
            if w > 0:
                z = x[i] - x[j]
                out[z] = out.get(z, 0.0) + w
    return out


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 7).flatmap(lambda n: pmfs((2, n))))
def test_paired_difference_matches_coupling_formula(pq):
    p, q = pq
    n = p.size
    x = np.arange(1.0, n + 1)
    grid = np.arange(-(n - 1.0), n)
    alpha = np.array([1.0, -1.0])
    for kernel in (blocked_comonotone_contrast, blocked_comonotone_contrast_numpy):
        got = kernel(pq[None], x, alpha, grid)
        ref = np.zeros_like(grid)
        for z, w in paired_difference_reference(p, q, x).items():
            ref[int(z + n - 1)] += w
        np.testing.assert_allclose(got, ref, atol=1e-12)


def test_identical_pmfs_give_point_mass_despite_rounding_noise():
    rng = np.random.default_rng(3)
    p = rng.random(9)
    p /= p.sum()
    # the same PMF computed two ways differs in the last bits of its CDF
    q = (p * 3.0 + p) / 4.0
    stack = np.stack([p, q])[None]
    grid = np.arange(-8.0, 9.0)
    for kernel in (blocked_comonotone_contrast, blocked_comonotone_contrast_numpy):
        out = kernel(stack, np.arange(9.0), np.array([1.0, -1.0]), grid)
        assert out[8] == pytest.approx(1.0, abs=1e-15)
        assert np.count_nonzero(out) == 1


def test_three_term_contrast_by_hand():
    # X1 uniform on {0,1}; X2 = 1 w.p. 1; X3 on {0,1,2} with 1/4,1/2,1/4
    p = np.array([[[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.25, 0.5, 0.25]]])
    # quantile intervals: (0,.25]: 0-1+0=-1, (.25,.5]: 0-1+1=0, (.5,.75]: 1-1+1=1, (.75,1]: 1-1+2=2
    grid = np.arange(-1.0, 3.0)
    for kernel in (blocked_comonotone_contrast, blocked_comonotone_contrast_numpy):
        out = kernel(p, np.arange(3.0), np.array([1.0, -1.0, 1.0]), grid)
        np.testing.assert_allclose(out, [0.25, 0.25, 0.25, 0.25])


def test_blocks_are_mixed_uniformly():
    a = np.array([[1.0, 0.0], [0.0, 1.0]])  # block 1: 0 - 1 = -1
    b = np.array([[0.0, 1.0], [0.0, 1.0]])  # block 2: 1 - 1 = 0
    out = blocked_comonotone_contrast(
        np.stack([a, b]), np.arange(2.0), np.array([1.0, -1.0]), np.arange(-1.0, 2.0)
    )
    np.testing.assert_allclose(out, [0.5, 0.5, 0.0])


def test_engine_switch():
    assert kernels.get_kernels() == "numba"
    with kernels.use_kernels("numpy"):
        assert kernels.get_kernel("convolve_items") == kernels.KernelHandle(
            "convolve_items", "numpy"
        )
    assert kernels.get_kernel("convolve_items").kernels == "numba"
    pmf, grid = np.full((3, 4), 0.25), np.zeros(10)
    np.testing.assert_array_equal(
        kernels.get_kernel("convolve_items", "numpy")(pmf, grid), convolve_items_numpy(pmf, grid)
    )
    np.testing.assert_array_equal(
        kernels.get_kernel("convolve_items", "numba")(pmf, grid), convolve_items(pmf, grid)
    )
    with pytest.raises(XlikertError, match="unknown kernels"), kernels.use_kernels("cuda"):
        pass


def test_the_kernels_choice_does_not_leak():
    """use_kernels restores the default on an error; another thread never sees it."""
    import threading

    with pytest.raises(RuntimeError), kernels.use_kernels("numpy"):
        raise RuntimeError("inside")
    assert kernels.get_kernels() == "numba"
    seen = []
    with kernels.use_kernels("numpy"):
        worker = threading.Thread(target=lambda: seen.append(kernels.get_kernels()))
        worker.start()
        worker.join()
        assert kernels.get_kernels() == "numpy"
    assert seen == ["numba"]


def test_kernels_ship_to_a_fresh_process():
    """Dask pickles the apply_ufunc function to its workers (cloudpickle); a numba
    gufunc pickled by value crashes there (numba/numba#4314), a handle must not."""
    import subprocess
    import sys

    import cloudpickle

    pmf = np.random.default_rng(0).dirichlet(np.ones(7), size=17)
    payload = cloudpickle.dumps((kernels.get_kernel("convolve_items", "numba"), pmf))
    code = (
        "import sys, pickle, numpy as np\n"
        "k, pmf = pickle.loads(sys.stdin.buffer.read())\n"
        "sys.stdout.buffer.write(pickle.dumps(k(pmf, np.zeros(103))))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, timeout=120
    )
    assert run.returncode == 0, run.stderr.decode()
    import pickle

    np.testing.assert_allclose(
        pickle.loads(run.stdout), convolve_items_numpy(pmf, np.zeros(103)), atol=1e-15
    )


def test_gufuncs_compile_under_the_cross_process_lock(tmp_path):
    """numba/numba#10128: two processes compiling the gufuncs at once can write a
    kernel and its gufunc wrapper with different symbol names, and every later
    process that loads them segfaults (a clean clone under pytest-xdist did). A
    process must not compile the kernels while another holds the compile lock."""
    import os
    import subprocess
    import sys
    import time

    from filelock import FileLock

    from xlikert.kernels._compile import LOCK_NAME

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}  # a cold cache of its own
    code = "import xlikert.kernels.convolution as c, numpy as np; print(c.convolve_items(np.ones((1, 2)), np.zeros(2)))"
    with FileLock(tmp_path / LOCK_NAME):
        child = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
        )
        # unlocked, the import compiles in a few seconds; held, it waits
        time.sleep(10)
        waited = child.poll() is None
    out, _ = child.communicate(timeout=300)
    assert waited, "the kernels compiled while another process held the compile lock"
    assert child.returncode == 0
    assert out.strip() == "[1. 1.]"
    assert any(tmp_path.rglob("guf-*convolve_items*.nbc"))  # compiled into that cache
