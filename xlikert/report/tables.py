"""The paper's tables as tidy pandas DataFrames, with CSV / LaTeX / Markdown export.

Every function returns a plain :class:`pandas.DataFrame`; :func:`export`
writes it as ``.csv``, ``.tex`` (``DataFrame.to_latex``) and ``.md`` and
returns the HTML fragment the report embeds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import DesignError

__all__ = [
    "aggregate_vs_factorial",
    "consensus_entropy",
    "export",
    "failure_summary",
    "human_vs_llm",
    "mixture_moments",
    "paper_layout",
    "to_markdown",
]

_SUMMARY_COLS = ["E", "SD", "SNR", "dPD"]


def paper_layout(tidy: pd.DataFrame) -> pd.DataFrame:
    """The paper's effect table: ``Parameter, E, SD, SNR, dPD``, grand mean row first.

    Parameters
    ----------
    tidy
        ``xl.summary_table(dec)`` output (columns ``term``, ``level``, ``E``,
        ``SD``, ``SNR``, ``dPD``; grand-mean row with term ``grand``).

    Examples
    --------
    >>> t = pd.DataFrame({"term": ["grand", "model"], "level": ["", "a"], "E": [60.0, 1.5],
    ...                   "SD": [9.0, 2.0], "SNR": [np.nan, 0.75], "dPD": [np.nan, 0.8]})
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
    cols = ["Parameter", "term", *[c for c in _SUMMARY_COLS if c in df]]
    return df[cols].reset_index(drop=True)


def mixture_moments(mean: xr.DataArray, var: xr.DataArray, dims: Sequence[Hashable]) -> xr.Dataset:
    """Exact mean and variance of the uniform mixture over ``dims`` of per-cell moments.

    ``E = mean(E_c)``, ``Var = mean(Var_c + E_c^2) - E^2`` (law of total variance).

    Examples
    --------
    >>> m = xr.DataArray([0.0, 2.0], dims="a"); v = xr.DataArray([1.0, 1.0], dims="a")
    >>> float(mixture_moments(m, v, ["a"])["var"])
    2.0
    """
    dims = list(dims)
    if not dims:
        return xr.Dataset({"mean": mean, "var": var})
    e = mean.mean(dims)
    v = (var + mean**2).mean(dims) - e**2
    return xr.Dataset({"mean": e, "var": v.clip(min=0.0)})


def human_vs_llm(
    pmf: xr.DataArray,
    baseline: pd.DataFrame,
    by: Hashable = "model",
    condition: Mapping[Hashable, object] | None = None,
) -> pd.DataFrame:
    """Human samples vs each level of ``by`` (composite E and SD) at ``condition``.

    The LLM composite is the uniform mixture over every factor not in
    ``condition`` and not ``by`` (exact moments, :func:`mixture_moments`).

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)``.
    baseline
        :func:`xlikert.data.human_baseline` output.
    by
        Factor whose levels are compared (default ``model``).
    condition
        Selection, e.g. ``{"target": "USA"}`` (the paper's comparison).

    Returns
    -------
    pandas.DataFrame
        Columns ``group`` (Human / LLM), ``label``, ``mean``, ``sd``; LLM rows
        sorted by mean, descending.
    """
    from ..sampling import composite_moments

    sel = pmf.sel(dict(condition)) if condition else pmf
    mom = composite_moments(sel)
    other = [d for d in mom["mean"].dims if d != by]
    mix = mixture_moments(mom["mean"], mom["var"], other)
    llm = pd.DataFrame(
        {
            "group": "LLM",
            "label": [str(v) for v in mix[by].values] if by in mix.dims else ["LLM"],
            "mean": np.atleast_1d(mix["mean"].values),
            "sd": np.sqrt(np.atleast_1d(mix["var"].values)),
        }
    ).sort_values("mean", ascending=False)
    human = pd.DataFrame(
        {
            "group": "Human",
            "label": baseline["sample"],
            "mean": baseline["mean"],
            "sd": baseline["sd"],
        }
    )
    return pd.concat([human, llm], ignore_index=True)


def _origin_of(dec_level: str, origin: Mapping[str, str] | None) -> str | None:
    return None if origin is None else origin.get(str(dec_level))


