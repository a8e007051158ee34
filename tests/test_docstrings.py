"""Every public function has a full numpydoc docstring (numpydoc's own validation).

The public functions are those the API reference documents: every function of
``xl.__all__`` and of the ``__all__`` of the public modules below. Each is checked by
:func:`numpydoc.validate.validate` with every check but :data:`NOT_REQUIRED`, and by
two checks of this project: an ``xl.*`` function has a Raises section (``XL01``), and
no docstring cites a file or a label outside the repository (``XL02``: the design
notes, the paper's LaTeX labels; a paper equation is named by its section and name,
or by the formulas page of the docs, ``docs/formulas.md``).

:data:`PENDING` lists the functions that do not conform yet, each with what is
missing. It only shrinks: an entry whose function now conforms fails the test until
it is removed, and an entry must name exactly the checks that still fail.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

numpydoc_validate = pytest.importorskip("numpydoc.validate")

import xlikert as xl  # noqa: E402

#: Public modules whose ``__all__`` functions the API reference documents.
MODULES = (
    "xlikert",
    "xlikert.analysis.cost",
    "xlikert.collect",
    "xlikert.datasets",
    "xlikert.design",
    "xlikert.dims",
    "xlikert.io",
    "xlikert.kernels",
    "xlikert.plot",
    "xlikert.report",
    "xlikert.report.tables",
    "xlikert.schema",
)
#: numpydoc checks this project does not require: an extended summary (ES01), a See
#: Also section (SA01), and a summary in the infinitive (SS05: the docstrings name
#: what a function returns, "Composite-score PMF of ...").
NOT_REQUIRED = {"ES01", "SA01", "SS05"}
#: A citation of something a reader of the repository cannot open.
OUTSIDE = re.compile(
    r"DESIGN\.md|every-token-counts\.tex|\bseed/"  # files of the development checkout
    r"|\beqs?\.\s+[a-z]|\bDef\.\s+[a-z]"  # the paper's LaTeX labels: "eq. dissension"
    r"|\b(?:tab|fig|app|sec|eq|def|thm|cor|prop):[a-z]"  # "tab:country-contrasts"
)

#: Functions that do not conform yet: name -> the checks that fail (numpydoc's codes:
#: PR01 parameters not documented, PR02 unknown parameters, PR04 a parameter without a
#: type, PR08 description not capitalised, RT01 no Returns, RT03 no Returns description,
#: EX01 no Examples, SS06 summary over one line, YD01 no Yields; XL01 no Raises, XL02 a
#: citation outside the repository). The second phase of the docs issue empties it:
#: these modules were being changed by other work when the check came in (collect: the
#: runner, store and backends; design: the questionnaire model; report and schema with
#: them), so their docstrings wait for that work to land.
PENDING: dict[str, set[str]] = {
    # xlikert.collect
    "xlikert.collect.builtin_names": {"RT01"},
    "xlikert.collect.cache_dir": {"RT01"},
    "xlikert.collect.collect": {"PR02", "PR04", "PR08", "XL02"},
    "xlikert.collect.find_valid_tokens": {"PR04"},
    "xlikert.collect.load_model": {"EX01", "PR01", "RT01"},
    "xlikert.collect.merge_shards": {"PR01", "RT01"},
    "xlikert.collect.parse_shard": {"PR01", "RT01"},
    "xlikert.collect.read_sequence": {"PR04"},
    "xlikert.collect.resolve_gguf": {"PR01", "RT01"},
    "xlikert.collect.trace_texts": {"PR01", "RT01"},
    # xlikert.design
    "xlikert.design.builtin_experiments": {"EX01", "RT01"},
    "xlikert.design.builtin_format": {"EX01", "PR01", "RT01"},
    "xlikert.design.builtin_instruments": {"RT01"},
    "xlikert.design.experiment_from_dict": {"EX01", "PR01", "RT01"},
    "xlikert.design.load_experiment": {"PR04", "RT01"},
    "xlikert.design.load_instrument": {"PR04", "RT03"},
    "xlikert.design.prompts_to_frame": {"PR01", "RT01"},
    "xlikert.design.scale_fields": {"PR01", "RT01"},
    # xlikert.report.tables
    "xlikert.report.tables.export": {"EX01", "PR01", "RT01"},
    "xlikert.report.tables.latex_escape": {"PR01", "RT01"},
    "xlikert.report.tables.markdown_code": {"PR01", "RT01"},
    "xlikert.report.tables.markdown_escape": {"PR01", "RT01"},
    "xlikert.report.tables.to_html": {"EX01", "PR01", "RT01"},
    "xlikert.report.tables.to_latex": {"PR01", "RT01"},
    "xlikert.report.tables.to_markdown": {"PR01", "RT01"},
    # xlikert.report
    "xlikert.report.write_report": {"PR04"},
    # xlikert.schema
    "xlikert.schema.decode_text": {"EX01", "PR01", "RT01"},
    "xlikert.schema.decode_token_ids": {"EX01", "PR01", "RT01"},
    "xlikert.schema.encode_text": {"PR01", "RT01"},
    "xlikert.schema.encode_token_ids": {"PR01", "RT01"},
    "xlikert.schema.variable_table": {"PR01", "RT01", "SS06"},
}  # fmt: skip


#: Files whose docstrings still cite the design notes (modules other work was changing).
CITING_FILES = {
    "xlikert/collect/runner.py",  # collect(): "DESIGN.md section 1"
    "xlikert/collect/backends/transformers/__init__.py",  # "DESIGN.md section 5"
}
ROOT = Path(__file__).resolve().parents[1]


def public_functions() -> list[str]:
    """The dotted names of every public function."""
    names = []
    for modname in MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or type(obj).__name__ in ("GUFunc", "CPUDispatcher"):
                names.append(f"{modname}.{name}")
    return sorted(set(names))


def problems(name: str) -> set[str]:
    """The failing checks of one function: numpydoc's codes, ``XL01``, ``XL02``."""
    result = numpydoc_validate.validate(name)
    codes = {code for code, _ in result["errors"]} - NOT_REQUIRED
    modname, _, attr = name.rpartition(".")
    doc = inspect.getdoc(getattr(importlib.import_module(modname), attr)) or ""
    if modname == "xlikert" and "\nRaises\n------\n" not in doc:
        codes.add("XL01")
    if OUTSIDE.search(doc):
        codes.add("XL02")
    return codes


