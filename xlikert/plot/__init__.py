"""Figures of the paper, from xlikert's results (matplotlib).

Every function takes already computed xarray/pandas objects (so it works on
any design), draws into ``ax`` (or a new figure) and returns the
:class:`matplotlib.figure.Figure`. Factor names come from the data (every dim
that is not a core or auxiliary dim of :mod:`xlikert.core.dims`; a dim with a
reserved name raises a ``DesignError``): where a figure picks its factors
itself, the model factor (:data:`xlikert.core.dims.MODEL_DIM`) comes first where it
exists, then the factors in dim order. Every argument after the data is
keyword-only.
Labels from the data are drawn as text (:mod:`.text`: a ``$`` in a level name is a
dollar sign), while the axes' own tick labels render as mathtext (``10⁻¹``).
Colours are the Okabe-Ito palette (colour-blind safe); continuous maps are
``cividis`` and the diverging ``RdBu_r`` (ColorBrewer, colour-blind safe).

The package mirrors :mod:`xlikert.analysis`: one module per stage it draws.

============================  ==============  ============================================
function                      module          figure
============================  ==============  ============================================
:func:`failure_rate`          ``constraint``  failure rate per (condition, item), by one factor
:func:`consensus`             ``consensus``   Multivariate Consensus per condition, x by hue
:func:`composite_pmfs`        ``construct``   composite PMFs faceted by one factor, another as hue
:func:`effect_distributions`  ``effects``     main-effect PMFs of one factor, with E and SD
:func:`interaction_heatmap`   ``effects``     two-factor interaction E (and SD), in-group cells
:func:`human_vs_llm`          ``human``       human samples vs LLM composites (mean +- SD)
:func:`standard_error`        ``sampling``    SE of the N-sample estimator vs N
:func:`decoding_bias`         ``sampling``    decoding bias vs temperature and vs top-p
:func:`flip_probability`      ``sampling``    sign-flip probability vs exact effect size
:func:`human_pmfs`            ``alignment``   model PMFs over human PMFs, per item and group
:func:`representativeness`    ``alignment``   representativeness with intervals, noise ceiling
:func:`reading_distances`     ``validity``    each elicitation level's distance to the people
============================  ==============  ============================================

:mod:`.canvas` holds the palette and :func:`offscreen`; :mod:`.text` the escaping of labels.

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from xlikert import plot, sampling
>>> from xlikert.datasets import synthetic_pmf
>>> fig = plot.flip_probability(sampling.flip_probability(synthetic_pmf(n_items=3)))
"""

from __future__ import annotations

from .alignment import human_pmfs, representativeness
from .canvas import OKABE_ITO, offscreen
from .consensus import consensus
from .constraint import failure_rate
from .construct import composite_pmfs
from .effects import effect_distributions, interaction_heatmap
from .human import human_vs_llm
from .sampling import decoding_bias, flip_probability, standard_error
from .validity import reading_distances

__all__ = [
    "OKABE_ITO",
    "composite_pmfs",
    "consensus",
    "decoding_bias",
    "effect_distributions",
    "failure_rate",
    "flip_probability",
    "human_pmfs",
    "human_vs_llm",
    "interaction_heatmap",
    "offscreen",
    "reading_distances",
    "representativeness",
    "standard_error",
]
