"""The public API of ``import xlikert as xl``, listed once.

:data:`API` is the one list: its sections, in the order of the pipeline, hold every
name of ``xl.*``, and each entry says whether the ``.likert`` accessor has it as a
method. Everything else is derived from it:

* ``xl.__all__`` and the names bound in :mod:`xlikert` (:func:`exports`);
* the accessor's methods (:mod:`xlikert.accessor`), each built from its function by
  :func:`accessor_method`: the function's own signature less the PMF argument, and its
  docstring, so ``help(da.likert.decompose)`` shows :func:`xlikert.decompose`'s;
* the API reference page (``docs/api.rst``), written by the docs extension
  (``docs/_ext/xlikert_docs.py``) from :data:`API` at every build;
* the tests' name lists (``tests/test_architecture.py``, ``tests/test_api.py``);
* the type stub ``xlikert/__init__.pyi`` that type checkers and editors read (the names
  are bound from the list at run time, which they cannot follow): :func:`write_stub`
  writes it from :func:`stub`, and ``tests/test_api.py`` checks it is current.

To add an analysis function: write it in its stage's module under
:mod:`xlikert.analysis`, then add one :class:`Entry` to its section below.

Examples
--------
>>> from xlikert import api
>>> "decompose" in api.public_names()
True
>>> sorted(api.accessor_methods("Dataset"))[:3]
['alignment', 'composite', 'consensus']
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .analysis import (
    alignment,
    consensus,
    constraint,
    construct,
    elicitation,
    human,
    keying,
    reliability,
    support,
    traces,
    validity,
)
from .core import errors, io

__all__ = [
    "API",
    "NAMESPACES",
    "Entry",
    "Heading",
    "accessor_method",
    "accessor_methods",
    "exports",
    "public_names",
    "stub",
    "write_stub",
]

#: Which objects have an entry as a ``.likert`` method: both (a PMF DataArray and a
#: results Dataset), a Dataset only (what reads a Dataset's other variables), or none.
On = Literal["both", "Dataset", None]


@dataclass(frozen=True)
class Entry:
    """One public name: the object ``xl.<name>`` is, and where the accessor has it.

    Parameters
    ----------
    obj : callable or type
        The function (or error class) exported as ``xl.<obj.__name__>``.
    accessor : {"both", "Dataset", None}
        ``"both"``: ``da.likert.<name>`` and ``ds.likert.<name>``; ``"Dataset"``:
        ``ds.likert.<name>`` only; ``None``: no method.
    """

    obj: Any
    accessor: On = None

    @property
    def name(self) -> str:
        """The public name: the object's own ``__name__``."""
        return self.obj.__name__


@dataclass(frozen=True)
class Heading:
    """A heading of the API reference and the public names under it.

    Parameters
    ----------
    title : str
        The heading.
    entries : tuple of Entry
        The ``xl.*`` names, in the order the reference lists them.
    also : tuple of str
        Further names the reference documents under this heading, dotted from
        :mod:`xlikert` (``"core.io.read_attrs"``): public in their modules, not in ``xl.*``.
    text : str
        A paragraph under the heading (reST).
    """

    title: str
    entries: tuple[Entry, ...]
    also: tuple[str, ...] = ()
    text: str = ""


BOTH: On = "both"
DATASET: On = "Dataset"

