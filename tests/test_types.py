"""The type check: mypy reports no error on the package, and ``--strict`` none on three.

mypy runs twice, each with its own cache folder under ``.mypy_cache/`` (the strict run's
options would otherwise invalidate the plain run's cache at every turn):

* over the whole package with ``[tool.mypy]`` of pyproject.toml (which also holds
  :data:`STRICT` to the strict flags, so this one run guards them too);
* with ``--strict`` over the packages of :data:`STRICT`: the errors in their files (the
  modules they import are checked too, and their errors are another run's concern).

The pre-commit hooks run the same two checks (``python tests/test_types.py``), so a commit
and CI fail on the same error. The module also keeps the package free of private
reach-ins: no module reads another module's private attribute (``obj._name`` where
``_name`` is not defined in the reading module).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The packages held to ``mypy --strict``.
STRICT = ("xlikert.core", "xlikert.kernels", "xlikert.analysis")
ERROR = re.compile(r"^(xlikert/[^:]+\.py):\d+(?::\d+)?: error: .*$", flags=re.M)
#: Private attributes of foreign objects the package reads on purpose, with the reason.
FOREIGN_PRIVATE = {
    # xarray's lazily indexed backend array: ``.data`` would read the variable whole
    ("xlikert/collect/run/stream.py", "_data"),
}


def errors(output: str, under: tuple[str, ...] = ("xlikert",)) -> list[str]:
    """The error lines of mypy's ``output`` in files under the packages ``under``.

    >>> out = ("xlikert/core/io.py:3: error: Bad  [misc]\\n"
    ...        "xlikert/design/x.py:9:2: error: Worse  [misc]\\n"
    ...        "xlikert/core/io.py:4: note: A note\\n"
    ...        "Found 2 errors in 2 files (checked 3 source files)")
    >>> errors(out)
    ['xlikert/core/io.py:3: error: Bad  [misc]', 'xlikert/design/x.py:9:2: error: Worse  [misc]']
    >>> errors(out, ("xlikert.core",))
    ['xlikert/core/io.py:3: error: Bad  [misc]']
    """
    roots = tuple(name.replace(".", "/") + "/" for name in under)
    return [m.group(0) for m in ERROR.finditer(output) if m.group(1).startswith(roots)]


def run_mypy(*args: str) -> str:
    """mypy's output on ``args`` (raises if mypy itself failed rather than found errors)."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    if run.returncode not in (0, 1) or not re.search(
        r"^(Success|Found \d+ error)", run.stdout, re.M
    ):
        raise RuntimeError(
            f"mypy did not run ({run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
        )
    return run.stdout


def package_errors() -> list[str]:
    """mypy's errors over the whole package (``[tool.mypy]`` of pyproject.toml)."""
    return errors(run_mypy())


def strict_errors() -> list[str]:
    """``mypy --strict``'s errors in the files of :data:`STRICT`."""
    args = ["--strict", "--cache-dir", str(Path(".mypy_cache") / "strict")]
    return errors(run_mypy(*args, *(a for p in STRICT for a in ("-p", p))), STRICT)


def private_reach_ins(root: Path = ROOT / "xlikert") -> list[str]:
    """``path:line: expr`` of every read of another module's private attribute: an
    ``obj._name`` (``obj`` not ``self`` or ``cls``) whose ``_name`` the module does not
    define itself (as a function, a class, an attribute it sets, or a name it binds)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        own = {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)
        } | {
            n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
        } | {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        } | {
            n.target.id for n in ast.walk(tree)
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }  # fmt: skip
        rel = path.relative_to(root.parent).as_posix()
        for n in ast.walk(tree):
            if not (isinstance(n, ast.Attribute) and re.fullmatch(r"_[a-z]\w*", n.attr)):
                continue
            if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                continue
            if n.attr in own or (rel, n.attr) in FOREIGN_PRIVATE:
                continue
            found.append(f"{rel}:{n.lineno}: {ast.unparse(n)}")
    return found


def test_mypy_reports_no_error():
    found = package_errors()
    assert not found, f"{len(found)} mypy error(s):\n" + "\n".join(found[:200])


def test_mypy_strict_reports_no_error_on_core_kernels_and_analysis():
    found = strict_errors()
    assert not found, f"{len(found)} mypy --strict error(s):\n" + "\n".join(found[:200])


def test_no_module_reads_another_module_s_private_attributes():
    found = private_reach_ins()
    assert not found, "private attributes read across modules:\n" + "\n".join(found)


def test_a_private_reach_in_is_found(tmp_path):
    pkg = tmp_path / "xlikert"
    pkg.mkdir()
    (pkg / "a.py").write_text("class A:\n    def __init__(self):\n        self._pool = 1\n")
    (pkg / "b.py").write_text("def f(model):\n    return model._pool, model.pool\n")
    assert private_reach_ins(pkg) == ["xlikert/b.py:2: model._pool"]


if __name__ == "__main__":  # the pre-commit hooks: python tests/test_types.py [--strict]
    which = "--strict" in sys.argv[1:]
    lines = strict_errors() if which else package_errors()
    print("\n".join(lines) or "mypy: no error" + (f" (--strict on {', '.join(STRICT)})" * which))
    sys.exit(1 if lines else 0)
