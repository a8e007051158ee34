"""The paper's tables as tidy pandas DataFrames, with CSV / LaTeX / Markdown export.

Every function returns a plain :class:`pandas.DataFrame`; :func:`export`
writes it as ``.csv``, ``.tex`` (:func:`to_latex`, pdfLaTeX-safe) and ``.md``
(:func:`to_markdown`) and returns the HTML fragment the report embeds.
"""

from __future__ import annotations

import html as _html
import itertools
import math
import re
import unicodedata
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
    "interaction_node",
    "latex_escape",
    "markdown_code",
    "markdown_escape",
    "mixture_moments",
    "paper_layout",
    "to_html",
    "to_latex",
    "to_markdown",
]

_SUMMARY_COLS = ["E", "SD", "SNR", "dPD"]
#: Mean-item columns of ``xl.summary_table(dec, scoring="both")``.
_PER_ITEM_COLS = ["E_item", "SD_item"]


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
    cols = ["Parameter", "term", *[c for c in [*_SUMMARY_COLS, *_PER_ITEM_COLS] if c in df]]
    if "subscale" in df:  # one block per subscale, in order of first appearance
        df = pd.concat([df[df["subscale"] == name] for name in df["subscale"].unique()])
        cols.insert(0, "subscale")
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
        :func:`xlikert.datasets.human_baseline` output.
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
    from ..analysis.cost import composite_moments

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
    pair = interaction_node(dec, row, col)
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


def interaction_node(dec: xr.DataTree, a: Hashable, b: Hashable) -> xr.Dataset:
    """The ``a`` x ``b`` interaction of a decomposition, whichever order its name has.

    Raises
    ------
    DesignError
        The decomposition has no such interaction (its terms are named).
    """
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
def _is_missing(v) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float | np.floating) and math.isnan(v)


def _fmt(v, digits: int) -> str:
    """One cell as text: ``digits`` decimals, booleans as a check mark, missing as ``""``."""
    if _is_missing(v):
        return ""
    if isinstance(v, bool | np.bool_):
        return "✓" if v else ""
    if isinstance(v, float | np.floating):
        if v != 0 and (abs(v) < 10 ** (-digits) or abs(v) >= 1e6):
            return f"{v:.2e}"
        return f"{v:.{digits}f}"
    return str(v)


def _layout(df: pd.DataFrame, index: bool) -> tuple[list[str], list[list], list[str]]:
    """Header, rows and per-column kind (``num``, ``bool``, ``text``), index levels first.

    Index levels become ordinary leading columns (their names as headers), so every
    format gets a single header row; MultiIndex column labels are joined by spaces.
    """

    def kind(values) -> str:
        if pd.api.types.is_bool_dtype(values):
            return "bool"
        return "num" if pd.api.types.is_numeric_dtype(values) else "text"

    def label(c) -> str:
        if isinstance(c, tuple):
            return " ".join(str(x) for x in c if not _is_missing(x) and str(x) != "")
        return "" if _is_missing(c) else str(c)

    header = [label(c) for c in df.columns]
    kinds = [kind(df.iloc[:, j]) for j in range(df.shape[1])]
    cols = [df.iloc[:, j].tolist() for j in range(df.shape[1])]
    if index:
        levels = [df.index.get_level_values(i) for i in range(df.index.nlevels)]
        header = [label(n) for n in df.index.names] + header
        kinds = [kind(lv) for lv in levels] + kinds
        cols = [lv.tolist() for lv in levels] + cols
    rows = [list(r) for r in zip(*cols, strict=True)] if cols else []
    return header, rows, kinds


#: The characters that are Markdown markup in running text or a table cell (CommonMark and
#: GitHub: emphasis, code, links and images, raw HTML, entities, headings, tables, strike-
#: through, math); each is escaped with a backslash, which CommonMark allows before any
#: ASCII punctuation.
MARKDOWN_SPECIAL = frozenset("\\`*_{}[]<>#!|&~$^")


def _one_line(text: str) -> str:
    """``text`` on one line: every run of whitespace that holds a line break, and every
    other control character, becomes one space (a line break would end a table row, a
    paragraph or a LaTeX cell)."""
    text = re.sub(r"\s*[\n\r\f\v\u2028\u2029]\s*", " ", str(text))
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)


