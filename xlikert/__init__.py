"""xlikert: exact next-token PMFs of language models on Likert instruments.

The pipeline, one module or package per stage::

    design -> collect -> constraint -> consensus -> construct -> report

(the consensus stage is the module ``xlikert.consensus_layer``: the name
``xlikert.consensus`` is the function; likewise ``xlikert.reliability_layer``
holds ``xl.reliability``, exact α and ω over a population of conditions). Every analysis function takes a PMF
DataArray or a results Dataset first and its dimension arguments by keyword;
the dimension roles are registered in :mod:`xlikert.dims`.

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
from .align import (
    alignment,
    jensen_shannon,
    mean_difference,
    noise_ceiling,
    representativeness,
    silicon_population,
    total_variation,
    wasserstein,
)
from .consensus_layer import consensus, dissension, entropy, tastle_consensus
from .constraint import failure_rate, item_pmf_from_tokens, renormalize
from .construct import (
    comonotone_contrast,
    composite,
    contrast,
    decompose,
    grand_mixture,
    marginal_slice,
    summarize,
    summary_table,
    trend,
)
from .design.scoring import reflect_reverse_keyed, subscale_composites
from .errors import (
    CollectionError,
    ConfigError,
    DesignError,
    InvalidPMFError,
    XlikertError,
)
from .human import human_composite, human_marginal, human_pmf, human_pmf_from_counts
from .io import open_decomposition, open_results, to_netcdf
from .reliability_layer import reliability
from .traces import trace_se

_SUBPACKAGES = {"design", "collect", "report", "sampling", "plot", "datasets"}


def __getattr__(name: str) -> Any:
    # Heavy layers (torch, matplotlib) load on first use: ``xl.collect``, ``xl.plot``.
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
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
    "contrast",
    "decompose",
    "dissension",
    "entropy",
    "failure_rate",
    "grand_mixture",
    "human_composite",
    "human_marginal",
    "human_pmf",
    "human_pmf_from_counts",
    "item_pmf_from_tokens",
    "jensen_shannon",
    "marginal_slice",
    "mean_difference",
    "noise_ceiling",
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