#: The public API: every name of ``xl.*`` (less ``__version__``), by section.
API: tuple[Heading, ...] = (
    Heading(
        "Results files",
        (Entry(io.open_results), Entry(io.open_decomposition), Entry(io.to_netcdf, BOTH)),
        also=(
            "core.io.read_attrs",
            "core.io.encode_attrs",
            "core.io.decode_attrs",
            "core.io.atomic_write",
        ),
    ),
    Heading(
        "Constraint: the failure rate",
        (
            Entry(constraint.failure_rate, DATASET),
            Entry(constraint.nonsubstantive_rate),
            Entry(constraint.renormalize),
            Entry(constraint.item_pmf_from_tokens),
        ),
    ),
    Heading(
        "Elicitation: what the model would write",
        (Entry(elicitation.elicitation_validity, DATASET),),
    ),
    Heading(
        "Each item's own options",
        (Entry(support.item_support), Entry(support.item_points), Entry(support.nominal_items)),
        also=("analysis.support.support_bounds", "analysis.support.require_ordinal"),
    ),
    Heading(
        "Consensus",
        (
            Entry(consensus.consensus, BOTH),
            Entry(consensus.consensus_bounds, BOTH),
            Entry(consensus.dissension, BOTH),
            Entry(consensus.dissension_bounds, BOTH),
            Entry(consensus.tastle_consensus, BOTH),
            Entry(consensus.entropy, BOTH),
        ),
    ),
    Heading(
        "Construct: composites and the distributional ANOVA",
        (
            Entry(construct.composite, BOTH),
            Entry(construct.subscale_composites),
            Entry(keying.reflect_reverse_keyed),
            Entry(construct.grand_mixture, BOTH),
            Entry(construct.marginal_slice, BOTH),
            Entry(construct.comonotone_contrast),
            Entry(construct.contrast, BOTH),
            Entry(construct.decompose, BOTH),
            Entry(construct.trend, BOTH),
            Entry(construct.summarize, BOTH),
            Entry(construct.summary_table),
        ),
    ),
    Heading("Reliability", (Entry(reliability.reliability, BOTH),)),
    Heading(
        "Humans and alignment",
        (
            Entry(human.human_pmf),
            Entry(human.human_pmf_from_counts),
            Entry(human.human_composite),
            Entry(human.human_marginal, DATASET),
            Entry(alignment.silicon_population, BOTH),
            Entry(alignment.alignment, BOTH),
            Entry(alignment.wasserstein, BOTH),
            Entry(alignment.representativeness, BOTH),
            Entry(alignment.total_variation, BOTH),
            Entry(alignment.jensen_shannon, BOTH),
            Entry(alignment.mean_difference, BOTH),
            Entry(alignment.noise_ceiling, DATASET),
            Entry(validity.validity, BOTH),
        ),
        also=("analysis.nonsubstantive.nonsubstantive_alignment",),
    ),
    Heading(
        "Individual respondents",
        (),
        also=(
            "design.respondents.respondent_personas",
            "design.respondents.RespondentPersonas",
            "analysis.individual.individual_scores",
            "analysis.individual.individual_summary",
            "analysis.individual.answer_distribution",
            "analysis.individual.respondent_answers",
            "analysis.ppi.prediction_powered",
            "analysis.ppi.ppi_mean_numpy",
        ),
        text=(
            "Personas from a respondent table, each person's answer scored against the "
            "model's exact PMF, and population estimates that combine people and predictions."
        ),
    ),
    Heading("Reasoning models", (Entry(traces.trace_se),)),
    Heading(
        "Errors",
        (
            Entry(errors.XlikertError),
            Entry(errors.ConfigError),
            Entry(errors.DesignError),
            Entry(errors.InvalidPMFError),
            Entry(errors.CollectionError),
        ),
        also=(
            "core.errors.AnswerLabelError",
            "core.errors.CodecError",
            "core.errors.ElicitationLevelError",
            "core.errors.FormatError",
            "core.errors.FormatNotShownError",
            "core.errors.InputTypeError",
            "core.errors.InternalError",
            "core.errors.LabelMappingError",
            "core.errors.NominalItemError",
            "core.errors.TemplateSyntaxError",
            "core.errors.UnknownNameError",
        ),
        text=(
            "Every error xlikert raises on bad input is a subclass of :class:`XlikertError` "
            "(itself a :class:`ValueError`) and names what is wrong and where."
        ),
    ),
)

#: The namespaces under ``xl.`` loaded on first use (torch, matplotlib): name -> module.
NAMESPACES: dict[str, str] = {
    "analysis": "xlikert.analysis",
    "collect": "xlikert.collect",
    "datasets": "xlikert.datasets",
    "design": "xlikert.design",
    "plot": "xlikert.plot",
    "report": "xlikert.report",
    "sampling": "xlikert.analysis.sampling",
}


def exports() -> dict[str, Any]:
    """Every public name of ``xl.*`` (less ``__version__``) and its object, from :data:`API`.

    Returns
    -------
    dict
        ``name -> object``, in the order of :data:`API`.

    Raises
    ------
    ValueError
        Where two entries have one name (never, while :data:`API` is well formed).

    Examples
    --------
    >>> from xlikert import api
    >>> api.exports()["composite"].__module__
    'xlikert.analysis.construct.composite'
    """
    out: dict[str, Any] = {}
    for section in API:
        for entry in section.entries:
            if entry.name in out:
                raise ValueError(f"{entry.name!r} is listed twice in xlikert.api.API")
            out[entry.name] = entry.obj
    return out


