"""Tables rendered: CSV, LaTeX, Markdown and HTML, each written once.

A table is built in the analysis stage it tabulates (a plain :class:`pandas.DataFrame`:
:func:`xlikert.summary_table` and the construct stage's tables in
:mod:`xlikert.analysis.construct.tables`, :func:`xlikert.sampling.sampling_se_table` and
the other sampling-cost tables in :mod:`xlikert.analysis.sampling.tables`,
:func:`~xlikert.analysis.reliability.reliability_table`,
:func:`~xlikert.analysis.alignment.alignment_table`,
:func:`~xlikert.analysis.constraint.failure_summary`,
:func:`~xlikert.analysis.consensus.consensus_entropy`,
:func:`~xlikert.analysis.human.human_vs_llm`). This module renders any of them:
:func:`export` writes ``.csv``, ``.tex`` (:func:`to_latex`, pdfLaTeX-safe) and ``.md``
(:func:`to_markdown`) and returns the HTML fragment (:func:`to_html`) the report embeds.
Every header and cell is plain text, escaped for each format (:func:`latex_escape`,
:func:`markdown_escape`, HTML escaping).
"""

from __future__ import annotations

import html as _html
import math
import re
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "MARKDOWN_SPECIAL",
    "export",
    "latex_escape",
    "markdown_code",
    "markdown_escape",
    "to_html",
    "to_latex",
    "to_markdown",
]


# --------------------------------------------------------------------------- export
def _is_missing(v: object) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float | np.floating) and math.isnan(v)


def _fmt(v: object, digits: int) -> str:
    """One cell as text: ``digits`` decimals, booleans as a check mark, missing as ``""``."""
    if _is_missing(v):
        return ""
    if isinstance(v, bool | np.bool_):
        return "✓" if v else ""
    if isinstance(v, float | np.floating):
        size = abs(float(v))
        if v != 0 and (size < 10.0 ** (-digits) or size >= 1e6):
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


def _one_line(text: object) -> str:
    """``text`` on one line: every run of whitespace that holds a line break, and every
    other control character, becomes one space (a line break would end a table row, a
    paragraph or a LaTeX cell)."""
    text = re.sub(r"\s*[\n\r\f\v\u2028\u2029]\s*", " ", str(text))
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)


def markdown_escape(text: object) -> str:
    r"""Plain text as Markdown that shows it literally: markup escaped, on one line.

    Parameters
    ----------
    text : object
        Any text (a non-string is converted with :class:`str`).

    Returns
    -------
    str
        ``text`` with a backslash before each character of :data:`MARKDOWN_SPECIAL`,
        and every line break or other control character replaced by a space.

    Examples
    --------
    >>> print(markdown_escape("<script>*a*_b_ | `c` $x$ & [l](u) #1\nnext"))
    \<script\>\*a\*\_b\_ \| \`c\` \$x\$ \& \[l\](u) \#1 next
    """
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in _one_line(text))


