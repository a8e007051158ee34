"""The .likert accessor delegates to the module functions."""

from __future__ import annotations

import sys

import pytest
import xarray as xr
from conftest import make_pmf

import xlikert as xl

consensus_mod = sys.modules["xlikert.consensus"]
constraint_mod = sys.modules["xlikert.constraint"]


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


@pytest.mark.parametrize("name", ["consensus", "tastle_consensus", "dissension", "entropy"])
def test_consensus_methods_delegate(monkeypatch, name):
    calls = []
    monkeypatch.setattr(consensus_mod, name, lambda *a, **k: calls.append((a, k)) or "ok")
    pmf = make_pmf([2], n_items=2)
    assert getattr(pmf.likert, name)(tol=1e-4) == "ok"
    assert getattr(pmf.to_dataset().likert, name)(tol=1e-4) == "ok"
    assert calls[0][0][0] is pmf and calls[0][1] == {"tol": 1e-4}
    xr.testing.assert_identical(calls[1][0][0], pmf)


def test_failure_rate_and_to_netcdf_delegate(monkeypatch, tmp_path):
    ds = make_pmf([2], n_items=2).to_dataset()
    monkeypatch.setattr(constraint_mod, "failure_rate", lambda obj: ("fr", obj))
    assert ds.likert.failure_rate() == ("fr", ds)
    ds.likert.to_netcdf(tmp_path / "x.nc")
    xr.testing.assert_identical(xl.open_results(tmp_path / "x.nc"), ds)
