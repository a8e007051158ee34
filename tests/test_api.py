"""The public API has one source, :data:`xlikert.api.API` (issue 43, item 6).

``xl.__all__``, the ``.likert`` accessor's methods and the API reference page
(``docs/api.rst``) are each derived from that list; this test checks that the three
are the same names, and that the committed page is what the list writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import xarray as xr

import xlikert as xl
from xlikert import api

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import xlikert_docs  # noqa: E402


def _reference_names(text: str) -> dict[str, set[str]]:
    """The names each ``.. currentmodule::`` of an API page lists in its autosummaries."""
    out: dict[str, set[str]] = {}
    module = None
    for line in text.splitlines():
        if m := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = m.group(1)
        elif (m := re.match(r"   ([A-Za-z_][\w.]*)$", line)) and module:
            out.setdefault(module, set()).add(m.group(1))
    return out


def test_all_the_accessor_and_the_api_reference_are_the_same_names():
    listed = set(api.exports())
    assert set(xl.__all__) == listed | {"__version__"}
    for name in listed:
        assert getattr(xl, name) is api.exports()[name]

    da, ds = xr.DataArray([0.5, 0.5], dims="score"), xr.Dataset()
    methods = {
        owner: {n for n in dir(obj.likert) if not n.startswith("_")} - {"attrs"}
        for owner, obj in (("DataArray", da), ("Dataset", ds))
    }
    for owner, obj in (("DataArray", da), ("Dataset", ds)):
        assert methods[owner] == set(api.accessor_methods(owner))
        for name in methods[owner]:  # each method wraps the very function of xl.*
            assert getattr(type(obj.likert), name).__wrapped__ is getattr(xl, name)

    reference = _reference_names(xlikert_docs.api_reference())
    top = {n for n in reference["xlikert"] if "." not in n}
    assert top == set(xl.__all__) - {"__version__"}
    accessor = reference["xarray"]
    for owner in ("DataArray", "Dataset"):
        listed_methods = {n.split(".")[-1] for n in accessor if n.startswith(f"{owner}.")}
        assert listed_methods == methods[owner] | {"attrs"}


def test_the_committed_api_reference_is_what_the_list_writes():
    committed = (ROOT / "docs" / "api.rst").read_text("utf-8")
    assert committed == xlikert_docs.api_reference(), (
        "docs/api.rst is out of date: build the docs or run python docs/_ext/xlikert_docs.py"
    )


def test_a_name_added_to_the_list_reaches_all_three(monkeypatch):
    """Adding an entry is the one step: the page lists it, and the accessor built from the
    list has it (so does ``xl.*``, whose names are :func:`xlikert.api.exports`)."""

    def new_measure(pmf, *, score_dim="score"):
        """A new analysis function."""
        return pmf.sum(score_dim)

    section = api.Heading("New", (api.Entry(new_measure, api.BOTH),))
    monkeypatch.setattr(api, "API", (*api.API, section))
    assert "new_measure" in api.public_names()
    assert "new_measure" in api.accessor_methods("DataArray")
    names = _reference_names(xlikert_docs.api_reference())
    assert "new_measure" in names["xlikert"]
    assert "DataArray.likert.new_measure" in names["xarray"]
    method = api.accessor_method(new_measure)
    holder = type("Holder", (), {"_obj": xr.DataArray([0.25, 0.75], dims="score"), "f": method})
    assert float(holder().f()) == 1.0


def test_the_namespaces_are_listed_once():
    for name, module in api.NAMESPACES.items():
        assert getattr(xl, name).__name__ == module


def test_the_type_stub_is_what_the_list_writes():
    """Type checkers and editors read ``xlikert/__init__.pyi`` (the names are bound from
    the list at run time); it holds every name of ``xl.__all__``, from the list."""
    committed = (ROOT / "xlikert" / "__init__.pyi").read_text("utf-8")
    assert committed == api.stub(), (
        'xlikert/__init__.pyi is out of date: python -c "from xlikert import api; api.write_stub()"'
    )
    for name in xl.__all__:
        assert f" as {name}\n" in committed, name