def markdown_code(text: object) -> str:
    """Plain text as a Markdown code span that shows it literally (backticks included).

    CommonMark does not read escapes inside a code span, so the fence is one backtick
    more than the longest run of backticks in ``text`` (and padded with spaces where
    ``text`` starts or ends with one).

    Parameters
    ----------
    text : object
        Any text (a non-string is converted with :class:`str`; line breaks and control
        characters become spaces).

    Returns
    -------
    str
        The code span, fences included.

    Examples
    --------
    >>> markdown_code("a`b"), markdown_code("plain")
    ('``a`b``', '`plain`')
    """
    line = _one_line(text)
    fence = "`" * (max((len(m) for m in re.findall("`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def to_markdown(df: pd.DataFrame, digits: int = 2, index: bool = True) -> str:
    r"""A GitHub-flavoured Markdown table (no ``tabulate`` needed).

    Headers and cells are plain text: their markup is escaped
    (:func:`markdown_escape`: ``|``, ``*``, ``_``, backticks, ``<``, ...) and line
    breaks become spaces, so every cell shows what the DataFrame holds; missing
    values are empty.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. Its index levels become leading columns (their names as headers)
        when ``index``; MultiIndex column labels are joined by spaces.
    digits : int, default 2
        Decimals of a float cell; a non-zero float below ``10**-digits`` or from
        ``1e6`` up is written in scientific notation (``1.23e-05``).
    index : bool, default True
        Whether to write the index levels as leading columns.

    Returns
    -------
    str
        The table: a header row, the delimiter row, one row per row of ``df``
        (no trailing newline).

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

    Parameters
    ----------
    text : object
        Any text (a non-string is converted with :class:`str`).

    Returns
    -------
    str
        The text as pdfLaTeX source.

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

    Parameters
    ----------
    df : pandas.DataFrame
        The table. Its index levels become leading columns (their names as headers)
        when ``index``; MultiIndex column labels are joined by spaces.
    caption : str, default ""
        The ``\caption`` (escaped); none where empty.
    label : str, default ""
        The ``\label``; characters other than letters, digits and ``:._-`` become
        ``-``. None where empty.
    digits : int, default 2
        Decimals of a float cell; a non-zero float below ``10**-digits`` or from
        ``1e6`` up is written in scientific notation (``1.23e-05``).
    index : bool, default True
        Whether to write the index levels as leading columns.

    Returns
    -------
    str
        The ``table`` environment, ending with a newline.

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
    """An HTML ``<table class="tbl">`` with one header row; cells carry ``num``/``bool``/``text``.

    Cells are formatted as in :func:`to_markdown` (missing values empty) and
    HTML-escaped; each ``th`` and ``td`` has the class of its column's kind (``num``,
    ``bool`` or ``text``), which the report's stylesheet aligns.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. Its index levels become leading columns (their names as headers)
        when ``index``; MultiIndex column labels are joined by spaces.
    digits : int, default 2
        Decimals of a float cell; a non-zero float below ``10**-digits`` or from
        ``1e6`` up is written in scientific notation (``1.23e-05``).
    index : bool, default True
        Whether to write the index levels as leading columns.

    Returns
    -------
    str
        The ``<table>`` element, on one line.

    Examples
    --------
    >>> html = to_html(pd.DataFrame({"E": [0.5], "item": ["<i>"]}), index=False)
    >>> html.split("<tbody>")[1]
    '<tr><td class="num">0.50</td><td class="text">&lt;i&gt;</td></tr></tbody></table>'
    """
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

    The ``.csv`` keeps the full precision (:meth:`pandas.DataFrame.to_csv`); the
    ``.tex`` (:func:`to_latex`, labelled ``tab:`` followed by ``name``) compiles with
    pdfLaTeX and booktabs; the ``.md`` is :func:`to_markdown`.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. Its index levels become leading columns (their names as headers)
        when ``index``; MultiIndex column labels are joined by spaces.
    out_dir : str or pathlib.Path
        The folder to write in; created where missing. Existing files of the same
        names are replaced.
    name : str
        The files' stem.
    caption : str, default ""
        The LaTeX table's caption.
    digits : int, default 2
        Decimals of a float cell; a non-zero float below ``10**-digits`` or from
        ``1e6`` up is written in scientific notation (``1.23e-05``).
    index : bool, default True
        Whether to write the index levels as leading columns.

    Returns
    -------
    dict of str to str
        The fragments the report embeds: ``"html"`` (:func:`to_html`) and
        ``"markdown"`` (:func:`to_markdown`).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> fragments = export(pd.DataFrame({"E": [0.5]}), folder, "effects", caption="Effects")
    >>> sorted(p.name for p in Path(folder).iterdir())
    ['effects.csv', 'effects.md', 'effects.tex']
    >>> print(fragments["markdown"])
    |  | E |
    |---|---|
    | 0 | 0.50 |
    >>> import shutil
    >>> shutil.rmtree(folder)
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / f"{name}.csv", index=index)
    tex = to_latex(df, caption=caption, label=f"tab:{name}", digits=digits, index=index)
    (out / f"{name}.tex").write_text(tex, encoding="utf-8")
    md = to_markdown(df, digits=digits, index=index)
    (out / f"{name}.md").write_text(md + "\n", encoding="utf-8")
    return {"html": to_html(df, digits=digits, index=index), "markdown": md}
