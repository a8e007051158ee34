"""Property test over the public analysis API (issue 12).

Random designs: factor names drawn from ordinary names and from the names
xlikert reserves (its auxiliary dims, the variables it writes, private and
``:``/``/`` names), random level and item counts, DataArray or results
Dataset input, eager or Dask. Every call must either return the result of the
reference path -- the same PMFs under safe factor names, as an eager
DataArray, through the plain-numpy kernels -- with the names mapped back, or
raise an :class:`~xlikert.core.errors.XlikertError` naming the problem. Never a
raw error, never a different result.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support.pmfs import make_pmf

import xlikert as xl
from xlikert import sampling
from xlikert.core.errors import XlikertError

SAFE = ["model", "target", "persona", "prompt", "language"]
# Hard-coded (not read from xlikert.core.dims) so that the test means the same on any version.
RESERVED = [
    "rank",
    "temperature",
    "top_p",
    "trace",
    "token",
    "subscale",
    "effect",
    "slope",
    "pair",
    "term",
    "n",
    "E",
    "SD",
    "SNR",
    "dPD",
    "grand",
    "consensus",
    "lower",
    "upper",
    "error",
    "mean",
    "var",
    "valid_mass",
    "prompt_text",
    "level",
    "order",
    "_term",
    "_block",
    "a:b",
]


def _trend_values(obj, dim):
    return np.arange(1.0, obj.sizes[dim] + 1.0)


#: name -> call(obj, factor names, kernels); the first factor is the one a call is about.
CALLS = {
    "composite": lambda o, f, e: xl.composite(o, kernels=e),
    "consensus": lambda o, f, e: xl.consensus_bounds(o, tol=1e-6, kernels=e),
    "dissension": lambda o, f, e: xl.dissension(o, tol=1e-6, kernels=e),
    "entropy": lambda o, f, e: xl.entropy(o),
    "tastle_consensus": lambda o, f, e: xl.tastle_consensus(o),
    "grand_mixture": lambda o, f, e: xl.grand_mixture(o),
    "marginal_slice": lambda o, f, e: xl.marginal_slice(o, f[0]),
    "decompose": lambda o, f, e: xl.decompose(o, kernels=e, progress=False),
    "contrast": lambda o, f, e: xl.contrast(o, f[0], kernels=e),
    "trend": lambda o, f, e: xl.trend(o, f[0], values=_trend_values(o, f[0]), kernels=e),
    "summarize": lambda o, f, e: xl.summarize(xl.composite(o, kernels=e), dim="score"),
    "composite_moments": lambda o, f, e: sampling.composite_moments(o),
    "standard_error": lambda o, f, e: sampling.standard_error(o, n=[10, 100]),
    "sampling_se_table": lambda o, f, e: sampling.sampling_se_table(o, n=[10], by=f[0]),
    "flip_probability": lambda o, f, e: sampling.flip_probability(o, n=[10]),
}


@st.composite
def designs(draw):
    k = draw(st.integers(1, 3))
    # half the names ordinary, half reserved; mostly two or more levels
    name = st.one_of(st.sampled_from(SAFE), st.sampled_from(RESERVED))
    names = draw(st.lists(name, min_size=k, max_size=k, unique=True))
    return {
        "names": names,
        "levels": draw(st.lists(st.sampled_from([1, 2, 2, 3]), min_size=k, max_size=k)),
        "n_items": draw(st.integers(1, 3)),
        "n_scores": draw(st.integers(2, 4)),
        "seed": draw(st.integers(0, 2**16)),
        "dataset": draw(st.booleans()),
        "lazy": draw(st.booleans()),
        "call": draw(st.sampled_from(sorted(CALLS))),
    }


def _rename_back(obj, mapping):
    """Rename dims and coords of an xarray result from the user's names to the safe ones."""
    present = {k: v for k, v in mapping.items() if k in obj.dims or k in obj.coords}
    return obj.rename(present) if present else obj


def _term_back(term: str, mapping) -> str:
    return ":".join(mapping.get(part, part) for part in term.split(":"))


def _pad(want, got):
    """Dask results keep the full attainable effect range (documented); pad the reference."""
    for d in ("effect", "slope"):
        if d in got.dims and d in want.dims and got.sizes[d] != want.sizes[d]:
            want = want.reindex({d: got[d].values}, fill_value=0.0)
    return want


