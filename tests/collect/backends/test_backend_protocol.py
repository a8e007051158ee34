"""Every backend has one shape: the three functions of :class:`~xlikert.collect.protocol.Backend`
(``check``, ``inputs``, ``open``), defined in its package's ``__init__.py``."""

from __future__ import annotations

import importlib
import inspect

import pytest

from xlikert.collect import protocol
from xlikert.collect.protocol import BACKENDS, Backend, backend_module
from xlikert.core.errors import CollectionError

SEAM = ("check", "inputs", "open")


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_defines_the_three_functions_in_its_init(name):
    module = importlib.import_module(BACKENDS[name])
    assert module.__file__.endswith("__init__.py"), "a backend is a package"
    assert isinstance(module, Backend)
    for fn in SEAM:
        func = getattr(module, fn)
        assert func.__module__ == module.__name__, f"{name}.{fn} is defined in {func.__module__}"
        assert fn in module.__all__


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_takes_the_protocols_arguments(name):
    module = importlib.import_module(BACKENDS[name])
    for fn in SEAM:
        want = inspect.signature(getattr(Backend, fn)).parameters
        got = inspect.signature(getattr(module, fn)).parameters
        want_names = [p for p in want if p != "self"]
        assert list(got) == want_names, f"{name}.{fn}{tuple(got)}"
        for p in want_names:
            assert got[p].kind == want[p].kind, f"{name}.{fn}: {p} is {got[p].kind}"


def test_the_backend_module_of_an_entry_is_checked_against_the_protocol(monkeypatch):
    entry = {"name": "m", "source": "openai:m"}
    assert backend_module(entry) is importlib.import_module(BACKENDS["openai"])
    monkeypatch.setitem(protocol.BACKENDS, "openai", "xlikert.collect.answers.layout")  # no seam
    with pytest.raises(CollectionError, match=r"xlikert\.collect\.answers\.layout does not define "
                       r"\['check', 'inputs', 'open'\]"):  # fmt: skip
        backend_module(entry)
