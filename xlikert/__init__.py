"""xlikert: exact next-token PMFs of language models on Likert instruments.

The pipeline, one package per stage::

    design -> collect -> analysis (constraint -> consensus -> construct -> ...) -> report

:mod:`xlikert.design` renders every prompt of a fully crossed experiment;
:mod:`xlikert.collect` reads each prompt's exact next-token PMF through one
backend protocol; :mod:`xlikert.analysis` holds one module per analysis stage;
:mod:`xlikert.report` writes the tables and figures. Every analysis function is
re-exported here (``xl.composite``, ``xl.decompose``, ...), takes a PMF
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
from ._version import __version__
from .analysis.alignment import (
    alignment,
    jensen_shannon,
    mean_difference,
    noise_ceiling,
    representativeness,
    silicon_population,
    total_variation,
    wasserstein,
)
from .analysis.consensus import (
    consensus,
    consensus_bounds,
    dissension,
    dissension_bounds,
    entropy,
    tastle_consensus,
)
from .analysis.constraint import (
    failure_rate,
    item_pmf_from_tokens,
    nonsubstantive_rate,
    renormalize,
)
from .analysis.construct import (
    comonotone_contrast,
    composite,
    contrast,
    decompose,
    grand_mixture,
    marginal_slice,
    subscale_composites,
    summarize,
    summary_table,
    trend,
)
from .analysis.human import human_composite, human_marginal, human_pmf, human_pmf_from_counts
from .analysis.keying import reflect_reverse_keyed
from .analysis.reliability import reliability
from .analysis.support import item_points, item_support, nominal_items
from .analysis.traces import trace_se
from .core.errors import (
    CollectionError,
    ConfigError,
    DesignError,
    InvalidPMFError,
    XlikertError,
)
from .core.io import open_decomposition, open_results, to_netcdf

#: The namespaces loaded on first use (torch, matplotlib): ``xl.collect``, ``xl.plot``, ...
#: ``xl.sampling`` is the sampling-cost stage, :mod:`xlikert.analysis.cost`.
_NAMESPACES = {
    "analysis": "xlikert.analysis",
    "collect": "xlikert.collect",
    "datasets": "xlikert.datasets",
    "design": "xlikert.design",
    "plot": "xlikert.plot",
    "report": "xlikert.report",
    "sampling": "xlikert.analysis.cost",
}


def __getattr__(name: str) -> Any:
    if name in _NAMESPACES:
        return importlib.import_module(_NAMESPACES[name])
    raise AttributeError(f"module 'xlikert' has no attribute {name!r}")


__all__ = [
    "CollectionError",
    "ConfigError",
    "DesignError",
    "InvalidPMFError",
    "XlikertError",
    "__version__",
    "alignment",
    "comonotone_contrast",
    "composite",
    "consensus",
    "consensus_bounds",
    "contrast",
    "decompose",
    "dissension",
    "dissension_bounds",
    "entropy",
    "failure_rate",
    "grand_mixture",
    "human_composite",
    "human_marginal",
    "human_pmf",
    "human_pmf_from_counts",
    "item_pmf_from_tokens",
    "item_points",
    "item_support",
    "jensen_shannon",
    "marginal_slice",
    "mean_difference",
    "noise_ceiling",
    "nominal_items",
    "nonsubstantive_rate",
    "open_decomposition",
    "open_results",
    "reflect_reverse_keyed",
    "reliability",
    "renormalize",
    "representativeness",
    "silicon_population",
    "subscale_composites",
    "summarize",
    "summary_table",
    "tastle_consensus",
    "to_netcdf",
    "total_variation",
    "trace_se",
    "trend",
    "wasserstein",
]
