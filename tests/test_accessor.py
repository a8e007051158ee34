"""The .likert accessor delegates to the module functions, with their signatures."""

from __future__ import annotations

import inspect

import pytest
import xarray as xr
from support.pmfs import make_pmf

import xlikert as xl
from xlikert import accessor, api
from xlikert.analysis import consensus as consensus_layer
from xlikert.analysis import constraint

_METHODS = sorted(api.accessor_methods("Dataset"))


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
def test_consensus_methods_delegate(name):
    pmf = make_pmf([2], n_items=2)
    ds = pmf.to_dataset()
    fn = getattr(consensus_layer, name)
    xr.testing.assert_identical(getattr(pmf.likert, name)(score_dim="score"), fn(pmf))
    xr.testing.assert_identical(getattr(ds.likert, name)(score_dim="score"), fn(ds))
    via_ds = getattr(xl, name)(ds)
    via_da = getattr(xl, name)(pmf)
    xr.testing.assert_identical(via_ds, via_da)


@pytest.mark.parametrize("name", _METHODS)
def test_method_signature_mirrors_function(name):
    """Every method takes the function's arguments less the first, by the same names and
    kinds with the same defaults: no ``*args, **kwargs`` that hide them."""
    fn = getattr(xl, name)
    method = getattr(accessor.LikertDatasetAccessor, name)
    want = list(inspect.signature(fn).parameters.values())[1:]
    got = list(inspect.signature(method).parameters.values())[1:]  # less self
    assert [(p.name, p.kind, p.default) for p in got] == [(p.name, p.kind, p.default) for p in want]
    assert [p.annotation for p in got] == [p.annotation for p in want]
    bound = getattr(make_pmf([2], n_items=2).to_dataset().likert, name)
    assert inspect.signature(bound) == inspect.signature(fn).replace(
        parameters=list(inspect.signature(fn).parameters.values())[1:]
    )
    assert method.__doc__ == fn.__doc__ and method.__name__ == fn.__name__


def test_help_shows_the_function_s_signature_and_docstring():
    import pydoc

    pmf = make_pmf([2], n_items=2)
    text = pydoc.render_doc(pmf.likert.decompose, renderer=pydoc.plaintext)
    assert "decompose(*, factors:" in text and "max_order" in text
    assert xl.decompose.__doc__.splitlines()[0] in text


def test_a_method_passes_every_argument_on():
    calls = []
    method = api.accessor_method(lambda pmf, dim, *, by=None: calls.append((pmf, dim, by)))
    holder = type("Holder", (), {"_obj": "the pmf", "f": method})()
    holder.f("d", by="b")
    holder.f(dim="d2")
    assert calls == [("the pmf", "d", "b"), ("the pmf", "d2", None)]


def test_the_accessor_is_not_in_the_doctests_twice():
    """The methods are built in :mod:`xlikert.api`: the accessor module's doctests do not
    run every function's examples a second time."""
    import doctest

    found = doctest.DocTestFinder().find(accessor)
    assert not [t.name for t in found if t.examples and t.name.count(".") > 2]


def test_failure_rate_and_to_netcdf_delegate(tmp_path):
    pmf = make_pmf([2], n_items=2)
    ds = pmf.to_dataset().assign(valid_mass=pmf.sum("score") * 0.75)
    xr.testing.assert_identical(ds.likert.failure_rate(atol=0.5), constraint.failure_rate(ds))
    ds.likert.to_netcdf(tmp_path / "x.nc")
    xr.testing.assert_identical(xl.open_results(tmp_path / "x.nc"), ds)
