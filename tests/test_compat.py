"""Every deprecation warning of xlikert._compat points at the caller's line (its stacklevel)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
from support.pmfs import make_pmf

import xlikert as xl
from xlikert import plot


def _points_here(seen: pytest.WarningsRecorder) -> None:
    deprecations = [w for w in seen if issubclass(w.category, DeprecationWarning)]
    assert deprecations
    assert [w.filename for w in deprecations] == [__file__] * len(deprecations), [
        (w.filename, w.lineno, str(w.message)) for w in deprecations
    ]


@pytest.mark.parametrize("how", ["from", "import_module"])
def test_an_old_module_path(how, monkeypatch):
    monkeypatch.delitem(sys.modules, "xlikert.construct", raising=False)
    with pytest.warns(DeprecationWarning, match="xlikert.construct is deprecated") as seen:
        if how == "from":
            from xlikert.construct import composite
        else:
            composite = importlib.import_module("xlikert.construct").composite
    assert composite is xl.composite
    _points_here(seen)


@pytest.mark.parametrize("how", ["from", "attribute"])
def test_a_name_moved_out_of_a_module(how):
    with pytest.warns(DeprecationWarning, match="protocol.CollectOptions is deprecated") as seen:
        if how == "from":
            from xlikert.collect.protocol import CollectOptions
        else:
            import xlikert.collect.protocol as protocol

            CollectOptions = protocol.CollectOptions
    assert CollectOptions is xl.collect.CollectOptions
    _points_here(seen)


def test_a_renamed_keyword_a_retired_keyword_and_a_positional_argument():
    pmf = make_pmf([2, 3], n_items=2).rename(f0="model", f1="target")
    with pytest.warns(DeprecationWarning, match=r"marginal_slice\(dims=") as seen:
        xl.marginal_slice(pmf, dims="target")
    _points_here(seen)
    with pytest.warns(DeprecationWarning, match=r"marginal_slice\(dims=") as seen:
        pmf.likert.marginal_slice(dims="target")
    _points_here(seen)
    with pytest.warns(DeprecationWarning, match=r"consensus\(bounds=") as seen:
        xl.consensus(pmf, bounds=True)
    _points_here(seen)
    se = xl.sampling.standard_error(pmf, n=[10])
    with pytest.warns(DeprecationWarning, match="by position") as seen:
        plot.standard_error(se, "target")
    _points_here(seen)


def test_renamed_keyword_inside_a_function_of_another_module(tmp_path, monkeypatch):
    """renamed_keyword is called by the function that took ``**kwargs``: the warning
    points at that function's caller."""
    (tmp_path / "elsewhere.py").write_text(
        textwrap.dedent(
            """
            from xlikert._compat import renamed_keyword

            def f(dim=None, **kwargs):
                return renamed_keyword("f", kwargs, "dims", "dim", dim)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from elsewhere import f

    with pytest.warns(DeprecationWarning, match=r"f\(dims=") as seen:
        assert f(dims="x") == "x"
    _points_here(seen)
