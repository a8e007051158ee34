"""The human data of the report (``--human FILE``), read once for the sections that set
the results against people ("Alignment with human respondents", "Which reading is closest
to people").

The human data are a netCDF human PMF Dataset (:func:`xlikert.human_pmf` written
with ``to_netcdf``) or a CSV of respondents, one row per respondent: the columns
named like the results' items are the answers, the columns named like a factor
of the results (the persona factors, e.g. ``party``, ``education``) are group
attributes, a column ``weight`` holds survey weights; other columns are ignored
(the sections say which).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

from ...analysis.human import human_pmf
from ...core.errors import ConfigError, DesignError
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["WEIGHT_COLUMN", "load_human"]


#: The column of survey weights in a CSV of respondents.
WEIGHT_COLUMN = "weight"


def load_human(path: str | Path | xr.Dataset, pmf: xr.DataArray) -> tuple[xr.Dataset, str]:
    """The human PMF Dataset for the results' ``pmf`` and a sentence on how it was read
    (Markdown: the file name, items, groups and columns escaped)."""
    if isinstance(path, xr.Dataset):
        return path, "a human PMF Dataset"
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such human data file: {str(path)!r}")
    if path.suffix.lower() in (".nc", ".nc4", ".netcdf"):
        with xr.open_dataset(path) as ds:
            return ds.load(), f"the human PMF file {md_code(path.name)}"
    table = pd.read_csv(path)
    items = [str(i) for i in pmf["item"].values if str(i) in table.columns]
    if not items:
        raise DesignError(
            f"{path.name}: no column is an item of the results (items "
            f"{[str(i) for i in pmf['item'].values]}; columns {list(table.columns)})"
        )
    groups = [c for c in table.columns if c in pmf.dims and c not in ("item", "score")]
    weights = WEIGHT_COLUMN if WEIGHT_COLUMN in table.columns else None
    for g in groups:  # the group levels in the results' order
        table[g] = pd.Categorical(table[g].astype(str), categories=list(map(str, pmf[g].values)))
    scores = pmf["score"].values
    scale: Any = (int(scores[0]), int(scores[-1]))
    if "score_min" in pmf.coords:  # each item its own scale, as in the results
        lo, hi = (pmf.sel(item=items)[c].values for c in ("score_min", "score_max"))
        scale = {i: (int(a), int(b)) for i, a, b in zip(items, lo, hi, strict=True)}
    human = human_pmf(table, items, scale=scale, by=groups, weights=weights)
    human = human.reindex(score=scores, fill_value=0.0)  # on the results' whole axis
    ignored = [c for c in table.columns if c not in {*items, *groups, WEIGHT_COLUMN}]
    how = (
        f"the respondents in {md_code(path.name)} ({len(table)} rows; items {md(items)}; "
        f"groups {md(groups or 'none')}"
        f"{f'; weighted by column {md_code(WEIGHT_COLUMN)}' if weights else ''}"
        f"{f'; columns ignored: {md(ignored)}' if ignored else ''})"
    )
    return human, how
