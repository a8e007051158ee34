"""What context makes visible (xlikert.analysis.context), against hand formulas on the joint.

The conversations come from the toy conversation model (support/conversation.py),
read completely, so the whole joint of the answers is known and every coefficient
has a hand formula over its S^K cells.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import xarray as xr
from support.conversation import ToyModel, brute_force

import xlikert as xl
from xlikert.analysis.context import (
    carry_over,
    conversation_consensus,
    conversation_reliability,
    inter_item_correlation,
)
from xlikert.analysis.reliability import mcdonald_omega
from xlikert.collect.context import Battery, administer, sequential_dataset
from xlikert.core.errors import CollectionError, DesignError, InvalidPMFError

K, S = 4, 3
Y = np.arange(1.0, S + 1)


def conversation(carry: float = 1.5, seed: int = 5, **coords) -> tuple[xr.Dataset, np.ndarray]:
    model = ToyModel(K, S, seed=seed, carry=carry)
    battery = Battery("sys", tuple(f"q{j}" for j in range(K)), ("1", "2", "3"))
    ds = sequential_dataset(administer(model, battery), item_coords=coords or None)
    return ds, brute_force(model)["full"]


def hand_moments(full: np.ndarray, y_of_item) -> tuple[np.ndarray, np.ndarray]:
    """Means and covariance of the answers over every cell of the whole joint."""
    cells = np.array(list(itertools.product(range(S), repeat=K)))
    values = np.stack([y_of_item(k)[cells[:, k]] for k in range(K)], axis=1)
    p = full[tuple(cells.T)]
    mean = p @ values
    d = values - mean
    return mean, (d * p[:, None]).T @ d


def test_alpha_of_a_conversation_equals_the_hand_formula():
    ds, full = conversation()
    _, cov = hand_moments(full, lambda k: Y)
    var_sum = cov.sum()  # Var(sum of the items), from every cell
    alpha = K / (K - 1) * (1 - np.trace(cov) / var_sum)
    rel = conversation_reliability(ds)
    assert abs(float(rel.alpha) - alpha) < 1e-12
    assert abs(alpha) > 1e-3  # context makes the items covary
    omega, loading = mcdonald_omega(cov)
    assert abs(float(rel.omega) - float(omega)) < 1e-9
    np.testing.assert_allclose(rel.loading, loading, atol=1e-9)


def test_reverse_keyed_items_are_reflected_first():
    keyed = [False, True, False, False]
    ds, full = conversation(reverse_keyed=keyed)
    _, cov = hand_moments(full, lambda k: (Y.max() + Y.min() - Y) if keyed[k] else Y)
    alpha = K / (K - 1) * (1 - np.trace(cov) / cov.sum())
    assert abs(float(conversation_reliability(ds).alpha) - alpha) < 1e-12
    unreflected = conversation_reliability(ds, reflect=False).alpha
    assert abs(float(unreflected) - alpha) > 1e-6


def test_subscales_get_one_alpha_each():
    ds, full = conversation(subscale=["E", "E", "A", "A"])
    rel = conversation_reliability(ds)
    assert rel.alpha.dims == ("subscale",) and rel.subscale.values.tolist() == ["E", "A"]
    _, cov = hand_moments(full, lambda k: Y)
    sub = cov[:2, :2]
    assert abs(float(rel.alpha.sel(subscale="E")) - 2 * (1 - np.trace(sub) / sub.sum())) < 1e-12


def test_correlations_and_carry_over_tables_equal_the_hand_formulas():
    ds, full = conversation()
    _, cov = hand_moments(full, lambda k: Y)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_allclose(inter_item_correlation(ds), cov / np.outer(sd, sd), atol=1e-12)
    table = carry_over(ds)
    pair = full.sum(axis=(2, 3))  # items 0 and 1
    np.testing.assert_allclose(
        table.isel(item=0, other_item=1), pair / pair.sum(1, keepdims=True), atol=1e-12
    )
    np.testing.assert_allclose(
        table.isel(item=1, other_item=0), pair.T / pair.T.sum(1, keepdims=True), atol=1e-12
    )


def test_consensus_on_the_whole_joint():
    ds, full = conversation()
    mean, _ = hand_moments(full, lambda k: Y)
    cells = np.array(list(itertools.product(range(S), repeat=K)))
    dist = np.sqrt(((Y[cells] - mean) ** 2).sum(1))
    p = full[tuple(cells.T)]
    cns = 1 + (p * np.log2(1 - dist / (np.sqrt(K) * (Y[-1] - Y[0])))).sum()
    assert abs(float(conversation_consensus(ds)) - cns) < 1e-12
    # without context the joint is the product of the marginals: xl.consensus's value
    ds0, _ = conversation(carry=0.0)
    product = xl.consensus(ds0.pmf, tol=1e-9)
    assert abs(float(conversation_consensus(ds0)) - float(product)) < 1e-9
    assert abs(float(conversation_consensus(ds)) - float(xl.consensus(ds.pmf, tol=1e-9))) > 1e-4


def test_a_conversation_without_context_has_alpha_zero():
    ds, _ = conversation(carry=0.0)
    np.testing.assert_allclose(inter_item_correlation(ds) - np.eye(K), 0.0, atol=1e-12)
    assert abs(float(conversation_reliability(ds).alpha)) < 1e-12


def test_what_cannot_be_computed_is_named():
    model = ToyModel(K, S, seed=5)
    battery = Battery("sys", tuple(f"q{j}" for j in range(K)), ("1", "2", "3"))
    pruned = sequential_dataset(administer(model, battery, tol=0.1, batch=1))
    with pytest.raises(CollectionError, match="pruned"):
        conversation_consensus(pruned)
    ds, _ = conversation()
    with pytest.raises(InvalidPMFError, match="other_item"):
        inter_item_correlation(ds.joint.isel(other_item=0))
    with pytest.raises(InvalidPMFError, match="sum to 1"):
        carry_over(ds.joint * 2)
    with pytest.raises(InvalidPMFError, match="no 'joint'"):
        carry_over(ds.drop_vars("joint"))
    flat = ds.joint.copy()
    flat[0, 0] = np.diag([1.0, 0.0, 0.0])
    for k in range(1, K):
        flat[0, k] = flat[k, 0].T * 0
        flat[0, k, 0] = ds.pmf.isel(item=k).values
        flat[k, 0] = flat[0, k].T
    with pytest.raises(DesignError, match="zero variance"):
        conversation_reliability(flat)
    with pytest.raises(DesignError, match="two or more"):
        conversation_reliability(ds.joint.isel(item=[0], other_item=[0]))