def markdown_escape(text: str) -> str:
    r"""Plain text as Markdown that shows it literally: markup escaped, on one line.

    Examples
    --------
    >>> print(markdown_escape("<script>*a*_b_ | `c` $x$ & [l](u) #1\nnext"))
    \<script\>\*a\*\_b\_ \| \`c\` \$x\$ \& \[l\](u) \#1 next
    """
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in _one_line(text))


def markdown_code(text: str) -> str:
    """Plain text as a Markdown code span that shows it literally (backticks included).

    CommonMark does not read escapes inside a code span, so the fence is one backtick
    more than the longest run of backticks in ``text`` (and padded with spaces where
    ``text`` starts or ends with one).

    Examples
    --------
    >>> markdown_code("a`b"), markdown_code("plain")
    ('``a`b``', '`plain`')
    """
    text = _one_line(text)
    fence = "`" * (max((len(m) for m in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def to_markdown(df: pd.DataFrame, digits: int = 2, index: bool = True) -> str:
    r"""A GitHub-flavoured Markdown table (no ``tabulate`` needed).

    Headers and cells are plain text: their markup is escaped
    (:func:`markdown_escape`: ``|``, ``*``, ``_``, backticks, ``<``, ...) and line
    breaks become spaces, so every cell shows what the DataFrame holds; missing
    values are empty.

    Examples
    --------
    >>> print(to_markdown(pd.DataFrame({"E": [1.234]}, index=pd.Index(["a"], name="x"))))
    | x | E |
    |---|---|
    | a | 1.23 |
    >>> print(to_markdown(pd.DataFrame({"|E|": [float("nan")], "*": ["<b>"]}), index=False))
    | \|E\| | \* |
    |---|---|
    |  | \<b\> |
    """
    header, rows, _ = _layout(df, index)
    lines = ["| " + " | ".join(markdown_escape(c) for c in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += [
        "| " + " | ".join(markdown_escape(_fmt(v, digits)) for v in row) + " |" for row in rows
    ]
    return "\n".join(lines)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "`": r"\textasciigrave{}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # in pdfLaTeX's default OT1 encoding these would print as other glyphs
    "|": r"\textbar{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}

_LATEX_MATH = {
    "μ": r"\mu",
    "σ": r"\sigma",
    "α": r"\alpha",
    "β": r"\beta",
    "γ": r"\gamma",
    "δ": r"\delta",
    "ε": r"\epsilon",
    "θ": r"\theta",
    "λ": r"\lambda",
    "π": r"\pi",
    "ρ": r"\rho",
    "τ": r"\tau",
    "φ": r"\phi",
    "χ": r"\chi",
    "ω": r"\omega",
    "Δ": r"\Delta",
    "Σ": r"\Sigma",
    "Φ": r"\Phi",
    "Ω": r"\Omega",
    "∅": r"\emptyset",
    "×": r"\times",
    "−": "-",
    "±": r"\pm",
    "≥": r"\geq",
    "≤": r"\leq",
    "≠": r"\neq",
    "≈": r"\approx",
    "→": r"\to",
    "←": r"\leftarrow",
    "∞": r"\infty",
    "√": r"\surd",
    "✓": r"\surd",
    "·": r"\cdot",
    "°": r"^\circ",
    "²": r"^2",
    "³": r"^3",
}

_LATEX_TEXT = {
    "—": "---",
    "–": "--",
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "\u00a0": "~",
}


def latex_escape(text: str) -> str:
    r"""Text safe for pdfLaTeX without extra packages.

    Escapes LaTeX's special characters and maps the symbols the tables use (Greek
    letters, ``∅``, ``×``, ``−``, ``≥``, ``✓``, dashes, ...) to LaTeX commands.
    Accented Latin letters are kept (LaTeX reads UTF-8 by default); other
    characters are replaced by their ASCII compatibility form where one exists.
    Line breaks and other control characters become spaces (a blank line would end
    the paragraph inside a table cell).

    Examples
    --------
    >>> print(latex_escape("μ∅ × 5% & a_b"))
    \ensuremath{\mu}\ensuremath{\emptyset} \ensuremath{\times} 5\% \& a\_b
    """
    out = []
    for ch in _one_line(text):
        if ch in _LATEX_SPECIAL:
            out.append(_LATEX_SPECIAL[ch])
        elif ch in _LATEX_MATH:
            out.append(r"\ensuremath{" + _LATEX_MATH[ch] + "}")
        elif ch in _LATEX_TEXT:
            out.append(_LATEX_TEXT[ch])
        elif ch.isascii() or "\u00c0" <= ch <= "\u017f":
            out.append(ch)
        else:
            ascii_form = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(latex_escape(ascii_form) if ascii_form else ch)
    return "".join(out)


def _latex_cell(text: str) -> str:
    # a cell opening with "[" or "*" would be read as an optional argument / star of
    # the preceding \\ or \midrule: brace it
    t = latex_escape(text)
    return "{" + t + "}" if t[:1] in ("[", "*") else t


def to_latex(
    df: pd.DataFrame, caption: str = "", label: str = "", digits: int = 2, index: bool = True
) -> str:
    r"""A booktabs ``table`` that compiles with pdfLaTeX (needs only ``\usepackage{booktabs}``).

    Cells are formatted as in :func:`to_markdown` (missing values empty), then
    escaped with :func:`latex_escape`, as are the headers and the caption.

    Examples
    --------
    >>> tex = to_latex(pd.DataFrame({"|E|": ["[0, 1)"], "p": [0.5]}), "A & B", "t", index=False)
    >>> print(tex, end="")
    \begin{table}
    \centering
    \caption{A \& B}
    \label{t}
    \begin{tabular}{lr}
    \toprule
    \textbar{}E\textbar{} & p \\
    \midrule
    {[0, 1)} & 0.50 \\
    \bottomrule
    \end{tabular}
    \end{table}
    """
    header, rows, kinds = _layout(df, index)
    align = "".join({"num": "r", "bool": "c"}.get(k, "l") for k in kinds)
    lines = [r"\begin{table}", r"\centering"]
    if caption:
        lines.append(r"\caption{" + latex_escape(caption) + "}")
    if label:
        lines.append(r"\label{" + re.sub(r"[^A-Za-z0-9:._-]", "-", label) + "}")
    lines += [r"\begin{tabular}{" + align + "}", r"\toprule"]
    lines.append(" & ".join(_latex_cell(h) for h in header) + r" \\")
    lines.append(r"\midrule")
    lines += [" & ".join(_latex_cell(_fmt(v, digits)) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_html(df: pd.DataFrame, digits: int = 2, index: bool = True) -> str:
    """An HTML ``<table class="tbl">`` with one header row; cells carry ``num``/``bool``/``text``."""
    header, rows, kinds = _layout(df, index)

    def cells(tag: str, values) -> str:
        return "".join(
            f'<{tag} class="{k}">{_html.escape(v)}</{tag}>'
            for k, v in zip(kinds, values, strict=True)
        )

    head = "<thead><tr>" + cells("th", header) + "</tr></thead>"
    body = "".join("<tr>" + cells("td", [_fmt(v, digits) for v in row]) + "</tr>" for row in rows)
    return f'<table class="tbl">{head}<tbody>{body}</tbody></table>'


def export(
    df: pd.DataFrame,
    out_dir: str | Path,
    name: str,
    caption: str = "",
    digits: int = 2,
    index: bool = True,
) -> dict[str, str]:
    """Write ``name.csv``, ``name.tex`` and ``name.md`` under ``out_dir``.

    The ``.tex`` (:func:`to_latex`) compiles with pdfLaTeX and booktabs; the ``.md``
    (:func:`to_markdown`) escapes ``|``. Returns ``{"html": ..., "markdown": ...}``
    fragments for the report.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / f"{name}.csv", index=index)
    tex = to_latex(df, caption=caption, label=f"tab:{name}", digits=digits, index=index)
    (out / f"{name}.tex").write_text(tex, encoding="utf-8")
    md = to_markdown(df, digits=digits, index=index)
    (out / f"{name}.md").write_text(md + "\n", encoding="utf-8")
    return {"html": to_html(df, digits=digits, index=index), "markdown": md}


def pairs(levels: Sequence[str]) -> list[tuple[str, str]]:
    """All unordered pairs of levels in order (the paper's pairwise contrasts)."""
    return list(itertools.combinations(levels, 2))
