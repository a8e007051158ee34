"""Constraint layer: failure rate, pre-image summation, renormalisation."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import xlikert as xl
from xlikert.core.errors import InvalidPMFError, XlikertError

TOKENS = ["1", " 1", "▁1", "2", " 2", "3"]
PHI = {"1": 1, " 1": 1, "▁1": 1, "2": 2, " 2": 2, "3": 3}


def token_prob(values=None):
    values = (
        [[[0.1, 0.2, 0.05, 0.3, 0.1, 0.15], [0.0, 0.0, 0.0, 0.5, 0.0, 0.0]]] * 2
        if values is None
        else values
    )
    return xr.DataArray(
        np.asarray(values, float),
        dims=("model", "item", "token"),
        coords={"model": ["aya", "qwen"], "item": ["1", "2"], "token": TOKENS},
        attrs={"instrument": "toy"},
    )


def test_preimage_sum_and_renormalisation_by_hand():
    ds = xl.item_pmf_from_tokens(token_prob(), PHI)
    assert isinstance(ds, xr.Dataset)
    assert ds.pmf.dims == ("model", "item", "score")
    assert ds.score.values.tolist() == [1, 2, 3]
    # item 1: phi^-1(1) = 0.1 + 0.2 + 0.05, phi^-1(2) = 0.3 + 0.1, phi^-1(3) = 0.15
    np.testing.assert_allclose(ds.valid_mass.sel(item="1"), [0.9, 0.9])
    np.testing.assert_allclose(
        ds.pmf.sel(model="aya", item="1"), np.array([0.35, 0.4, 0.15]) / 0.9, rtol=1e-15
    )
    np.testing.assert_allclose(ds.pmf.sel(model="qwen", item="2"), [0, 1, 0])
    np.testing.assert_allclose(ds.valid_mass.sel(item="2"), [0.5, 0.5])
    np.testing.assert_allclose(ds.pmf.sum("score"), 1.0, atol=1e-15)
    assert ds.attrs["instrument"] == "toy"
    assert json.loads(ds.attrs["valid_tokens"]) == PHI
    # the PMFs pass the shared checks and feed the next layers
    xl.core.validate.check_pmf(ds.pmf)
    fr = xl.failure_rate(ds)
    np.testing.assert_allclose(fr.values, 1 - ds.valid_mass.values)
    assert fr.name == "failure_rate" and fr.dims == ("model", "item")


def test_token_to_score_forms_agree():
    prob = token_prob()
    ref = xl.item_pmf_from_tokens(prob, PHI)
    seq = xl.item_pmf_from_tokens(prob, [1, 1, 1, 2, 2, 3])
    arr = xl.item_pmf_from_tokens(
        prob, xr.DataArray(list(PHI.values()), dims="token", coords={"token": list(PHI)})
    )
    nocoord = xl.item_pmf_from_tokens(
        prob.drop_vars("token"), {i: v for i, v in enumerate(PHI.values())}
    )
    for other in (seq, arr, nocoord):
        xr.testing.assert_allclose(ref.pmf, other.pmf)
        xr.testing.assert_allclose(ref.valid_mass, other.valid_mass)
    # the scale can be wider than the mapped values only if every value has a token
    explicit = xl.item_pmf_from_tokens(prob, PHI, score_values=range(1, 4), score_dim="answer")
    assert explicit.pmf.dims[-1] == "answer"


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_preimage_sum_property(data):
    n_scores = data.draw(st.integers(2, 7))
    n_tokens = data.draw(st.integers(n_scores, 3 * n_scores))
    # a random surjection tokens -> 1..n_scores
    phi = np.array(
        list(range(1, n_scores + 1))
        + data.draw(
            st.lists(
                st.integers(1, n_scores), min_size=n_tokens - n_scores, max_size=n_tokens - n_scores
            )
        )
    )
    phi = phi[np.array(data.draw(st.permutations(range(n_tokens))))]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    raw = rng.random((3, n_tokens))
    raw *= rng.uniform(0.01, 1.0, size=(3, 1)) / raw.sum(axis=1, keepdims=True)
    prob = xr.DataArray(raw, dims=("item", "token"))
    ds = xl.item_pmf_from_tokens(prob, phi)
    for s in range(1, n_scores + 1):
        want = raw[:, phi == s].sum(axis=1) / raw.sum(axis=1)
        np.testing.assert_allclose(ds.pmf.sel(score=s).values, want, rtol=1e-12)
    np.testing.assert_allclose(ds.valid_mass.values, raw.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(xl.failure_rate(ds).values, 1 - raw.sum(axis=1), rtol=1e-12)


def test_renormalize_by_hand():
    raw = xr.DataArray(
        [[0.1, 0.3, 0.4], [0.0, 0.02, 0.0]],
        dims=("item", "score"),
        coords={"item": ["a", "b"], "score": [1, 2, 3]},
        attrs={"note": "kept"},
    )
    pmf = xl.renormalize(raw)
    np.testing.assert_allclose(pmf.values, [[0.125, 0.375, 0.5], [0, 1, 0]])
    assert pmf.name == "pmf" and pmf.attrs["note"] == "kept"


def test_failure_rate_dataarray_and_tolerance():
    vm = xr.DataArray(
        [[1.0 + 5e-6, 0.25]],
        dims=("model", "item"),
        coords={"model": ["m"], "item": ["1", "2"]},
        attrs={"source": "x"},
    )
    fr = xl.failure_rate(vm)
    np.testing.assert_allclose(fr.values, [[0.0, 0.75]])  # float32 overshoot clipped to 0
    assert fr.attrs["source"] == "x" and "failure rate" in fr.attrs["long_name"]


def test_dask_stays_lazy_and_equals_eager():
    prob = token_prob().chunk({"model": 1})

    def refuse(*args, **kwargs):
        raise AssertionError("computed eagerly")

    with dask.config.set(scheduler=refuse):
        ds = xl.item_pmf_from_tokens(prob, PHI)
        fr = xl.failure_rate(ds)
        pmf = xl.renormalize(ds.pmf * ds.valid_mass)
    assert ds.pmf.chunks is not None and fr.chunks is not None and pmf.chunks is not None
    eager = xl.item_pmf_from_tokens(token_prob(), PHI)
    xr.testing.assert_allclose(ds.compute(), eager)
    xr.testing.assert_allclose(fr.compute(), xl.failure_rate(eager))
    xr.testing.assert_allclose(pmf.compute(), eager.pmf)


# --------------------------------------------------------------------------- bad input


def with_value(model, item, token, value):
    prob = token_prob()
    prob.loc[{"model": model, "item": item, "token": token}] = value
    return prob


@pytest.mark.parametrize(
    ("prob", "match"),
    [
        (
            with_value("qwen", "2", " 2", np.nan),
            r"token probability is NaN at model='qwen', item='2', token=' 2'",
        ),
        (
            with_value("aya", "1", "3", -0.01),
            r"token probability is negative at model='aya', item='1', token='3'",
        ),
        (
            token_prob([[[0.1, 0.2, 0.05, 0.3, 0.1, 0.15], [0] * 6]] * 2),
            r"total valid mass is 0 at \[model='aya', item='2'\]; \[model='qwen', item='2'\]"
            r".*no probability on any valid answer",
        ),
        (with_value("qwen", "1", "1", 0.5), r"total valid mass exceeds 1 .*model='qwen', item='1'"),
    ],
)
def test_bad_token_probabilities(prob, match):
    with pytest.raises(InvalidPMFError, match=match):
        xl.item_pmf_from_tokens(prob, PHI)


def test_bad_token_maps():
    prob = token_prob()
    with pytest.raises(XlikertError, match=r"scale value\(s\) \[4\] have no token"):
        xl.item_pmf_from_tokens(prob, PHI, score_values=range(1, 5))
    with pytest.raises(XlikertError, match=r"scale value\(s\) \[2\] have no token"):
        xl.item_pmf_from_tokens(prob, {**PHI, "2": 3, " 2": 3})
    with pytest.raises(XlikertError, match=r"outside the scale \[1, 2, 3\]: '3' -> 8"):
        xl.item_pmf_from_tokens(prob, {**PHI, "3": 8}, score_values=[1, 2, 3])
    with pytest.raises(XlikertError, match=r"no scale value for token\(s\) \['▁1'\]"):
        xl.item_pmf_from_tokens(prob, {k: v for k, v in PHI.items() if k != "▁1"})
    with pytest.raises(XlikertError, match=r"token\(s\) \['seven'\] that are not in"):
        xl.item_pmf_from_tokens(prob, {**PHI, "seven": 7})
    with pytest.raises(XlikertError, match="has 3 entries but 'token' has 6"):
        xl.item_pmf_from_tokens(prob, [1, 2, 3])
    with pytest.raises(XlikertError, match="non-integer"):
        xl.item_pmf_from_tokens(prob, {**PHI, "3": 2.5})
    with pytest.raises(XlikertError, match="not a scale value"):
        xl.item_pmf_from_tokens(prob, {**PHI, "3": "three"})
    with pytest.raises(XlikertError, match="no token dimension 'vocab'"):
        xl.item_pmf_from_tokens(prob, PHI, token_dim="vocab")
    with pytest.raises(InvalidPMFError, match="consecutive"):
        xl.item_pmf_from_tokens(prob, PHI, score_values=[1, 2, 3, 5])
    with pytest.raises(TypeError):
        xl.item_pmf_from_tokens(prob.values, PHI)


def test_bad_renormalize_input():
    def raw(values, score=(1, 2, 3)):
        return xr.DataArray(
            np.asarray(values, float),
            dims=("item", "score"),
            coords={"item": ["a", "b"], "score": list(score)},
        )

    with pytest.raises(InvalidPMFError, match=r"total valid mass is 0 at item='b'"):
        xl.renormalize(raw([[0.2, 0.2, 0.2], [0, 0, 0]]))
    with pytest.raises(InvalidPMFError, match=r"NaN at item='a', score=2"):
        xl.renormalize(raw([[0.2, np.nan, 0.2], [0.1, 0, 0]]))
    with pytest.raises(InvalidPMFError, match=r"negative at item='b', score=3"):
        xl.renormalize(raw([[0.2, 0.1, 0.2], [0.1, 0, -0.1]]))
    with pytest.raises(InvalidPMFError, match=r"exceeds 1 .*item='a'"):
        xl.renormalize(raw([[0.5, 0.5, 0.2], [0.1, 0, 0]]))
    with pytest.raises(InvalidPMFError, match="consecutive"):
        xl.renormalize(raw([[0.2, 0.2, 0.2], [0.1, 0, 0]], score=(1, 3, 4)))


def test_bad_failure_rate_input():
    vm = xr.DataArray(
        [[0.9, 1.2], [np.nan, 0.5]],
        dims=("model", "item"),
        coords={"model": ["a", "b"], "item": ["1", "2"]},
    )
    with pytest.raises(InvalidPMFError, match=r"valid_mass is NaN at model='b', item='1'"):
        xl.failure_rate(vm)
    with pytest.raises(InvalidPMFError, match=r"valid mass exceeds 1 .*model='a', item='2'"):
        xl.failure_rate(vm.fillna(0.5))
    with pytest.raises(InvalidPMFError, match=r"negative at model='b', item='1'"):
        xl.failure_rate(vm.fillna(-0.5).clip(max=1))
    with pytest.raises(InvalidPMFError, match=r"no 'valid_mass' variable.*'pmf'"):
        xl.failure_rate(xr.Dataset({"pmf": vm}))
    with pytest.raises(TypeError):
        xl.failure_rate(np.ones(3))
