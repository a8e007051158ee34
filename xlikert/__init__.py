"""xlikert: exact next-token PMFs of language models on Likert instruments.

The pipeline, one package per stage::

    design -> collect -> analysis (constraint -> consensus -> construct -> ...) -> report

:mod:`xlikert.design` renders every prompt of a fully crossed experiment;
:mod:`xlikert.collect` reads each prompt's exact next-token PMF through one
backend protocol; :mod:`xlikert.analysis` holds one module per analysis stage;
:mod:`xlikert.report` writes the tables and figures. Every analysis function is
re-exported here (``xl.composite``, ``xl.decompose``, ...; the one list of them is
:data:`xlikert.api.API`), takes a PMF
DataArray or a results Dataset first and its dimension arguments by keyword;
the dimension roles are registered in :mod:`xlikert.core.dims`, the variables of a
results file in :mod:`xlikert.core.schema`.

>>> import xlikert as xl
>>> ds = xl.open_results("results.nc")            # doctest: +SKIP
>>> xl.failure_rate(ds)                           # doctest: +SKIP
>>> dec = xl.decompose(ds)                        # doctest: +SKIP
>>> xl.summary_table(dec)                         # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

from . import accessor as _accessor  # noqa: F401  (registers the .likert accessor)
from . import api as _api
from ._version import __version__ as __version__

# Every public name, from the one list of the public API (xlikert.api.API).
globals().update(_api.exports())


def __getattr__(name: str) -> Any:
    # The namespaces loaded on first use (torch, matplotlib): ``xl.collect``, ``xl.plot``, ...
    if name in _api.NAMESPACES:
        return importlib.import_module(_api.NAMESPACES[name])
    raise AttributeError(f"module 'xlikert' has no attribute {name!r}")


__all__ = _api.public_names()  # pyright: ignore[reportUnsupportedDunderAll]