def public_names() -> list[str]:
    """``xl.__all__``: the names of :data:`API` and ``__version__``, sorted.

    Returns
    -------
    list of str
        The sorted names.

    Examples
    --------
    >>> from xlikert import api
    >>> api.public_names()[:2]
    ['CollectionError', 'ConfigError']
    """
    return sorted([*exports(), "__version__"])


def accessor_methods(owner: Literal["DataArray", "Dataset"]) -> dict[str, Callable[..., Any]]:
    """The functions the ``.likert`` accessor of a DataArray or a Dataset has as methods.

    Parameters
    ----------
    owner : {"DataArray", "Dataset"}
        Whose accessor.

    Returns
    -------
    dict
        ``method name -> function``, in the order of :data:`API`.

    Raises
    ------
    ValueError
        Where ``owner`` is neither ``"DataArray"`` nor ``"Dataset"``.

    Examples
    --------
    >>> from xlikert import api
    >>> sorted(set(api.accessor_methods("Dataset")) - set(api.accessor_methods("DataArray")))
    ['elicitation_validity', 'failure_rate', 'human_marginal', 'noise_ceiling']
    """
    if owner not in ("DataArray", "Dataset"):
        raise ValueError(f"owner must be 'DataArray' or 'Dataset', not {owner!r}")
    kinds = {"both"} | ({"Dataset"} if owner == "Dataset" else set())
    return {e.name: e.obj for s in API for e in s.entries if e.accessor in kinds}


def accessor_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``.likert`` method of ``fn``: ``obj.likert.f(*a, **k)`` is ``f(obj, *a, **k)``.

    The method has the function's docstring, name and signature less its first (PMF)
    argument: ``inspect.signature`` and ``help`` show what the function takes.

    Parameters
    ----------
    fn : callable
        A public function whose first argument is the PMF (or results Dataset).

    Returns
    -------
    callable
        The method, for the accessor's class.

    Raises
    ------
    TypeError
        Where ``fn`` takes no argument (no PMF to pass).

    Examples
    --------
    >>> import inspect, xlikert as xl
    >>> from xlikert import api
    >>> str(inspect.signature(api.accessor_method(xl.entropy)))
    "(self, /, *, item_dim: 'Hashable | None' = 'item', score_dim: 'Hashable' = 'score') -> 'xr.DataArray'"
    """
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    if not params:
        raise TypeError(f"{fn.__name__} takes no argument: it cannot be an accessor method")

    @functools.wraps(fn)
    def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        return fn(self._obj, *args, **kwargs)

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(parameters=[self_param, *params[1:]])  # type: ignore[attr-defined]
    return method


def stub() -> str:
    """The text of ``xlikert/__init__.pyi``: every name of ``xl.*`` and namespace, typed.

    Returns
    -------
    str
        The stub, one import per public name from the module that defines it.

    Raises
    ------
    ValueError
        Where two entries have one name (:func:`exports`).

    Examples
    --------
    >>> from xlikert import api
    >>> "from xlikert.analysis.construct.effects import decompose as decompose" in api.stub()
    True
    """
    lines = [
        '"""The names of ``import xlikert as xl``, for type checkers and editors.',
        "",
        "Generated from the one list of the public API, :data:`xlikert.api.API`, by",
        '``python -c "from xlikert import api; api.write_stub()"``; do not edit.',
        '"""',
        "",
    ]
    imports = {("xlikert", "accessor", "accessor"), ("xlikert", "api", "api")}
    imports.add(("xlikert._version", "__version__", "__version__"))
    for name, module in NAMESPACES.items():
        parent, _, last = module.rpartition(".")
        imports.add((parent, last, name))
    imports |= {(obj.__module__, name, name) for name, obj in exports().items()}
    lines += [f"from {m} import {n} as {a}" for m, n, a in sorted(imports)]
    lines += ["", "__all__ = ["]
    lines += [f'    "{name}",' for name in public_names()]
    lines += ["]", ""]
    return "\n".join(lines)


def write_stub() -> bool:
    """Write :func:`stub` to ``xlikert/__init__.pyi`` where it differs.

    Returns
    -------
    bool
        True where the file was written.

    Raises
    ------
    OSError
        Where the file cannot be written.

    Examples
    --------
    >>> from xlikert import api
    >>> api.write_stub()  # doctest: +SKIP
    False
    """
    from pathlib import Path

    target = Path(__file__).with_name("__init__.pyi")
    text = stub()
    if target.is_file() and target.read_text("utf-8") == text:
        return False
    target.write_text(text, "utf-8")
    return True
