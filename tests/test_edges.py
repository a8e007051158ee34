"""Edges of the analysis API a new user hits (issue 12): one test per finding.

Each test fails on the code before the fix (checked against a snapshot of main):
a reserved factor name gave a raw xarray error or an empty table, Datasets were
refused by some functions, ``xlikert.consensus`` named both a function and a
module, Consensus returned NaN without a warning, ``xlikert report`` printed a
traceback, and dims were positional in some functions.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner
from support.pmfs import make_pmf

import xlikert as xl
from xlikert import plot, reflect_reverse_keyed, sampling, subscale_composites
from xlikert.cli import main
from xlikert.core.errors import XlikertError
from xlikert.design import load_experiment

#: The auxiliary dims the issue names, and the library's own output dims.
AUXILIARY = ["rank", "temperature", "top_p", "effect", "slope", "pair", "trace", "n"]


def with_factor(name: str, levels: int = 2, **kw) -> xr.DataArray:
    """Item PMFs on (model, <name>, item, score)."""
    return make_pmf([2, levels], **kw).rename(f0="model", f1=name)


# ----------------------------------------------------------------- one registry of dim roles


@pytest.mark.parametrize("name", AUXILIARY)
def test_loader_rejects_a_factor_named_like_an_auxiliary_dim(tmp_path, name):
    path = tmp_path / "exp.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [experiment]
            instrument = "cetscale"
            [factors.target]
            levels = ["USA", "China"]
            [factors.{name}]
            levels = ["a", "b"]
            """
        )
    )
    with pytest.raises(XlikertError) as info:
        load_experiment(path)
    msg = str(info.value)
    assert str(path) in msg and f"factor {name!r}" in msg and "reserved" in msg


@pytest.mark.parametrize("name", AUXILIARY)
def test_sampling_se_table_names_a_reserved_factor(name):
    # before: raw xarray ValueError (temperature, rank, ...), an empty table (n), or a
    # table that silently dropped the factor (slope, pair, trace)
    with pytest.raises(XlikertError, match=rf"'{name}'.*reserved"):
        sampling.sampling_se_table(with_factor(name), n=[10])


