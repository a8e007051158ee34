"""Reference tables of the xlikert docs, generated from the code at build time.

Each directive reads one registry of the package, so a page never lists a name the
code has dropped or misses one it has added:

``xlikert-dims``
    the dimension roles and reserved names of :mod:`xlikert.core.dims`;
``xlikert-results-schema``
    every variable of a results file, from :mod:`xlikert.core.schema`.

And the API reference page itself: :func:`write_api_reference` writes ``docs/api.rst``
from ``api.rst.tmpl`` (beside this file) and the one list of the public API,
:data:`xlikert.api.API` (``conf.py`` calls it at every build; ``python
docs/_ext/xlikert_docs.py`` calls it by hand).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
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


HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "api.rst.tmpl"
API_RST = HERE.parent / "api.rst"


def _heading(title: str) -> list[str]:
    return [title, "=" * len(title), ""]


def _autosummary(names: Sequence[str], template: str | None = None) -> list[str]:
    head = [".. autosummary::", "   :toctree: generated/"]
    head += [f"   :template: {template}"] if template else []
    return [*head, "", *(f"   {n}" for n in names), ""]


def api_sections() -> str:
    """The reST of the ``xl.*`` sections, ``xl.sampling`` and the ``.likert`` accessor,
    from :data:`xlikert.api.API` (and ``xl.sampling``'s ``__all__``)."""
    import importlib

    from xlikert import api

    out: list[str] = []
    for section in api.API:
        out += _heading(section.title)
        out += [section.text, ""] if section.text else []
        out += [".. currentmodule:: xlikert", ""]
        out += _autosummary([e.name for e in section.entries] + list(section.also))
    sampling = importlib.import_module(api.NAMESPACES["sampling"])
    out += _heading("Sampling cost (``xl.sampling``)")
    out += [
        f"``xl.sampling`` is :mod:`{sampling.__name__}`: what a study that samples answers",
        "would have paid, computed analytically from the exact PMFs.",
        "",
        f".. currentmodule:: {sampling.__name__}",
        "",
    ]
    out += _autosummary([n for n in sampling.__all__ if callable(getattr(sampling, n))])
    out += [".. _api-accessor:", ""]
    out += _heading("The ``.likert`` accessor")
    out += [
        "``da.likert.f(...)`` is ``xl.f(da, ...)``: each method has the signature and the",
        "docstring of the function it calls, less the first argument. A Dataset's methods",
        "read its ``pmf``.",
        "",
        ".. currentmodule:: xarray",
        "",
    ]
    out += _autosummary(
        ["DataArray.likert.attrs", "Dataset.likert.attrs"], "autosummary/accessor_attribute.rst"
    )
    methods = [
        f"{owner}.likert.{name}"
        for owner in ("DataArray", "Dataset")
        for name in sorted(api.accessor_methods(owner))
    ]
    out += _autosummary(methods, "autosummary/accessor_method.rst")
    return "\n".join(out).rstrip() + "\n"


def api_reference() -> str:
    """The text of ``docs/api.rst``: the template with :func:`api_sections` in it."""
    return TEMPLATE.read_text("utf-8").replace("{{ generated }}\n", api_sections())


def write_api_reference() -> bool:
    """Write ``docs/api.rst`` where it differs from :func:`api_reference`; True if it did."""
    text = api_reference()
    if API_RST.is_file() and API_RST.read_text("utf-8") == text:
        return False
    API_RST.write_text(text, "utf-8")
    return True


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("xlikert-dims", DimsTable)
    app.add_directive("xlikert-results-schema", ResultsSchemaTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1]))
    print("docs/api.rst", "written" if write_api_reference() else "unchanged")
