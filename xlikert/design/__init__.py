"""Experiment design: instruments, lexicons, framings and fully crossed prompt designs.

The first stage of the pipeline (``design -> collect -> ...``). An instrument
file holds the items, the scale, a lexicon and system-prompt framings; an
experiment file crosses factors (lexicon, framing, free and response-format
factors, plus the models) and :meth:`Experiment.build_prompts` renders every prompt. File
formats: ``xlikert/design/README.md``.

>>> from xlikert.design import load_experiment
>>> exp = load_experiment("demo")
>>> exp.factors
{'target': ['USA', 'China', 'Canada', 'France']}
>>> ds = exp.build_prompts()
>>> ds.user.shape
(4, 17)
"""

from __future__ import annotations

from .experiment import Experiment, Factor
from .formats import BUILTIN_FORMATS, ResponseFormat, builtin_format
from .instrument import Instrument, builtin_instruments, load_instrument
from .items import Item, scale_fields
from .parser import builtin_experiments, experiment_from_dict, load_experiment
from .prompts import prompts_to_frame
from .scale import Option, Scale
from .template import Template

__all__ = [
    "BUILTIN_FORMATS",
    "Experiment",
    "Factor",
    "Instrument",
    "Item",
    "Option",
    "ResponseFormat",
    "Scale",
    "Template",
    "builtin_experiments",
    "builtin_format",
    "builtin_instruments",
    "experiment_from_dict",
    "load_experiment",
    "load_instrument",
    "prompts_to_frame",
    "scale_fields",
]
