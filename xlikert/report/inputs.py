"""What every report section reads: :class:`ReportInputs`, prepared once per report.

:meth:`ReportInputs.prepare` opens and checks the results and decides the
factor roles (``by``, ``second``) and the in-group map; the analyses that
several sections share (Consensus, the composite, its decomposition and the
summary table of effects) are computed on first use and kept.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ..analysis.consensus import consensus
from ..analysis.construct import composite, decompose, summary_table
from ..analysis.individual import individual_summary
from ..analysis.support import nominal_items, support_bounds
from ..core.dims import ELICITATION_DIM, factor_dims, preferred_factor
from ..core.errors import ConfigError, DesignError, InputTypeError, InvalidPMFError
from ..core.io import decode_attrs, open_results

__all__ = [
    "RESPONDENT_COLUMN",
    "ReportInputs",
    "answer_tol_note",
    "unanswered_levels",
    "unanswered_note",
]

#: The factor of one persona per respondent, and the column of a CSV of answers that
#: holds its levels.
RESPONDENT_COLUMN = "respondent"


def _load_respondents(respondents: str | Path | pd.DataFrame) -> pd.DataFrame:
    """The respondents' answers: a DataFrame as given, or a CSV read with its
    ``respondent`` column as the index (the levels of the ``respondent`` factor).

    Raises
    ------
    ConfigError
        No such file.
    DesignError
        The CSV has no ``respondent`` column.
    InputTypeError
        Neither a DataFrame nor a path.
    """
    if isinstance(respondents, pd.DataFrame):
        return respondents
    if not isinstance(respondents, (str, Path)):
        raise InputTypeError(
            "respondents must be a DataFrame of answers or the path of a CSV, "
            f"not {type(respondents).__name__}"
        )
    path = Path(respondents)
    if not path.is_file():
        raise ConfigError(f"no such respondents' answers file: {str(path)!r}")
    table = pd.read_csv(path, dtype={RESPONDENT_COLUMN: str})
    if RESPONDENT_COLUMN not in table.columns:
        raise DesignError(
            f"{path.name}: no column {RESPONDENT_COLUMN!r} (the respondent levels); "
            f"columns {list(table.columns)}"
        )
    return table.set_index(RESPONDENT_COLUMN)


def _load_personas(persona_results: str | Path | xr.Dataset) -> xr.Dataset:
    if isinstance(persona_results, xr.Dataset):
        return decode_attrs(persona_results)
    path = Path(persona_results)
    if not path.is_file():
        raise ConfigError(f"no such group persona results file: {str(path)!r}")
    return decode_attrs(open_results(path))


def unanswered_levels(ds: xr.Dataset, source: str = "results") -> dict[str, tuple[int, int]]:
    """The elicitation levels with cells that have no PMF (a greedy reply that writes no
    answer), each with (cells without a PMF, cells).

    The sections that need a PMF in every cell leave these levels out
    (:attr:`ReportInputs.ordered`); :func:`unanswered_note` says so.

    Raises
    ------
    InvalidPMFError
        Every level has such cells: nothing would be left to analyse.
    """
    pmf = ds["pmf"]
    if ELICITATION_DIM not in pmf.dims:
        return {}
    empty = pmf.isnull().all("score")
    out = {}
    for level in pmf[ELICITATION_DIM].values:
        cells = empty.sel({ELICITATION_DIM: level})
        if bool(cells.any()):
            out[str(level)] = (int(cells.sum()), int(cells.size))
    if len(out) == pmf.sizes[ELICITATION_DIM]:
        raise InvalidPMFError(
            f"results {source}: every elicitation level has cells without a PMF ({out}: "
            "cells without a PMF, cells); the report needs one level read in every cell "
            "(first_token is)"
        )
    return out


def unanswered_note(ds: xr.Dataset) -> str | None:
    """The sentence saying which elicitation levels the sections that need a PMF in every
    cell leave out (:func:`unanswered_levels`); ``None`` where none is."""
    levels = unanswered_levels(ds)
    if not levels:
        return None
    parts = [f"`{lv}` ({n} of {m} cells)" for lv, (n, m) in levels.items()]
    return (
        "Left out of the failure rate and of the sections that need a PMF in every cell "
        f"(Consensus, composites, effects, reliability, sampling cost): the level {', '.join(parts)}, whose reply "
        "writes no answer in those cells, so they have no PMF."
    )


def answer_tol_note(ds: xr.Dataset, limit: int = 8) -> str | None:
    """The sentence naming the cells whose word answers the labels' walk did not read to
    ``answer_tol`` within ``answer_max_passes`` (``answer_tol_met`` 0), each with the bound
    it reached and stored (``answer_error``), the widest first; ``None`` where every walked
    cell met it (or none was walked).

    Examples
    --------
    >>> ds = xr.Dataset({"answer_tol_met": ("item", [1, 0, -1]),
    ...                  "answer_error": ("item", [1e-7, 0.02, np.nan])},
    ...                 coords={"item": ["a", "b", "c"]})
    >>> print(answer_tol_note(ds))
    1 of 2 cells read by the labels' walk did not meet answer_tol within answer_max_passes; each stores the certified bound it reached (answer_error, and pmf_lower .. pmf_upper), not a narrower one: item='b' (bound 0.02).
    """
    if "answer_tol_met" not in ds or "answer_error" not in ds:
        return None
    met = ds["answer_tol_met"]
    short = met == 0
    n = int(short.sum())
    if not n:
        return None
    err = ds["answer_error"].where(short).broadcast_like(met)
    flat = err.stack(_cell=list(err.dims)) if err.dims else err.expand_dims("_cell")
    flat = flat[np.isfinite(flat.values)]
    order = np.argsort(-flat.values, kind="stable")[:limit]
    names = []
    for k in order:
        cell = flat.isel(_cell=int(k))
        where = ", ".join(f"{d}={cell[d].item()!r}" for d in err.dims)
        names.append(f"{where} (bound {float(cell):.3g})")
    more = f"; and {n - len(names)} more" if n > len(names) else ""
    return (
        f"{n} of {int((met >= 0).sum())} cells read by the labels' walk did not meet "
        "answer_tol within answer_max_passes; each stores the certified bound it reached "
        "(answer_error, and pmf_lower .. pmf_upper), not a narrower one: "
        + "; ".join(names)
        + more
        + "."
    )


def _origin_map(
    ds: xr.Dataset, by: Hashable, given: Mapping[str, str] | None
) -> dict[str, str] | None:
    if given is not None:
        return {str(k): str(v) for k, v in given.items()}
    coord = "country_of_origin"
    if by is not None and coord in ds.coords and ds[coord].dims == (by,):
        return {str(k): str(v) for k, v in zip(ds[by].values, ds[coord].values, strict=True)}
    return None


@dataclass(frozen=True, eq=False)
class ReportInputs:
    """The prepared input of every section: results, factor roles, options, output folder.

    Attributes
    ----------
    ds
        The results, attrs decoded.
    source
        How the report names the results (the path, or ``"(in-memory Dataset)"``).
    out
        The folder the report is written into (``tables/``, ``figures/``).
    factors, varying, constant
        The factor dims of ``pmf``; those with at least two levels; those with one.
    by
        :data:`xlikert.core.dims.MODEL_DIM` if it is a factor, else the first factor: the x
        axis, the facet, the rows of the tables.
    second
        The first varying factor after ``by`` in dim order (``None`` without): the
        colour, the interaction and the contrasts.
    origin
        Level of ``by`` -> level of ``second`` it originates from (in-group cells).
    tol
        Certified tolerance of Multivariate Consensus.
    human
        Human data for the section "Alignment with human respondents" (or ``None``).
    respondents
        The respondents' answers (a DataFrame indexed by the ``respondent`` levels, or
        a CSV with a ``respondent`` column) for the section "Individual respondents".
    persona_results, persona
        Results of group personas and the columns of ``respondents`` that give each
        respondent's group persona: the group-persona baseline of that section.
    """

    ds: xr.Dataset
    source: str
    out: Path
    factors: tuple[Hashable, ...]
    varying: tuple[Hashable, ...]
    constant: tuple[Hashable, ...]
    by: Hashable
    second: Hashable | None
    origin: dict[str, str] | None
    tol: float
    human: str | Path | xr.Dataset | None = None
    respondents: pd.DataFrame | None = None
    persona_results: xr.Dataset | None = None
    persona: tuple[str, ...] = ()

    @classmethod
    def prepare(
        cls,
        results: str | Path | xr.Dataset,
        out: Path,
        *,
        country_of_origin: Mapping[str, str] | None,
        tol: float,
        human: str | Path | xr.Dataset | None = None,
        respondents: str | Path | pd.DataFrame | None = None,
        persona_results: str | Path | xr.Dataset | None = None,
        persona: Sequence[str] = (),
    ) -> ReportInputs:
        """Open and check ``results`` (a file or Dataset) and decide the factor roles.

        Raises
        ------
        InvalidPMFError
            The results hold no ``pmf``.
        DesignError
            ``pmf`` has no factor dims (or a factor with a reserved name); the
            respondents' answers do not fit the results (an answer outside its item's
            scale, a respondent without a row: :func:`xlikert.individual_summary`).
        """
        source = str(results) if not isinstance(results, xr.Dataset) else "(in-memory Dataset)"
        # a Dataset opened with plain xarray still has its JSON attrs encoded
        ds = decode_attrs(results if isinstance(results, xr.Dataset) else open_results(results))
        if "pmf" not in ds:
            raise InvalidPMFError(f"results {source} hold no 'pmf' variable; variables: {list(ds)}")
        pmf = ds["pmf"]
        factors = factor_dims(pmf, what=f"the pmf of {source}")
        if not factors:
            raise DesignError(f"results {source} have no factor dims: pmf dims are {pmf.dims}")
        # a factor with one level is held constant: no effect, contrast or flip to report
        varying = [f for f in factors if pmf.sizes[f] >= 2]
        by = preferred_factor(factors)
        second = preferred_factor(varying, exclude=[by])
        inputs = cls(
            ds=ds,
            source=source,
            out=out,
            factors=tuple(factors),
            varying=tuple(varying),
            constant=tuple(f for f in factors if f not in varying),
            by=by,
            second=second,
            origin=_origin_map(ds, by, country_of_origin),
            tol=tol,
            human=human,
            respondents=None if respondents is None else _load_respondents(respondents),
            persona_results=(None if persona_results is None else _load_personas(persona_results)),
            persona=(persona,) if isinstance(persona, str) else tuple(persona),
        )
        _ = inputs.individual  # the answers checked before any section runs
        return inputs

    @cached_property
    def individual(self) -> xr.Dataset | None:
        """The individual scores summarised per item with skill scores
        (:func:`xlikert.analysis.individual.individual_summary`); ``None`` without a
        ``respondent`` factor or without the respondents' answers."""
        if RESPONDENT_COLUMN not in self.factors or self.respondents is None:
            return None
        return individual_summary(
            self.ds, self.respondents, persona_results=self.persona_results,
            persona=list(self.persona),
        )  # fmt: skip

    @property
    def all_pmf(self) -> xr.DataArray:
        """Every item's PMFs ``(*factors, item, score)``, nominal items included."""
        return self.ds["pmf"]

    @cached_property
    def ordered(self) -> xr.Dataset:
        """The results of the items with ordered options, at the elicitation levels whose
        every cell has a PMF: what the sections that need an order and a PMF in every cell
        (Consensus, composites, effects, reliability, cost) analyse."""
        ds = self.answered
        if not self.nominal:
            return ds
        keep = ~np.asarray(ds["pmf"]["nominal"].values, dtype=bool)
        return ds.isel(item=np.flatnonzero(keep))

    @cached_property
    def answered(self) -> xr.Dataset:
        """The results at the elicitation levels whose every cell has a PMF (all of them
        without the factor): :attr:`unanswered_levels` left out."""
        if not self.unanswered_levels:
            return self.ds
        keep = [v for v in self.ds[ELICITATION_DIM].values if str(v) not in self.unanswered_levels]
        return self.ds.sel({ELICITATION_DIM: keep})

    @cached_property
    def unanswered_levels(self) -> dict[str, tuple[int, int]]:
        """The elicitation levels left out of :attr:`ordered` (:func:`unanswered_levels`)."""
        return unanswered_levels(self.ds, self.source)

    @property
    def pmf(self) -> xr.DataArray:
        """The PMFs of the items with ordered options ``(*factors, item, score)``
        (:attr:`ordered`)."""
        return self.ordered["pmf"]

    @cached_property
    def nominal(self) -> list[str]:
        """The nominal items (options without an order), left out where an order is needed."""
        return nominal_items(self.ds["pmf"])

    def nominal_note(self, what: str) -> str:
        """The sentence a section writes where it leaves the nominal items out."""
        return (
            f"Nominal items {', '.join(self.nominal)} are left out of {what}: their options "
            "have no order, so it is not defined for them."
        )

    @cached_property
    def consensus_items(self) -> list[str]:
        """The items of Multivariate Consensus: all ordered items on one scale, else the
        largest group of items sharing a scale (it has one ``d_max``)."""
        pmf = self.pmf
        ids = [str(i) for i in pmf["item"].values]
        lo, hi = (np.broadcast_to(b.values, len(ids)) for b in support_bounds(pmf))
        spans = [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)]
        best = max(dict.fromkeys(spans), key=spans.count)
        return [i for i, span in zip(ids, spans, strict=True) if span == best]

    @property
    def consensus_note(self) -> str | None:
        """Which items Multivariate Consensus is over, when not all of them."""
        left = [str(i) for i in self.pmf["item"].values if str(i) not in self.consensus_items]
        if not left:
            return None
        sel = self.consensus_pmf
        lo, hi = (int(np.atleast_1d(b.values)[0]) for b in support_bounds(sel))
        return (
            f"Multivariate Consensus needs one scale: it is over the items on {lo}..{hi} "
            f"({', '.join(self.consensus_items)}); items {', '.join(left)} have scales of "
            "their own (their Tastle Consensus is per item)."
        )

    @cached_property
    def no_composite(self) -> str | None:
        """Why the instrument defines no composite (``None``: it does).

        A composite is the sum of items that measure one thing: items with subscales (each
        subscale its own composite), or at least two ordered items on one scale (each
        item with its keying, reverse-keyed items reflected). Items on scales of their own
        without subscales, or a single item, are standalone questions: the composite, its
        distributional ANOVA, its reliability and its sampling cost are not defined for
        them, and the per-item sections stand alone.

        Examples
        --------
        >>> from xlikert.datasets import synthetic_results
        >>> ds = synthetic_results({"m": ("USA", 1.0)}, n_items=1)
        >>> ReportInputs.prepare(ds, Path("."), country_of_origin=None, tol=1e-4).no_composite
        'a single item (1): a composite needs at least two items on one scale, or subscales'
        """
        pmf = self.pmf
        ids = [str(i) for i in pmf["item"].values]
        if "subscale" in pmf.coords and any(str(x) for x in np.atleast_1d(pmf["subscale"].values)):
            return None
        if len(ids) < 2:
            return (
                f"a single item ({', '.join(ids)}): a composite needs at least two items on "
                "one scale, or subscales"
            )
        lo, hi = (np.broadcast_to(b.values, len(ids)) for b in support_bounds(pmf))
        spans = {(int(a), int(b)) for a, b in zip(lo, hi, strict=True)}
        if len(spans) == 1:
            return None
        said = ", ".join(f"{i} {int(a)}..{int(b)}" for i, a, b in zip(ids, lo, hi, strict=True))
        return (
            f"the items are on scales of their own ({said}) and carry no subscales: the "
            "instrument defines no composite"
        )

    # the analyses several sections share: computed on first use, then kept
    # (cached_property writes the instance __dict__, which a frozen dataclass allows)
    @cached_property
    def consensus(self) -> xr.DataArray:
        """Multivariate Consensus per condition, certified to ``tol``."""
        return consensus(self.consensus_pmf, item_dim="item", tol=self.tol)

    @property
    def consensus_pmf(self) -> xr.DataArray:
        """The PMFs of the items of Multivariate Consensus (:attr:`consensus_items`)."""
        ids = np.asarray(self.pmf["item"].values).astype(str)
        if len(self.consensus_items) == ids.size:
            return self.pmf  # as it is: a copy could change the last bit of a sum
        return self.pmf.isel(item=np.flatnonzero(np.isin(ids, self.consensus_items)))

    @cached_property
    def composite(self) -> xr.DataArray:
        """The composite-score PMFs (per subscale where the instrument has subscales)."""
        return composite(self.pmf)

    @cached_property
    def decomposition(self) -> xr.DataTree:
        """The distributional ANOVA of the composite (:func:`xlikert.decompose`)."""
        return decompose(self.pmf)

    @cached_property
    def effects(self) -> pd.DataFrame:
        """Grand mean, main effects and interactions: sums and per item (``scoring="both"``)."""
        return summary_table(self.decomposition, scoring="both")