def _compare(got, want, mapping):
    if isinstance(got, xr.DataTree):
        assert isinstance(want, xr.DataTree)
        got = got.compute()
        names = {_term_back(str(k), mapping): k for k in got.children}
        assert sorted(names) == sorted(want.children)
        for safe, orig in names.items():
            g = _rename_back(got[orig].to_dataset(), mapping)
            xr.testing.assert_allclose(g, _pad(want[safe].to_dataset(), g), atol=1e-12)
        return
    if isinstance(got, pd.DataFrame):
        got = got.copy()
        if "term" in got:
            got["term"] = got["term"].map(lambda t: _term_back(t, mapping))
        got.index = got.index.rename(mapping.get(got.index.name, got.index.name))
        pd.testing.assert_frame_equal(got, want, check_exact=False, atol=1e-12, rtol=0)
        return
    got = _rename_back(got.compute(), mapping)
    assert type(got) is type(want)
    xr.testing.assert_allclose(got, _pad(want, got), atol=1e-12)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(design=designs())
# found by the property: a factor named 'subscale' beside items was carried, not refused
@example(design={"names": ["model", "target", "subscale"], "levels": [1, 1, 1], "n_items": 1,
                 "n_scores": 2, "seed": 0, "dataset": False, "lazy": False,
                 "call": "grand_mixture"})  # fmt: skip
def test_every_call_matches_the_reference_or_names_the_problem(design):
    names, levels = design["names"], design["levels"]
    safe = [f"f{i}" for i in range(len(names))]
    ref_pmf = make_pmf(
        levels, n_items=design["n_items"], n_scores=design["n_scores"], seed=design["seed"]
    )
    user = ref_pmf.rename(dict(zip(safe, names, strict=True)))
    back = dict(zip(names, safe, strict=True))
    if design["lazy"]:
        user = user.chunk({names[0]: 1})
    if design["dataset"]:
        if "pmf" in names:  # pragma: no cover - not drawn: the Dataset cannot be built
            return
        user = xr.Dataset({"pmf": user})
    call = CALLS[design["call"]]

    try:
        want = call(ref_pmf, safe, "numpy")
    except XlikertError:
        want = None  # the design itself is not analysable (e.g. one level): must raise too

    try:
        got = call(user, names, None)
    except XlikertError as exc:
        event("raised XlikertError")
        msg = str(exc)
        reserved = [n for n in names if n in RESERVED]
        if want is not None:
            # the reference worked, so the problem is a reserved name: it must be named
            assert reserved, f"{design}: raised although no name is reserved: {msg}"
            assert any(re.search(re.escape(repr(n)), msg) for n in reserved), (design, msg)
        return
    assert want is not None, f"{design}: the reference raised, the call returned"
    event("matched the reference" + (" (a reserved name)" if set(names) & set(RESERVED) else ""))
    _compare(got, want, back)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_safe_names_always_work(name):
    """The property's happy path, pinned: safe names never raise."""
    pmf = make_pmf([2, 3], n_items=2, n_scores=3, seed=1).rename(f0="model", f1="target")
    want = CALLS[name](pmf, ["model", "target"], "numpy")
    for obj in (pmf.to_dataset(), pmf.chunk({"model": 1})):
        _compare(CALLS[name](obj, ["model", "target"], None), want, {})


@pytest.mark.parametrize("levels", [[2, 3], [1, 3]])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_xarray_result_writes_the_xarray_way(name, levels, tmp_path):
    """What the analysis returns is netCDF-ready as it stands: ``obj.to_netcdf`` works."""
    pmf = make_pmf(levels, n_items=2, n_scores=3, seed=1).rename(f0="model", f1="target")
    pmf.attrs = {"models": {"m": {"dtype": "float32"}}, "flags": [True], "one": ["x"]}
    ds = xl.core.io.encode_attrs(pmf.to_dataset())  # as collect() returns it
    try:
        got = CALLS[name](ds, ["target", "model"], None)
    except XlikertError:  # a contrast or trend of a one-level factor: nothing to write
        assert levels[0] == 1 and name in {"contrast", "trend", "marginal_slice"}, name
        return
    if isinstance(got, pd.DataFrame):
        return
    if isinstance(got, xr.DataArray):
        got = got.to_dataset(name=got.name or "result")
    got.to_netcdf(tmp_path / "out.nc")
    back = (xr.open_datatree if isinstance(got, xr.DataTree) else xr.open_dataset)(
        tmp_path / "out.nc"
    )
    with back:
        assert xl.core.io.read_attrs(back) == xl.core.io.read_attrs(got)