CALLS = {
    "decompose": lambda p: xl.summary_table(xl.decompose(p)),
    "contrast": lambda p: xl.contrast(p, "model"),
    "grand_mixture": lambda p: xl.grand_mixture(p),
    "standard_error": lambda p: sampling.standard_error(p, n=[10]),
    "flip_probability": lambda p: sampling.flip_probability(p, n=[10]),
    "plot.consensus": lambda p: plot.consensus(xl.consensus(p)),
    "report": lambda p: xl.report.write_report(xr.Dataset({"pmf": p}), "unused"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("name", [*AUXILIARY, "grand", "E", "_term"])
def test_every_layer_names_a_reserved_factor(call, name, tmp_path, monkeypatch):
    """construct, sampling, plot and report read factors from one registry: a reserved
    name is an XlikertError naming it in each, never a raw error, a dropped variable
    (a factor 'grand' overwrote the grand-mean node) or a silently smaller table."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(XlikertError, match=rf"'{name}'"):
        CALLS[call](with_factor(name))


@pytest.mark.parametrize("name", ["lower", "consensus", "error"])
def test_consensus_bounds_keep_their_variables(name):
    # before: a factor 'lower' replaced the 'lower' bounds variable without a word
    with pytest.raises(XlikertError, match=rf"'{name}'.*reserved"):
        xl.consensus_bounds(with_factor(name))


def test_the_decoding_grid_is_carried_where_it_makes_sense():
    grid = make_pmf([2, 2, 2], n_items=2).rename(f0="model", f1="temperature", f2="top_p")
    s = xl.composite(grid)
    assert set(s.dims) == {"model", "temperature", "top_p", "score"}
    assert xl.consensus(grid).dims == ("model", "temperature", "top_p")
    with pytest.raises(XlikertError, match=r"'temperature'.*reserved"):
        xl.decompose(grid)  # a decoding setting is not a factor: select one first
    dec = xl.decompose(grid.isel(temperature=0, top_p=0, drop=True))
    assert sorted(dec.children) == ["grand", "model"]


# ----------------------------------------------------------------- DataArray or Dataset


DATASET_CALLS = {
    "consensus": lambda o: xl.consensus(o, tol=1e-6),
    "dissension": lambda o: xl.dissension(o, tol=1e-6),
    "entropy": lambda o: xl.entropy(o),
    "tastle_consensus": lambda o: xl.tastle_consensus(o),
    "composite": lambda o: xl.composite(o),
    "grand_mixture": lambda o: xl.grand_mixture(o),
    "marginal_slice": lambda o: xl.marginal_slice(o, "f0"),
    "contrast": lambda o: xl.contrast(o, "f0"),
    "trend": lambda o: xl.trend(o, "f0", values=[1.0, 2.0, 4.0]),
    "summarize": lambda o: xl.summarize(o, dim="score"),
    "composite_moments": lambda o: sampling.composite_moments(o),
    "standard_error": lambda o: sampling.standard_error(o, n=[10]),
    "sampling_se_table": lambda o: sampling.sampling_se_table(o, n=[10]),
    "flip_probability": lambda o: sampling.flip_probability(o, n=[10]),
    "reflect_reverse_keyed": lambda o: reflect_reverse_keyed(o, [True, False]),
    "subscale_composites": lambda o: subscale_composites(o, ["a", "b"]),
}


@pytest.mark.parametrize("name", sorted(DATASET_CALLS))
def test_every_function_takes_a_results_dataset(name):
    # before: xl.consensus(ds) and xl.sampling.standard_error(ds) raised TypeError
    pmf = make_pmf([3, 2], n_items=2, seed=3)
    ds = xr.Dataset({"pmf": pmf, "valid_mass": pmf.sum("score")})
    via_ds, via_da = DATASET_CALLS[name](ds), DATASET_CALLS[name](pmf)
    if isinstance(via_da, xr.DataArray | xr.Dataset):
        xr.testing.assert_identical(via_ds, via_da)
    else:
        assert via_ds.equals(via_da)


def test_decompose_takes_a_results_dataset():
    ds = make_pmf([2, 2], n_items=2).to_dataset()
    xr.testing.assert_identical(xl.decompose(ds), xl.decompose(ds.pmf))


def test_wrong_input_type_is_an_xlikert_error():
    for fn in (xl.consensus, xl.composite, sampling.standard_error, xl.decompose):
        with pytest.raises(XlikertError, match="ndarray"):
            fn(np.full((2, 3), 1 / 3))


# ----------------------------------------------------------------- module names


def test_no_module_is_shadowed_by_a_top_level_name():
    """``import xlikert.X as m`` gives a module for every submodule X: no public name of
    ``xlikert`` is also the name of a submodule (``xlikert.consensus`` was both)."""
    modules = {m.name for m in pkgutil.iter_modules(xl.__path__)}
    assert not modules & set(xl.__all__)
    layer = importlib.import_module("xlikert.analysis.consensus")
    assert inspect.ismodule(layer) and layer.consensus is xl.consensus
    assert callable(xl.consensus) and not inspect.ismodule(xl.consensus)


def test_xlikert_consensus_names_only_the_function():
    """``import xlikert.consensus as m`` gave the function (the attribute shadows the
    module). Now the package holds no module of that name; the layer is
    ``xlikert.analysis.consensus``. (Looked up in the package's own path, without
    importing: a development install's editable finder may map the name elsewhere.)"""
    from importlib.machinery import PathFinder

    assert PathFinder.find_spec("xlikert.consensus", list(xl.__path__)) is None
    analysis = [str(Path(xl.__path__[0]) / "analysis")]
    assert PathFinder.find_spec("xlikert.analysis.consensus", analysis) is not None


# ----------------------------------------------------------------- Multivariate Consensus


def test_max_cells_below_the_first_grid_warns_and_stays_certified():
    # before: NaN, and no warning although the docstring promised one
    from analysis.test_consensus import exact_consensus

    pmf = make_pmf([2], n_items=3, n_scores=5, seed=4)
    with pytest.warns(RuntimeWarning, match=r"exceeds tol=1e-06.*Raise max_cells or tol"):
        ds = xl.consensus_bounds(pmf, tol=1e-6, max_cells=2)
    assert bool(np.isfinite(ds.to_array()).all())
    for j in range(2):
        exact = exact_consensus(pmf.values[j], pmf.score.values)
        assert float(ds.lower[j]) - 1e-13 <= exact <= float(ds.upper[j]) + 1e-13
        assert float(ds.error[j]) > 1e-6


@pytest.mark.parametrize("func", [xl.consensus, xl.consensus_bounds])
def test_max_cells_warns_for_dask_input_when_computed(func):
    pmf = make_pmf([2, 2], n_items=3, n_scores=5, seed=4)
    lazy = pmf.chunk({"f0": 1})
    with warnings.catch_warnings():
        # nothing is computed yet, so nothing warns yet
        warnings.filterwarnings("error", message="Multivariate Consensus")
        out = func(lazy, tol=1e-10, max_cells=40)
    with pytest.warns(RuntimeWarning, match=r"exceeds tol=1e-10 at .*f0='f0_"):
        got = out.compute()
    with pytest.warns(RuntimeWarning):
        want = func(pmf, tol=1e-10, max_cells=40)
    xr.testing.assert_identical(got, want)


def test_an_inverted_interval_raises_an_internal_error(monkeypatch):
    """A lower bound above the upper bound is a broken certificate: it must not be
    collapsed to the midpoint (which hid it) but raise, naming the conditions."""

    from xlikert.kernels import consensus as consensus_kernels

    original = consensus_kernels.consensus_bounds_numpy

    def inverted(p, y, tol, max_cells):
        value, lower, upper = original(p, y, tol, max_cells)
        return value, upper + 1e-3, lower - 1e-3

    monkeypatch.setattr(consensus_kernels, "consensus_bounds_numpy", inverted)
    pmf = make_pmf([2], n_items=2)
    with pytest.raises(RuntimeError, match=r"lower bound exceeds the upper bound at .*f0='f0_0'"):
        xl.consensus(pmf, kernels="numpy")
    with pytest.raises(RuntimeError, match="lower bound exceeds"):
        xl.consensus(pmf.chunk({"f0": 1}), kernels="numpy").compute(scheduler="synchronous")


def test_an_inverted_interval_is_not_bad_input():
    from xlikert.core.errors import InternalError

    assert issubclass(InternalError, RuntimeError)
    assert not issubclass(InternalError, XlikertError)


def test_one_refinement_driver_for_both_twins():
    """The refinement and outward rounding are written once: the compiled kernel and the
    numpy twin run the same driver code; only the grid pass (and item terms) differ."""
    from xlikert.kernels import consensus as kc

    compiled = kc.consensus_core.py_func
    twin = kc._core_numpy
    assert compiled.__code__ is twin.__code__

    def parts(fn):
        return {
            k: c.cell_contents for k, c in zip(fn.__code__.co_freevars, fn.__closure__, strict=True)
        }

    assert parts(compiled) == {"grid_pass": kc._grid_pass, "item_terms": kc._item_terms}
    assert parts(twin) == {"grid_pass": kc._grid_pass_numpy, "item_terms": kc._item_terms_numpy}
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.0, 0.4]])
    y = np.arange(1.0, 4.0)
    np.testing.assert_allclose(
        kc.consensus_core(p, y, 1e-8, 1 << 20), kc._consensus_core_numpy(p, y, 1e-8), atol=1e-14
    )


