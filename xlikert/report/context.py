"""What every report section reads: :class:`ReportContext`, prepared once per report.

:meth:`ReportContext.prepare` opens and checks the results and decides the
factor roles (``by``, ``second``) and the in-group map; the analyses that
several sections share (Consensus, the composite, its decomposition and the
summary table of effects) are computed on first use and kept.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd
import xarray as xr

from ..analysis.consensus import consensus
from ..analysis.construct import composite, decompose, summary_table
from ..dims import factor_dims, preferred_factor
from ..errors import DesignError, InvalidPMFError
from ..io import decode_attrs, open_results

__all__ = ["ReportContext"]


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
class ReportContext:
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
        :data:`xlikert.dims.MODEL_DIM` if it is a factor, else the first factor: the x
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

    @classmethod
    def prepare(
        cls,
        results: str | Path | xr.Dataset,
        out: Path,
        *,
        country_of_origin: Mapping[str, str] | None,
        tol: float,
        human: str | Path | xr.Dataset | None = None,
    ) -> ReportContext:
        """Open and check ``results`` (a file or Dataset) and decide the factor roles.

        Raises
        ------
        InvalidPMFError
            The results hold no ``pmf``.
        DesignError
            ``pmf`` has no factor dims (or a factor with a reserved name).
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
        return cls(
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
        )

    @property
    def pmf(self) -> xr.DataArray:
        """The item PMFs ``(*factors, item, score)``."""
        return self.ds["pmf"]

    # the analyses several sections share: computed on first use, then kept
    # (cached_property writes the instance __dict__, which a frozen dataclass allows)
    @cached_property
    def consensus(self) -> xr.DataArray:
        """Multivariate Consensus per condition, certified to ``tol``."""
        return consensus(self.pmf, item_dim="item", tol=self.tol)

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
