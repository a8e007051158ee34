"""Every public function has a full numpydoc docstring (numpydoc's own validation).

The public functions are those the API reference documents: every function of
``xl.__all__`` and of the ``__all__`` of the public modules below, and the public
methods and properties of the classes in :data:`CLASSES`. Each is checked by
:func:`numpydoc.validate.validate` with every check but :data:`NOT_REQUIRED`, and by
two checks of this project: an ``xl.*`` function has a Raises section (``XL01``), and
no docstring cites a file or a label outside the repository (``XL02``: the design
notes, the paper's LaTeX labels; a paper equation is named by its section and name,
or by the formulas page of the docs, ``docs/formulas.md``).
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
    "xlikert.api",
    "xlikert.analysis.sampling",
    "xlikert.collect",
    "xlikert.datasets",
    "xlikert.design",
    "xlikert.core.dims",
    "xlikert.core.io",
    "xlikert.kernels",
    "xlikert.plot",
    "xlikert.report",
    "xlikert.core.schema",
)
#: numpydoc checks this project does not require: an extended summary (ES01), a See
#: Also section (SA01), and a summary in the infinitive (SS05: the docstrings name
#: what a function returns, "Composite-score PMF of ...").
NOT_REQUIRED = {"ES01", "SA01", "SS05"}
#: Classes whose public methods and properties the API reference lists one by one
#: (docs/api.rst): the objects a user of the design and collect stages calls; and the
#: backend seam a backend's author implements (Model) and fills (UnitResult, Variable).
CLASSES = (
    "xlikert.design.Experiment",
    "xlikert.design.Instrument",
    "xlikert.design.ResponseFormat",
    "xlikert.design.Template",
    "xlikert.collect.CollectOptions",
    "xlikert.collect.Model",
    "xlikert.collect.UnitResult",
    "xlikert.core.schema.Variable",
)
#: A citation of something a reader of the repository cannot open.
OUTSIDE = re.compile(
    r"DESIGN\.md|every-token-counts\.tex|\bseed/"  # files of the development checkout
    r"|\beqs?\.\s+[a-z]|\bDef\.\s+[a-z]"  # the paper's LaTeX labels: "eq. dissension"
    r"|\b(?:tab|fig|app|sec|eq|def|thm|cor|prop):[a-z]"  # "tab:country-contrasts"
)

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


def public_methods() -> list[str]:
    """The dotted names of every public method and property of :data:`CLASSES`."""
    names = []
    for dotted in CLASSES:
        modname, _, clsname = dotted.rpartition(".")
        cls = getattr(importlib.import_module(modname), clsname)
        names += [
            f"{dotted}.{name}"
            for name, obj in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(obj) or isinstance(obj, property))
        ]
    return sorted(names)


def resolve(name: str):
    """The object a dotted name names (a module's attribute, or a class's)."""
    modname, _, attr = name.rpartition(".")
    try:
        owner = importlib.import_module(modname)
    except ModuleNotFoundError:
        owner = resolve(modname)
    return inspect.getattr_static(owner, attr) if inspect.isclass(owner) else getattr(owner, attr)


def problems(name: str) -> set[str]:
    """The failing checks of one function: numpydoc's codes, ``XL01``, ``XL02``."""
    result = numpydoc_validate.validate(name)
    codes = {code for code, _ in result["errors"]} - NOT_REQUIRED
    modname = name.rpartition(".")[0]
    doc = inspect.getdoc(resolve(name)) or ""
    if modname == "xlikert" and "\nRaises\n------\n" not in doc:
        codes.add("XL01")
    if OUTSIDE.search(doc):
        codes.add("XL02")
    return codes


FUNCTIONS = public_functions()
METHODS = public_methods()


def test_the_checked_functions_include_every_function_of_xl_all():
    functions = {n.removeprefix("xlikert.") for n in FUNCTIONS if n.count(".") == 1}
    assert functions == {n for n in xl.__all__ if inspect.isfunction(getattr(xl, n))}


def test_the_checked_methods_include_build_prompts():
    assert "xlikert.design.Experiment.build_prompts" in METHODS
    assert "xlikert.design.Experiment.n_prompts" in METHODS  # a property


@pytest.mark.parametrize("name", FUNCTIONS + METHODS)
def test_docstring_is_complete(name):
    found = problems(name)
    assert not found, f"{name}: {sorted(found)} fail" + "".join(
        f"\n  {code}: {msg}"
        for code, msg in numpydoc_validate.validate(name)["errors"]
        if code in found
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
    assert not found, found
