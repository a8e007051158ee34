"""The fast full-vocabulary readout against its plain twin, the rules written out pass by pass.

:func:`~xlikert.kernels.readout.next_token_readout` reads every temperature in one ``exp``
pass and each nucleus from a head of the row (:func:`_nucleus_heads`, three cuts then the
whole row). Its plain twin is the readout as it was: the log-softmax, then
:func:`~xlikert.kernels.readout.nucleus_logprobs` (the whole row sorted or its largest
values partitioned) and :func:`~xlikert.kernels.readout.logsumexp` of the pooled tokens.
The columns of ``need`` must be the same floats; the pooled column the same within 1e-12
(its sum taken in another order) and within 1e-14 of a sum in exact arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from xlikert.kernels import readout
from xlikert.kernels.readout import logsumexp, next_token_readout, nucleus_logprobs

TEMPS, TOPS = (0.1, 0.5, 1.0, 1.3), (0.8, 0.9, 1.0)


def plain_readout(z, need, temps, tops, top_k, pooled):
    """The twin: log-softmax over the row, the grid by :func:`nucleus_logprobs`."""
    z = np.asarray(z, dtype=np.float64)
    m = z.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    logp = z - (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))
    raw = logp[:, need]
    if pooled is not None:
        raw = np.concatenate([raw, logsumexp(logp[:, pooled])], -1)
    grid = nucleus_logprobs(z, need, temps, tops, pooled=pooled)
    first = logp[0]
    ids = np.lexsort((np.arange(first.size), -first))[:top_k]
    return raw, grid, ids, first[ids]


def rows(seed: int, V: int = 6000) -> np.ndarray:
    """Rows with the hard cases: a peaked row, a flat one (the nucleus past every cut but
    the whole row), ties at the top (bf16-like rounding), masked tokens, a row whose tied
    leaders straddle the first cut."""
    rng = np.random.default_rng(seed)
    z = (rng.normal(0, 3, (6, V)) + rng.normal(0, 2, (6, 1))).astype(np.float32)
    z[0, 17] = 40.0  # one token holds almost all the mass
    z[1] = rng.normal(0, 0.05, V)  # flat: the 1e-3 and 1e-6 heads fall short at T = 1.3
    z[2] = np.round(z[2] * 2) / 2  # many exact ties
    z[3, ::5] = -np.inf  # masked tokens
    z[4] = -30.0
    z[4, rng.choice(V, 400, replace=False)] = 5.0  # 400 tied leaders
    return z


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    ("temps", "tops"), [(TEMPS, TOPS), ((0.7,), (0.95, 0.3)), ((1.0,), (1.0,))]
)
def test_readout_equals_its_plain_twin(seed, temps, tops):
    z = rows(seed)
    V = z.shape[1]
    need = np.array([17, 0, 3, 5, V - 1, *range(40, V, 251)])
    pooled = np.random.default_rng(seed).choice(V, V // 2, replace=False)
    for pool in (None, pooled):
        got = next_token_readout(z, need, temps, tops, 25, pool)
        want = plain_readout(z, need, temps, tops, 25, pool)
        n = need.size
        np.testing.assert_array_equal(got[0][:, :n], want[0][:, :n])  # the same floats
        np.testing.assert_array_equal(got[1][..., :n], want[1][..., :n])
        np.testing.assert_array_equal(got[2], want[2])
        np.testing.assert_array_equal(got[3], want[3])
        if pool is not None:
            assert np.array_equal(np.isneginf(got[1]), np.isneginf(want[1]))
            fin = np.isfinite(want[1][..., n])
            np.testing.assert_allclose(
                got[1][..., n][fin], want[1][..., n][fin], rtol=0, atol=1e-12
            )
            np.testing.assert_allclose(got[0][:, n], want[0][:, n], rtol=0, atol=1e-12)


def test_every_head_stage_is_taken_and_each_gives_the_twin(monkeypatch):
    """The peaked row's nucleus is in the first head, the flat row's only in the whole row;
    ties at the first cut send a row on to a wider head."""
    z = rows(3).astype(np.float64)
    taken = []
    nucleus_row = readout._nucleus_row

    def spy(head, *a):
        out = nucleus_row(head, *a)
        taken.append((head[0].size, out is not None))
        return out

    monkeypatch.setattr(readout, "_nucleus_row", spy)
    got = next_token_readout(z, np.arange(0, z.shape[1], 3), TEMPS, TOPS)
    want = plain_readout(z, np.arange(0, z.shape[1], 3), TEMPS, TOPS, 0, None)
    np.testing.assert_array_equal(got[1], want[1])
    assert any(ok and size < 100 for size, ok in taken)  # a small head sufficed
    assert any(not ok for size, ok in taken)  # a head fell short: a wider one followed
    assert any(ok and size == z.shape[1] for size, ok in taken)  # the whole row


def test_pooled_column_is_the_exact_sum():
    """The pooled column (a word's stop check: 1 minus it) within 1e-14 of the sum in
    exact arithmetic, also where nearly all the mass goes on with the word."""
    rng = np.random.default_rng(5)
    V = 20000
    z = rng.normal(0, 3, (3, V)).astype(np.float32)
    pooled = np.arange(0, V, 2)
    z[0, pooled[:3]] = 32.0  # the pooled tokens hold all but ~1e-8 of the mass
    raw, grid, _, _ = next_token_readout(z, np.array([1]), (0.5, 1.0), (1.0,), 0, pooled)
    for r in range(3):
        x = z[r].astype(np.float64)
        for ti, t in enumerate((0.5, 1.0)):
            e = np.exp(x / t - x.max() / t)
            exact = math.log(math.fsum(e[pooled])) - math.log(math.fsum(e))
            assert abs(grid[r, ti, 0, -1] - exact) <= 1e-14
            if t == 1.0:
                assert abs(raw[r, -1] - exact) <= 1e-14


def test_one_row_and_the_rows_in_threads_agree():
    """The rows are spread over threads in chunks: each row reads the same alone."""
    z = rows(4)
    need = np.arange(0, z.shape[1], 7)
    together = next_token_readout(z, need, TEMPS, TOPS, 0, np.arange(100, 3000))
    for r in range(z.shape[0]):
        alone = next_token_readout(z[r : r + 1], need, TEMPS, TOPS, 0, np.arange(100, 3000))
        np.testing.assert_array_equal(alone[1][0, ..., :-1], together[1][r, ..., :-1])
        np.testing.assert_allclose(alone[1][0], together[1][r], rtol=0, atol=1e-14)
