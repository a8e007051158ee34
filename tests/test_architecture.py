"""The architecture the package promises (CONTRIBUTING.md, "Layout"), checked.

* the import contracts of ``[tool.importlinter]`` in pyproject.toml (the pipeline's
  layers import only downwards; no package has an import cycle), run by import-linter;
* every module of the package is in a contract (a layer of its package's contract);
* no module-level import cycle at all, parents and their sub-modules included;
* no module imports a private name (``_x``) of another module;
* the public names (``xl.*``, the accessor's methods) stay what users rely on, and
  no shim keeps an old import path alive (none before the first release).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

import xlikert as xl
from xlikert import api

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xlikert"

#: The public names (``xl.*``), the namespaces and the accessor's methods all derive from
#: the one list :data:`xlikert.api.API`: ``tests/test_api.py`` checks them against it.
PUBLIC_NAMES = set(api.public_names())
NAMESPACES = set(api.NAMESPACES)
#: The accessor's methods on a DataArray; a Dataset has these and :data:`DATASET_ONLY`.
ACCESSOR_METHODS = set(api.accessor_methods("DataArray")) | {"attrs"}
DATASET_ONLY = set(api.accessor_methods("Dataset")) - ACCESSOR_METHODS


def test_import_contracts_are_kept():
    """``lint-imports`` (import-linter) keeps every contract of pyproject.toml."""
    run = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
         "lint_imports_command()", "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def package_modules(package: Path = PACKAGE) -> set[str]:
    """Every module and sub-package under ``package`` (dotted), the package itself left out."""
    names = {_module_name(path) for path in package.rglob("*.py")}
    return names - {_module_name(package / "__init__.py")}


def contracted(contracts: list[dict]) -> set[str]:
    """The modules a contract of ``[tool.importlinter]`` names: each layer of a layers
    contract (in each of its containers) and each module of an independence contract."""
    named: set[str] = set()
    for contract in contracts:
        if contract["type"] == "layers":
            named |= {
                f"{container}.{name.strip().strip('()')}"
                for container in contract["containers"]
                for layer in contract["layers"]
                for name in layer.replace(":", "|").split("|")
            }
        elif contract["type"] == "independence":
            named |= set(contract["modules"])
    return named


def left_out(modules: set[str], contracts: list[dict]) -> list[str]:
    """The modules no contract orders."""
    return sorted(modules - contracted(contracts))


def _contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["importlinter"]["contracts"]


def test_every_module_is_in_a_contract():
    """Listing the package's modules against the contracts leaves none out: each is a
    layer (or an independent module) of the contract on its parent package."""
    missing = left_out(package_modules(), _contracts())
    assert not missing, "modules in no import contract (pyproject.toml):\n" + "\n".join(missing)
    assert {"xlikert.collect.answers.numerals", "xlikert.kernels._compile"} <= contracted(
        _contracts()
    )


def test_a_module_in_no_contract_is_listed():
    contracts = _contracts()
    modules = package_modules() | {"xlikert.report.extra", "xlikert.collect.run.unlisted"}
    assert left_out(modules, contracts) == ["xlikert.collect.run.unlisted", "xlikert.report.extra"]
    design = next(c for c in contracts if c.get("containers") == ["xlikert.design"])
    shorter = [
        *(c for c in contracts if c is not design),
        {**design, "layers": design["layers"][1:]},
    ]
    assert left_out(package_modules(), shorter) == [
        f"xlikert.design.{name.strip()}" for name in design["layers"][0].split("|")
    ]


#: Folders of tests/ that are no package's mirror: helpers, data, real models and engines,
#: the built wheel.
NOT_MIRRORS = {"support", "data", "integration", "engines", "wheel"}
#: Packages without a folder of tests, and where they are tested.
UNMIRRORED = {"testing": "its test engines: tests/engines/ and tests/integration/"}


def test_tests_mirror_the_package_one_level_down():
    """tests/<pkg>/ for each package of xlikert, tests/collect/<sub>/ for each of collect's
    sub-packages; no folder of tests names a package that is not there."""
    tests = ROOT / "tests"
    folders = {
        path.relative_to(tests).as_posix()
        for path in tests.rglob("*")
        if path.is_dir() and path.name != "__pycache__"
        and not set(path.relative_to(tests).parts) & NOT_MIRRORS
    }  # fmt: skip
    packages = {
        path.parent.relative_to(PACKAGE).as_posix()
        for path in [*PACKAGE.glob("*/__init__.py"), *PACKAGE.glob("collect/*/__init__.py")]
    }
    assert folders <= packages, f"test folders of no package: {sorted(folders - packages)}"
    assert packages - folders == set(UNMIRRORED), sorted(packages - folders)
    for folder in folders:
        assert list((tests / folder).glob("test_*.py")), f"tests/{folder} holds no test file"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import of an xlikert module in ``path``."""
    module, is_package = _module_name(path), path.name == "__init__.py"
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] == "xlikert":
                out += [(node.lineno, source, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.startswith("xlikert")]
    return out


def test_no_module_imports_a_private_name_of_another():
    bad = [
        f"{path.relative_to(ROOT)}:{line}: from {source} import {name}"
        for path in PACKAGE.rglob("*.py")
        for line, source, name in _imports(path)
        if name and name.startswith("_") and not name.startswith("__")
        and source != _module_name(path)
    ]  # fmt: skip
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_no_module_level_import_cycle():
    """Every import edge, package ``__init__`` files included, with no way back."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("xlikert", cache_dir=None)
    cycles = sorted(
        {
            " -> ".join((*graph.find_shortest_chain(importer=b, imported=a), b))
            for a in graph.modules
            for b in graph.find_modules_directly_imported_by(a)
            if graph.find_shortest_chain(importer=b, imported=a)
        }
    )
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_public_names_are_unchanged():
    assert set(xl.__all__) == PUBLIC_NAMES
    for name in PUBLIC_NAMES | NAMESPACES:
        assert getattr(xl, name) is not None, name
    assert xl.sampling is importlib.import_module(api.NAMESPACES["sampling"])


def test_accessor_methods_are_unchanged():
    import xarray as xr

    da, ds = xr.DataArray([0.5, 0.5], dims="score"), xr.Dataset()
    public = {n for n in dir(da.likert) if not n.startswith("_")}
    assert public == ACCESSOR_METHODS
    assert {n for n in dir(ds.likert) if not n.startswith("_")} == ACCESSOR_METHODS | DATASET_ONLY


@pytest.mark.parametrize(
    "old",
    ["xlikert.construct", "xlikert.consensus_layer", "xlikert.constraint", "xlikert.collect.local",
     "xlikert.collect.server", "xlikert.collect.server.spec", "xlikert.design.scoring",
     "xlikert.report.sections.context_order", "xlikert.report.sections.cost"],
)  # fmt: skip
def test_no_old_import_path_before_the_first_release(old):
    """No shims before 0.1.0: a path that moved is gone (docs/development.md, "Renaming a
    public name", says how a rename is handled from 0.1.0 on)."""
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_no_shim_machinery():
    """No module finder, no ``_MOVED`` map, no rename decorator: a module-level
    ``__getattr__`` only loads the package's own sub-modules lazily."""
    assert not (PACKAGE / "_compat.py").exists()
    getattrs = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert not names & {"_MOVED", "moved_attribute", "renamed_keywords", "keyword_only"}, path
        getattrs += [
            path.relative_to(PACKAGE).as_posix()
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
        ]
    assert sorted(getattrs) == ["__init__.py", "kernels/__init__.py"]
    from xlikert.collect import protocol

    assert not hasattr(protocol, "CollectOptions")


def test_importing_the_package_warns_of_nothing():
    """The package itself uses only the new paths."""
    code = (
        "import warnings; warnings.simplefilter('error');"
        "import xlikert, xlikert.collect, xlikert.design, xlikert.report, xlikert.plot,"
        "xlikert.datasets, xlikert.cli, xlikert.collect.backends.transformers,"
        "xlikert.collect.backends.vllm, xlikert.collect.backends.openai"
    )
    with warnings.catch_warnings():
        run = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
        )
    assert run.returncode == 0, run.stderr[-2000:]


#: The most body lines (docstring excluded) of a function outside ``xlikert/kernels/``:
#: longer ones are numpy cores and thin wrappers, or well-named pieces (the kernels' hot
#: loops stay whole, for numba).
MAX_BODY_LINES = 60


def long_functions(root: Path, limit: int = MAX_BODY_LINES) -> list[str]:
    """``"path:function (N lines)"`` for each function under ``root`` (outside ``kernels``)
    whose body, docstring excluded, spans more than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "kernels" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if body and (n := body[-1].end_lineno - body[0].lineno + 1) > limit:
                found.append(f"{path.relative_to(root)}:{node.name} ({n} lines)")
    return found


def test_no_function_outside_the_kernels_is_longer_than_the_limit():
    """No function outside ``xlikert/kernels/`` has more than 60 body lines."""
    assert long_functions(PACKAGE) == []


def test_a_long_function_is_found(tmp_path):
    """The check counts body lines past the docstring, and leaves ``kernels/`` alone."""

    def lines(n: int) -> str:
        return "".join(f"    x{i} = {i}\n" for i in range(n))

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "hot.py").write_text(f"def loop():\n{lines(99)}", "utf-8")
    long, short = lines(MAX_BODY_LINES + 1), lines(MAX_BODY_LINES)
    (tmp_path / "mod.py").write_text(
        f'def long():\n    """Doc."""\n{long}\n\ndef short():\n    """Doc."""\n{short}', "utf-8"
    )
    assert long_functions(tmp_path) == [f"mod.py:long ({MAX_BODY_LINES + 1} lines)"]