# ----------------------------------------------------------------- xlikert report


def test_report_on_an_unreadable_file_is_a_clean_error(tmp_path):
    bad = tmp_path / "bad.nc"
    bad.write_text("not a netCDF file\n")
    res = CliRunner().invoke(main, ["report", str(bad), "-o", str(tmp_path / "out")])
    assert res.exit_code == 1
    assert isinstance(res.exception, SystemExit)  # click's clean exit, no traceback
    assert "Error: cannot read" in res.output and "bad.nc" in res.output


def test_report_on_a_file_without_pmf_is_a_clean_error(tmp_path):
    path = tmp_path / "x.nc"
    xl.to_netcdf(xr.Dataset({"x": ("a", [1.0])}), path)
    res = CliRunner().invoke(main, ["report", str(path), "-o", str(tmp_path / "out")])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit)
    assert "no 'pmf' variable" in res.output


# ----------------------------------------------------------------- one calling convention

PUBLIC = {
    **{n: getattr(xl, n) for n in xl.__all__ if inspect.isfunction(getattr(xl, n))},
    **{
        f"sampling.{n}": getattr(sampling, n)
        for n in sampling.__all__
        if inspect.isfunction(getattr(sampling, n))
    },
    **{f"plot.{n}": getattr(plot, n) for n in plot.__all__ if inspect.isfunction(getattr(plot, n))},
    "reflect_reverse_keyed": reflect_reverse_keyed,
    "subscale_composites": subscale_composites,
}
#: Dimension arguments: always keyword-only, with one default per name.
DIM_DEFAULTS = {
    "item_dim": "item",
    "score_dim": "score",
    "term_dim": "term",
    "effect_dim": "effect",
    "token_dim": "token",
    "factors": None,
}


#: Dimension arguments that are keyword-only where they are optional (a required ``dim``
#: is the positional subject: ``contrast(pmf, dim, a, b)``), figures' placing names included.
OPTIONAL_DIMS = ("dim", "dims", "by", "x", "hue", "facet", "row", "col")


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_dims_are_keyword_only_with_one_default(name):
    for p in inspect.signature(PUBLIC[name]).parameters.values():
        is_dim = p.name in DIM_DEFAULTS or (p.name in OPTIONAL_DIMS and p.default is not p.empty)
        if not is_dim:
            continue
        assert p.kind is p.KEYWORD_ONLY, f"{name}: {p.name} is positional"
        if p.name in DIM_DEFAULTS:
            assert p.default == DIM_DEFAULTS[p.name], f"{name}: {p.name}={p.default!r}"


def test_positional_dims_are_refused():
    pmf = make_pmf([2], n_items=2)
    with pytest.raises(TypeError):
        xl.consensus(pmf, "item", "score", 1e-4)
    with pytest.raises(TypeError):
        xl.comonotone_contrast(pmf.rename(item="term"), [1, -1], "term")
    with pytest.raises(TypeError):
        xl.decompose(pmf, ["f0"])