FUNCTIONS = public_functions()


def test_the_checked_functions_include_every_function_of_xl_all():
    functions = {n.removeprefix("xlikert.") for n in FUNCTIONS if n.count(".") == 1}
    assert functions == {n for n in xl.__all__ if inspect.isfunction(getattr(xl, n))}


def test_pending_names_only_public_functions():
    assert set(PENDING) <= set(FUNCTIONS)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_docstring_is_complete(name):
    found = problems(name)
    want = PENDING.get(name, set())
    if want and not found:
        pytest.fail(f"{name} conforms now: remove it from PENDING")
    assert found == want, (
        f"{name}: {sorted(found)} fail"
        + (f" (PENDING lists {sorted(want)}: update the entry)" if want else "")
        + "".join(
            f"\n  {code}: {msg}"
            for code, msg in numpydoc_validate.validate(name)["errors"]
            if code in found
        )
    )


def citations_outside(path: Path) -> list[str]:
    """Every docstring of a module (its own, its classes' and functions') that cites
    something outside the repository, as ``"<name>: <text>"``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node) or ""
            out += [
                f"{getattr(node, 'name', '<module>')}: {m.group(0)!r}"
                for m in OUTSIDE.finditer(doc)
            ]
    return out


@pytest.mark.parametrize(
    "path", sorted((ROOT / "xlikert").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_docstring_cites_something_outside_the_repository(path):
    found = citations_outside(path)
    if str(path.relative_to(ROOT)) in CITING_FILES:
        assert found, f"{path.name} cites nothing outside now: remove it from CITING_FILES"
    else:
        assert not found, found
