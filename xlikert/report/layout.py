"""Tables laid out as the paper prints them, from the analysis stages' tidy tables.

The analysis stages return tidy :class:`pandas.DataFrame` objects (one row per term and
level, plain column names); how the report shows them (row labels, row order) is
decided here: :func:`paper_layout` -- the paper's effect table made of
:func:`xlikert.summary_table`.
"""

from __future__ import annotations

import pandas as pd

from ..analysis.construct.tables import SUMMARY_COLUMNS

__all__ = ["paper_layout"]

#: Mean-item columns of ``xl.summary_table(dec, scoring="both")``.
_PER_ITEM_COLUMNS = ["E_item", "SD_item"]


def paper_layout(tidy: pd.DataFrame) -> pd.DataFrame:
    """The paper's effect table: ``Parameter, E, SD, SNR, dPD``, grand mean row first.

    Parameters
    ----------
    tidy
        ``xl.summary_table(dec)`` output (columns ``term``, ``level``, ``E``,
        ``SD``, ``SNR``, ``dPD``; grand-mean row with term ``grand``). The
        per-item columns ``E_item``, ``SD_item`` are kept, and a ``subscale``
        column comes first, one block of rows per subscale.

    Examples
    --------
    >>> t = pd.DataFrame({"term": ["grand", "model"], "level": ["", "a"], "E": [60.0, 1.5],
    ...                   "SD": [9.0, 2.0], "SNR": [float("nan"), 0.75], "dPD": [float("nan"), 0.8]})
    >>> paper_layout(t)["Parameter"].tolist()
    ['μ∅ (grand mean)', 'a']
    """
    df = tidy.copy()
    is_grand = df["term"].astype(str).isin(["grand", "", "∅", "mu"])
    labels = []
    for term, level, g in zip(df["term"], df["level"], is_grand, strict=True):
        if g:
            labels.append("μ∅ (grand mean)")
        elif isinstance(level, tuple):
            labels.append(" × ".join(map(str, level)))
        else:
            labels.append(str(level).replace(":", " × ") if ":" in str(term) else str(level))
    df.insert(0, "Parameter", labels)
    df = pd.concat([df[is_grand], df[~is_grand]])
    cols = ["Parameter", "term", *[c for c in [*SUMMARY_COLUMNS, *_PER_ITEM_COLUMNS] if c in df]]
    if "subscale" in df:  # one block per subscale, in order of first appearance
        df = pd.concat([df[df["subscale"] == name] for name in df["subscale"].unique()])
        cols.insert(0, "subscale")
    return df[cols].reset_index(drop=True)
