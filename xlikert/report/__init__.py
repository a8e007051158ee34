"""The HTML/Markdown report: every table and figure of the paper, for any design.

>>> import xlikert as xl
>>> html = xl.report.write_report("results.nc", "report/")   # doctest: +SKIP

The report follows the pipeline (constraint -> consensus -> construct ->
reliability -> sampling cost). Factor names come from the file (the dims of ``pmf`` other
than ``item`` and ``score``, read with :func:`xlikert.core.dims.factor_dims`, so a
factor with a reserved name is a ``DesignError`` naming it): the first factor
(``by``: the x axis, the facets, the rows of the tables) is the model factor
(:data:`xlikert.core.dims.MODEL_DIM`) where there is one, else the first in dim order;
the second is the next varying factor in dim order.
Sections that need data the file does not hold (a decoding grid, a second
factor, a human baseline for the instrument) say so instead of appearing.

The report follows the instrument (:func:`xlikert.composite`): reverse-keyed
items are reflected and, for an instrument with subscales, every composite,
effect, figure and sampling table is per subscale (small multiples: one figure
per subscale); the design section lists the keyed items and the subscales.
Effects are given as sums (composite-score units) and per item.

The report is written into a temporary folder beside ``out_dir`` and moved
into place when complete, so a report that fails leaves nothing behind (and
an earlier report in ``out_dir`` untouched).

Layout: :data:`SECTIONS` lists the sections in order; each is a function in
:mod:`xlikert.report.sections` that takes the :class:`~.inputs.ReportInputs`
(prepared once: results, factor roles, options, output folder, shared analyses)
and returns its :class:`~.page.Section` (or ``None`` where it does not apply).
To add a section, write the function and add it to :data:`SECTIONS`.
:mod:`xlikert.report.page` assembles ``index.html`` and ``report.md``.

Heavy imports (matplotlib) happen inside the functions. The figures are standalone
:class:`matplotlib.figure.Figure` objects (:func:`xlikert.plot.offscreen`): writing a
report opens no window and leaves the caller's matplotlib backend and figures alone.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pandas as pd
import xarray as xr

from ..plot import offscreen
from . import tables
from .inputs import ReportInputs
from .page import DRAW_FIGURES, Section, write_pages
from .sections import (
    closest_reading_section,
    consensus_section,
    constraint_section,
    construct_section,
    context_section,
    design_section,
    elicitation_section,
    format_section,
    human_alignment_section,
    individual_respondents_section,
    languages_section,
    reasoning_section,
    sampling_cost_section,
    scale_reliability_section,
)

__all__ = ["SECTIONS", "section_names", "tables", "write_report"]


#: The report's sections, in order: each takes the :class:`~.inputs.ReportInputs` and
#: returns its :class:`~.page.Section`, or ``None`` where it does not apply.
SECTIONS: tuple[Callable[[ReportInputs], Section | None], ...] = (
    design_section,
    constraint_section,
    elicitation_section,
    consensus_section,
    construct_section,
    format_section,
    languages_section,
    context_section,
    reasoning_section,
    scale_reliability_section,
    sampling_cost_section,
    human_alignment_section,
    closest_reading_section,
    individual_respondents_section,
)


def section_names() -> dict[str, Callable[[ReportInputs], Section | None]]:
    """Each section of :data:`SECTIONS` by the name ``sections=`` and ``skip=`` take.

    A section's name is its function's name without ``_section``.

    Returns
    -------
    dict
        Name -> section function, in the report's order.

    Examples
    --------
    >>> list(section_names())[:3]
    ['design', 'constraint', 'elicitation']
    """
    return {f.__name__.removesuffix("_section"): f for f in SECTIONS}


def _chosen(
    sections: Sequence[str] | None, skip: Sequence[str]
) -> list[Callable[[ReportInputs], Section | None]]:
    """The sections to write, in the report's order: ``sections`` (None: all) less ``skip``.

    Raises
    ------
    ConfigError
        A name that is no section's, naming it and the valid names.
    """
    from ..core.errors import ConfigError

    named = section_names()
    asked = [*(sections or ()), *skip]
    unknown = [n for n in asked if n not in named]
    if unknown:
        raise ConfigError(
            f"unknown report section(s) {unknown}: the sections are {list(named)} "
            "(sections= / --sections chooses them, skip= / --skip leaves them out)"
        )
    keep = set(named) if sections is None else set(sections)
    return [f for n, f in named.items() if n in keep and n not in set(skip)]


def write_report(
    results: str | Path | xr.Dataset,
    out_dir: str | Path,
    *,
    country_of_origin: Mapping[str, str] | None = None,
    tol: float = 1e-4,
    title: str | None = None,
    human: str | Path | xr.Dataset | None = None,
    respondents: str | Path | pd.DataFrame | None = None,
    persona_results: str | Path | xr.Dataset | None = None,
    persona: Sequence[str] = (),
    figures: bool = True,
    sections: Sequence[str] | None = None,
    skip: Sequence[str] = (),
) -> Path:
    """Write ``index.html``, ``report.md``, ``figures/*.png`` and ``tables/*`` into ``out_dir``.

    Parameters
    ----------
    results : str, pathlib.Path or xarray.Dataset
        A results file (netCDF) or Dataset with ``pmf`` ``(*factors, item,
        score)``; optional ``valid_mass``, ``decoding_pmf``.
    out_dir : str or pathlib.Path
        Output folder (created; an existing one has the entries the report writes
        replaced).
    country_of_origin : mapping of str to str, optional
        Level of the first factor (e.g. model) -> level of the second (e.g.
        target) it originates from; marks in-group cells. Default: a
        ``country_of_origin`` coordinate on the first factor, if any.
    tol : float, default 1e-4
        Certified tolerance of Multivariate Consensus.
    title : str, optional
        Report title (default: the file's ``title`` attribute, else one naming its
        instrument).
    human : str, pathlib.Path or xarray.Dataset, optional
        Human data (a CSV of respondents or a human PMF netCDF/Dataset): adds the
        section "Alignment with human respondents" (:mod:`xlikert.report.sections.alignment`).
    respondents : str, pathlib.Path or pandas.DataFrame, optional
        The respondents' answers, for results with a ``respondent`` factor (one persona
        per respondent): a DataFrame indexed by the ``respondent`` levels with a column per
        item, or a CSV with a ``respondent`` column. Adds the section "Individual
        respondents" (:mod:`xlikert.report.sections.individual`); ignored without a
        ``respondent`` factor.
    persona_results : str, pathlib.Path or xarray.Dataset, optional
        Results of group personas (a file or Dataset): the group-persona baseline of
        that section, read at each respondent's levels of the columns ``persona``.
    persona : sequence of str, optional
        The columns of ``respondents`` naming each respondent's group persona.
    figures : bool, default True
        Draw the figures. ``False`` writes the text and tables only, in a fraction of
        the time (drawing is most of a report's cost): a quick look at a large design.
    sections : sequence of str, optional
        The sections to write, by name (:func:`section_names`: ``design``,
        ``constraint``, ``consensus``, ``construct``, ...), in the report's order;
        default every section that applies.
    skip : sequence of str, optional
        Sections to leave out, by name.

    Returns
    -------
    pathlib.Path
        The path of ``index.html``.

    Raises
    ------
    xlikert.core.errors.InvalidPMFError
        ``results`` hold no ``pmf`` variable.
    xlikert.core.errors.DesignError
        The ``pmf`` has no factor dims, or a factor with a reserved name.
    xlikert.core.errors.ConfigError
        A name in ``sections`` or ``skip`` that is no section's (before anything is read).

    Notes
    -----
    Everything is written into a temporary folder beside ``out_dir`` first and
    moved into ``out_dir`` when the report is complete: a report that fails
    leaves no partial folder (an existing ``out_dir`` keeps its old report).

    Examples
    --------
    >>> import tempfile
    >>> from xlikert.datasets import load_demo_results
    >>> out = Path(tempfile.mkdtemp()) / "report"
    >>> path = write_report(load_demo_results(verbose=False), out)
    >>> path.name, sorted(p.name for p in out.iterdir())
    ('index.html', ['figures', 'index.html', 'report.md', 'tables'])
    >>> import shutil
    >>> shutil.rmtree(out.parent)
    """
    chosen = _chosen(sections, skip)
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        _write_report(
            results, tmp, country_of_origin=country_of_origin, tol=tol, title=title,
            human=human, respondents=respondents, persona_results=persona_results,
            persona=persona, figures=figures, chosen=chosen,
        )  # fmt: skip
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, out)
    return out / "index.html"


def _publish(tmp: Path, out: Path) -> None:
    """Move the finished report in ``tmp`` to ``out`` (replacing the entries it rewrites)."""
    if not out.exists():
        tmp.rename(out)
        return
    for entry in tmp.iterdir():
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        entry.rename(target)
    tmp.rmdir()


def _write_report(
    results: str | Path | xr.Dataset,
    out: Path,
    *,
    country_of_origin: Mapping[str, str] | None,
    tol: float,
    title: str | None,
    human: str | Path | xr.Dataset | None = None,
    respondents: str | Path | pd.DataFrame | None = None,
    persona_results: str | Path | xr.Dataset | None = None,
    persona: Sequence[str] = (),
    figures: bool = True,
    chosen: Sequence[Callable[[ReportInputs], Section | None]] = SECTIONS,
) -> Path:
    """:func:`write_report` into the (temporary) folder ``out``: every section, then the page."""
    inputs = ReportInputs.prepare(
        results, out, country_of_origin=country_of_origin, tol=tol, human=human,
        respondents=respondents, persona_results=persona_results, persona=persona,
    )  # fmt: skip
    drawn = DRAW_FIGURES.set(figures)
    try:
        with offscreen(), _figure_text():  # no window, no backend switched: Figure objects
            sections = [s for s in (section(inputs) for section in chosen) if s is not None]
    finally:
        DRAW_FIGURES.reset(drawn)
    attrs = inputs.ds.attrs
    ttl = title or str(attrs.get("title") or f"xlikert report: {attrs.get('instrument', '')}")
    return write_pages(out, ttl, sections, figures=figures)


@contextlib.contextmanager
def _figure_text() -> Iterator[None]:
    """matplotlib's text settings the figures are drawn with, whatever the caller's: math
    parsed (the axes' own tick labels, ``10⁻¹`` on a log axis, are mathtext) and no LaTeX.
    Labels from the data are escaped by :mod:`xlikert.plot.text` for exactly this: a
    level such as ``$\\x$`` is drawn as it is."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": True, "text.usetex": False}):
        yield