def aggregate_vs_factorial(
    dec, row: Hashable, col: Hashable, country_of_origin: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Aggregate main effect of ``row`` vs the ``col x row`` interaction (paper table).

    Panel A: the main effect of each level of ``row`` (what an aggregate
    benchmark sees, identical across ``col``). Panel B: the interaction of
    every (row, col) cell; ``reversal`` flags a sign opposite to the row's
    main effect; ``ingroup`` marks cells whose ``col`` level's country of
    origin equals the ``row`` level (when ``country_of_origin`` is given).

    Parameters
    ----------
    dec
        ``xl.decompose`` output (DataTree with children ``row`` and the
        two-factor term).
    row, col
        The two factors, e.g. ``"target"`` and ``"model"``.
    country_of_origin
        ``col`` level -> origin (a level of ``row``), e.g. ``{"Qwen": "China"}``.

    Returns
    -------
    pandas.DataFrame
        Columns ``panel`` (A/B), ``row``, ``col``, ``E``, ``SD``, ``SNR``,
        ``dPD``, ``reversal``, ``ingroup``; named after the factors.
    """
    main = dec[str(row)].dataset
    pair = _pair_node(dec, row, col)
    rows = []
    for lv in main[row].values:
        m = main.sel({row: lv})
        rows.append(
            {
                "panel": "A",
                row: str(lv),
                col: f"— (all {col})",
                **{k: float(m[k]) for k in _SUMMARY_COLS if k in m},
                "reversal": False,
                "ingroup": False,
            }
        )
    for lv in main[row].values:
        e_main = float(main["E"].sel({row: lv}))
        for cl in pair[col].values:
            c = pair.sel({row: lv, col: cl})
            e = float(c["E"])
            origin = _origin_of(cl, country_of_origin)
            label = f"{cl} ({origin})" if origin else str(cl)
            rows.append(
                {
                    "panel": "B",
                    row: str(lv),
                    col: label,
                    **{k: float(c[k]) for k in _SUMMARY_COLS if k in c},
                    "reversal": bool(e * e_main < 0),
                    "ingroup": bool(origin is not None and origin == str(lv)),
                }
            )
    return pd.DataFrame(rows)


def _pair_node(dec, a: Hashable, b: Hashable) -> xr.Dataset:
    for name in (f"{a}:{b}", f"{b}:{a}"):
        if name in dec.children:
            return dec[name].dataset
    raise DesignError(
        f"decomposition has no {a!r} x {b!r} interaction; its terms are {sorted(dec.children)}"
    )


def consensus_entropy(cns: xr.DataArray, ent: xr.DataArray | None = None) -> pd.DataFrame:
    """Consensus (and joint entropy, bits) per condition, one row per condition.

    Examples
    --------
    >>> c = xr.DataArray([0.9, 0.7], dims="model", coords={"model": ["a", "b"]}, name="Cns")
    >>> consensus_entropy(c).columns.tolist()
    ['model', 'Cns']
    """
    data = {"Cns": cns}
    if ent is not None:
        data["Entropy (bits)"] = ent
    ds = xr.Dataset(
        {k: v.drop_vars([c for c in v.coords if c not in v.dims]) for k, v in data.items()}
    )
    df = (
        ds.to_dataframe().reset_index()
        if ds["Cns"].ndim
        else pd.DataFrame({k: [float(v)] for k, v in ds.items()})
    )
    return df


def failure_summary(fr: xr.DataArray, by: Hashable | None) -> pd.DataFrame:
    """Mean, SD and max of the failure rate per level of ``by`` (over conditions and items)."""
    if by is None:
        return pd.DataFrame(
            {"M": [float(fr.mean())], "SD": [float(fr.std())], "max": [float(fr.max())]},
            index=pd.Index(["all"], name="condition"),
        )
    rest = [d for d in fr.dims if d != by]
    return pd.DataFrame(
        {
            "M": fr.mean(rest).to_pandas(),
            "SD": fr.std(rest).to_pandas(),
            "max": fr.max(rest).to_pandas(),
        }
    )


# --------------------------------------------------------------------------- export
def _fmt(v, digits: int) -> str:
    if isinstance(v, bool | np.bool_):
        return "✓" if v else ""
    if isinstance(v, float | np.floating):
        if math.isnan(v):
            return ""
        if v != 0 and (abs(v) < 10 ** (-digits) or abs(v) >= 1e6):
            return f"{v:.2e}"
        return f"{v:.{digits}f}"
    return str(v)


def to_markdown(df: pd.DataFrame, digits: int = 2, index: bool = True) -> str:
    """A GitHub-flavoured Markdown table (no ``tabulate`` needed).

    Examples
    --------
    >>> print(to_markdown(pd.DataFrame({"E": [1.234]}, index=pd.Index(["a"], name="x"))))
    | x | E |
    |---|---|
    | a | 1.23 |
    """
    d = df.reset_index() if index else df
    if index and (df.index.name is None):
        d = d.rename(columns={"index": ""})
    header = "| " + " | ".join(str(c) for c in d.columns) + " |"
    sep = "|" + "|".join("---" for _ in d.columns) + "|"
    body = [
        "| " + " | ".join(_fmt(v, digits) for v in row) + " |" for row in d.itertuples(index=False)
    ]
    return "\n".join([header, sep, *body])


def export(
    df: pd.DataFrame,
    out_dir: str | Path,
    name: str,
    caption: str = "",
    digits: int = 2,
    index: bool = True,
) -> dict[str, str]:
    """Write ``name.csv``, ``name.tex`` and ``name.md`` under ``out_dir``.

    Returns ``{"html": ..., "markdown": ...}`` fragments for the report.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / f"{name}.csv", index=index)
    formatters = {
        c: (lambda v, _d=digits: _fmt(v, _d))
        for c in df.columns
        if pd.api.types.is_float_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c])
    }
    tex = df.to_latex(
        index=index,
        caption=caption or None,
        label=f"tab:{name}",
        formatters=formatters,
        escape=True,
    )
    (out / f"{name}.tex").write_text(tex, encoding="utf-8")
    md = to_markdown(df, digits=digits, index=index)
    (out / f"{name}.md").write_text(md + "\n", encoding="utf-8")
    html = df.to_html(
        index=index, formatters=formatters, na_rep="", classes="tbl", border=0, escape=True
    )
    return {"html": html, "markdown": md}


def pairs(levels: Sequence[str]) -> list[tuple[str, str]]:
    """All unordered pairs of levels in order (the paper's pairwise contrasts)."""
    return list(itertools.combinations(levels, 2))
