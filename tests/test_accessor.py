"""The .likert accessor delegates to the module functions, with their signatures."""

from __future__ import annotations

import inspect

import pytest
import xarray as xr
from support.pmfs import make_pmf

import xlikert as xl
from xlikert import accessor
from xlikert.analysis import consensus as consensus_layer
from xlikert.analysis import constraint

_METHODS = [
    name
    for name, fn in vars(accessor._Likert).items()
    if callable(fn) and not name.startswith("_") and name != "to_netcdf"
] + ["failure_rate", "human_marginal", "noise_ceiling"]


def test_construct_methods_delegate():
    pmf = make_pmf([3, 2], n_items=2, seed=8).assign_coords(size=("f0", [1.0, 2.0, 5.0]))
    ds = pmf.to_dataset()
    xr.testing.assert_identical(pmf.likert.composite(), xl.composite(pmf))
    xr.testing.assert_identical(ds.likert.composite(), xl.composite(pmf))
    xr.testing.assert_identical(pmf.likert.contrast("f0"), xl.contrast(pmf, "f0"))
    xr.testing.assert_identical(pmf.likert.trend("f0"), xl.trend(pmf, "f0"))
    xr.testing.assert_identical(pmf.likert.grand_mixture(), xl.grand_mixture(pmf))
    xr.testing.assert_identical(pmf.likert.marginal_slice("f1"), xl.marginal_slice(pmf, "f1"))
    s = xl.composite(pmf)
    xr.testing.assert_identical(s.likert.summarize(dim="score"), xl.summarize(s, dim="score"))
    xr.testing.assert_identical(pmf.likert.decompose(max_order=1), xl.decompose(pmf, max_order=1))
    xr.testing.assert_identical(ds.likert.decompose(max_order=1), xl.decompose(pmf, max_order=1))


@pytest.mark.parametrize(
    "name",
    [
        "consensus",
        "consensus_bounds",
        "tastle_consensus",
        "dissension",
        "dissension_bounds",
        "entropy",
    ],
)
def test_consensus_methods_delegate(monkeypatch, name):
    calls = []
    monkeypatch.setattr(consensus_layer, name, lambda *a, **k: calls.append((a, k)) or "ok")
    pmf = make_pmf([2], n_items=2)
    ds = pmf.to_dataset()
    assert getattr(pmf.likert, name)(score_dim="score") == "ok"
    assert getattr(ds.likert, name)(score_dim="score") == "ok"
    assert calls[0][0] == (pmf,) and calls[0][1]["score_dim"] == "score"
    assert calls[1][0][0] is ds  # the function reads the Dataset's pmf itself
    via_ds = getattr(xl, name)(ds)
    via_da = getattr(xl, name)(pmf)
    xr.testing.assert_identical(via_ds, via_da)


@pytest.mark.parametrize("name", _METHODS)
def test_method_signature_mirrors_function(name):
    """Every method takes the function's arguments less the first, by the same names and
    kinds with the same defaults: no ``*args, **kwargs`` that hide them."""
    fn = getattr(constraint if name == "failure_rate" else xl, name)
    method = getattr(accessor._Likert, name, None) or getattr(accessor.LikertDatasetAccessor, name)
    want = list(inspect.signature(fn).parameters.values())[1:]
    got = list(inspect.signature(method).parameters.values())[1:]  # less self
    assert [(p.name, p.kind, p.default) for p in got] == [(p.name, p.kind, p.default) for p in want]


def test_failure_rate_and_to_netcdf_delegate(monkeypatch, tmp_path):
    ds = make_pmf([2], n_items=2).to_dataset()
    monkeypatch.setattr(constraint, "failure_rate", lambda obj, atol: ("fr", obj, atol))
    assert ds.likert.failure_rate(atol=0.5) == ("fr", ds, 0.5)
    ds.likert.to_netcdf(tmp_path / "x.nc")
    xr.testing.assert_identical(xl.open_results(tmp_path / "x.nc"), ds)
