"""The report's page: a :class:`Section` of text, tables and figures, and the assembly.

A section function (see :mod:`xlikert.report.sections`) returns one
:class:`Section`; :func:`write_pages` writes ``index.html`` and ``report.md`` from
the sections in order (a table of contents, one heading per section).
Tables and figures are written to ``tables/`` and ``figures/`` when a section
adds them, so a section holds only the HTML and Markdown that link to them.

Untrusted text (factor names and levels, item ids, subscale names, model names,
answer labels, file names: anything read from a results file or a CSV) is
escaped for every output: a paragraph is Markdown written by xlikert, into which
a section puts such text only through :func:`~xlikert.report.tables.markdown_escape`
(``md``) or :func:`~xlikert.report.tables.markdown_code` (``md_code``);
:func:`_md_inline` turns that Markdown into HTML. Titles and captions are plain
text, escaped here for Markdown and HTML (and by :func:`~xlikert.report.tables.to_latex`
for LaTeX); file names are reduced to safe characters (:func:`slug`).
"""

from __future__ import annotations

import contextvars
import html as _html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import tables
from .tables import markdown_escape

__all__ = ["DRAW_FIGURES", "Section", "slug", "write_pages"]

#: The note under the title of a report written with ``figures=False``.
NO_FIGURES = "Figures not drawn (figures=False): text and tables only."
#: Whether :meth:`Section.figure` draws: ``write_report(figures=False)`` sets it off for
#: its sections (text and tables only).
DRAW_FIGURES: contextvars.ContextVar[bool] = contextvars.ContextVar("draw_figures", default=True)


@dataclass
class Section:
    """One section of the report: a title and its blocks, in order.

    Each block is ``(kind, html, markdown)``; :meth:`table` and :meth:`figure`
    write their file into ``out`` (``tables/``, ``figures/``) as they add it.
    """

    title: str
    blocks: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, html, markdown)

    def text(self, md: str) -> None:
        """Add a paragraph: Markdown with ``**bold**``, code spans and backslash escapes,
        in which every untrusted part is escaped (``md(...)``, ``md_code(...)``)."""
        self.blocks.append(("text", "<p>" + _md_inline(md) + "</p>", md))

    def table(
        self,
        df: pd.DataFrame,
        out: Path,
        name: str,
        caption: str,
        digits: int = 2,
        index: bool = True,
    ) -> None:
        """Write ``df`` as ``tables/{name}.csv|tex|md`` under ``out`` and add it with links.

        ``caption`` is plain text (escaped for each format); ``name`` is made a safe
        file name (:func:`slug`).
        """
        name = slug(name)
        frag = tables.export(df, out / "tables", name, caption=caption, digits=digits, index=index)
        links = " · ".join(
            f'<a href="tables/{name}.{ext}">{ext}</a>' for ext in ("csv", "tex", "md")
        )
        self.blocks.append(
            (
                "table",
                f'<figure class="table"><figcaption>{_html.escape(caption)} '
                f'<span class="dl">[{links}]</span></figcaption>{frag["html"]}</figure>',
                f"*{markdown_escape(caption)}*\n\n{frag['markdown']}",
            )
        )

    def figure(self, fig: Any | Callable[[], Any], out: Path, name: str, caption: str) -> None:
        """Save the matplotlib figure as ``figures/{name}.png`` under ``out``, close it, add it.

        ``fig`` is a figure, or a function that makes one: it is called only when figures
        are drawn (:data:`DRAW_FIGURES`; off, nothing is added). ``caption`` is plain text
        (escaped); ``name`` is made a safe file name (:func:`slug`).
        """
        if not DRAW_FIGURES.get():
            if not callable(fig):
                _close(fig)
            return
        if callable(fig):
            fig = fig()
        name = slug(name)
        text = markdown_escape(caption)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        fig.savefig(out / "figures" / f"{name}.png", dpi=130, bbox_inches="tight")
        _close(fig)
        self.blocks.append(
            (
                "figure",
                f'<figure><img src="figures/{name}.png" alt="{_html.escape(caption)}">'
                f"<figcaption>{_html.escape(caption)}</figcaption></figure>",
                f"![{text}](figures/{name}.png)\n\n*{text}*",
            )
        )


