"""Reference tables of the xlikert docs, generated from the code at build time.

Each directive reads one registry of the package, so a page never lists a name the
code has dropped or misses one it has added:

``xlikert-dims``
    the dimension roles and reserved names of :mod:`xlikert.core.dims`;
``xlikert-results-schema``
    every variable of a results file, from :mod:`xlikert.core.schema`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive


def table(header: Sequence[str], rows: Sequence[Sequence[str]], code: Sequence[int] = (0,)):
    """A docutils table; the cells of the columns ``code`` are set as literals."""
    tgroup = nodes.tgroup(cols=len(header))
    for _ in header:
        tgroup += nodes.colspec(colwidth=1)
    thead, tbody = nodes.thead(), nodes.tbody()
    tgroup += thead
    tgroup += tbody
    for target, cells, is_head in [(thead, header, True)] + [(tbody, r, False) for r in rows]:
        row = nodes.row()
        for i, text in enumerate(cells):
            para = nodes.paragraph()
            para += (
                nodes.literal(text, text)
                if (i in code and not is_head and text)
                else (nodes.Text(text))
            )
            row += nodes.entry("", para)
        target += row
    out = nodes.table()
    out += tgroup
    return out


class DimsTable(Directive):
    """Every name :mod:`xlikert.core.dims` reserves, with its role and meaning."""

    def run(self) -> list[nodes.Node]:
        from xlikert.core import dims

        rows = [[name, "core dim", text] for name, text in dims.CORE_DIMS.items()]
        rows += [[name, "auxiliary dim", text] for name, text in dims.AUXILIARY_DIMS.items()]
        rows += [[name, "variable or column", text] for name, text in dims.VARIABLE_NAMES.items()]
        return [table(["name", "role", "meaning"], rows)]


class ResultsSchemaTable(Directive):
    """The variables of a results file (:mod:`xlikert.core.schema`), group by group."""

    def run(self) -> list[nodes.Node]:
        from xlikert.core import schema

        groups = [
            ("always", schema.VARIABLES),
            ("top-k server (certified bounds)", schema.BOUND_VARIABLES),
            ("reasoning mode", schema.TRACE_VARIABLES),
            ("prompts and shards", schema.PROMPT_VARIABLES),
        ]
        rows = []
        for when, variables in groups:
            for name, var in variables.items():
                dims = ", ".join(["*factors", "item", *var.dims])
                text = var.attrs.get("long_name") or var.attrs.get("description") or ""
                if var.attrs.get("long_name") and var.attrs.get("description"):
                    text = f"{var.attrs['long_name']}: {var.attrs['description']}"
                rows.append([name, f"({dims})", when, text])
        return [table(["variable", "dims", "present", "meaning"], rows, code=(0, 1))]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("xlikert-dims", DimsTable)
    app.add_directive("xlikert-results-schema", ResultsSchemaTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