def _close(fig: Any) -> None:
    """Release a pyplot figure (a bare ``Figure`` is garbage collected)."""
    if getattr(fig.canvas, "manager", None) is not None:
        import matplotlib.pyplot as plt

        plt.close(fig)


def slug(name: str) -> str:
    """A file name made of ``[A-Za-z0-9_.-]`` only (any other run becomes ``_``).

    Factor names and levels go into file names (``main_effect_<factor>``), and the file
    names into HTML attributes and Markdown links: only safe characters get there.

    Examples
    --------
    >>> slug('main_effect_a"b <x>/../y')
    'main_effect_a_b_x_.._y'
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("_") or "table"


#: A code span (a run of backticks up to the same run), a backslash escape, or ``**``.
_INLINE = re.compile(
    r"(?<!`)(?P<fence>`++)(?P<code>.*?)(?<!`)(?P=fence)(?!`)|\\(?P<esc>[!-/:-@[-`{-~])|\*\*"
)


def _md_inline(text: str) -> str:
    r"""The HTML of one paragraph of xlikert's Markdown: text, ``**bold**``, code spans
    (fenced by any run of backticks) and backslash escapes (CommonMark's rules).

    Everything else is text: HTML is escaped, so no markup of the input reaches the page.

    Examples
    --------
    >>> _md_inline(r"**n** = 2: ``a`b`` and \*x\* <b>")
    '<strong>n</strong> = 2: <code>a`b</code> and *x* &lt;b&gt;'
    """
    out, bold, pos = [], False, 0
    for m in _INLINE.finditer(text):
        out.append(_html.escape(text[pos : m.start()]))
        pos = m.end()
        if m.group("fence"):
            code = m.group("code")
            if len(code) > 1 and code.startswith(" ") and code.endswith(" "):
                code = code[1:-1]
            out.append(f"<code>{_html.escape(code)}</code>")
        elif m.group("esc"):
            out.append(_html.escape(m.group("esc")))
        else:
            out.append("</strong>" if bold else "<strong>")
            bold = not bold
    out.append(_html.escape(text[pos:]))
    if bold:
        out.append("</strong>")
    return "".join(out)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #0072B2}h2{margin-top:2em;color:#0072B2}
nav ul{columns:2}figure{margin:1.2em 0}img{max-width:100%;height:auto}
figcaption{font-size:.92em;color:#444;margin:.3em 0}
table.tbl{border-collapse:collapse;font-size:.88em;margin:.4em 0}
.tbl th,.tbl td{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left}
.tbl th{background:#f2f6fa}.tbl .num{text-align:right}.tbl .bool{text-align:center}
.dl{font-size:.85em}code{background:#f4f4f4;padding:0 .2em}
"""


def write_pages(out: Path, title: str, sections: list[Section], *, figures: bool = True) -> Path:
    """Write ``report.md`` and ``index.html`` of ``sections`` into ``out``; the HTML's path.

    ``title`` and the section titles are plain text (escaped for both). Without
    ``figures`` the page says under its title that none were drawn.
    """
    from .._version import __version__

    toc = "".join(
        f'<li><a href="#s{i}">{_html.escape(sec.title)}</a></li>' for i, sec in enumerate(sections)
    )
    body = []
    md = [f"# {markdown_escape(title)}", ""]
    if not figures:
        body.append(f"<p><em>{NO_FIGURES}</em></p>")
        md += [f"*{NO_FIGURES}*", ""]
    for i, sec in enumerate(sections):
        body.append(f'<h2 id="s{i}">{_html.escape(sec.title)}</h2>')
        md += [f"## {markdown_escape(sec.title)}", ""]
        for _kind, h, m in sec.blocks:
            body.append(h)
            md += [m, ""]
    foot = f"Generated by xlikert {__version__}."
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_html.escape(title)}'
        f"</title><style>{CSS}</style></head><body><h1>{_html.escape(title)}</h1>"
        f"<nav><ul>{toc}</ul></nav>{''.join(body)}<hr><p><small>{foot}</small></p></body></html>"
    )
    (out / "report.md").write_text("\n".join([*md, foot, ""]), encoding="utf-8")
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
