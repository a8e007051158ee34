"""A helper used only inside its own module is private (issue 43, item 4).

A *module-local public helper* is a top-level function of ``xlikert/`` whose name has
no leading underscore, that no other module of the package names (as a name, an
attribute, an imported name or a string), and that is not public API on purpose:
not in ``xl.__all__``, not in the ``__all__`` of a documented public module
(:data:`PUBLIC_MODULES`), not in the API reference (``docs/api.rst``), not a command
of the command line. Such a helper gets a leading underscore. Measured by
:func:`module_local_public_helpers` on main before this rule: 61 (the issue's own count,
by a rule it did not state, was 54); after it: the 4 of :data:`ALLOWED`.

:data:`ALLOWED` lists the ones kept public, each with its reason; the test fails when a
new one appears (make it private, or give the reason here).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The modules whose ``__all__`` is public API (documented in the API reference, or the
#: shared seam of the tests and benchmarks: ``xlikert.testing.engines``).
PUBLIC_MODULES = (
    "xlikert",
    "xlikert.collect",
    "xlikert.datasets",
    "xlikert.design",
    "xlikert.core.dims",
    "xlikert.core.errors",
    "xlikert.core.io",
    "xlikert.kernels",
    "xlikert.plot",
    "xlikert.report",
    "xlikert.report.tables",
    "xlikert.core.schema",
    "xlikert.testing.engines",
)

#: Module-local public helpers kept public on purpose: name -> why.
ALLOWED: dict[str, str] = {
    "xlikert.analysis.context.conversation_reliability": "documented in docs/context.md",
    "xlikert.analysis.context.conversation_consensus": "documented in docs/context.md",
    "xlikert.design.file_schema.update_readme": "the development docs' command that "
    "regenerates the design README's tables (docs/development.md)",
    "xlikert.design.option_order.option_orders": "documented in docs/formats.md",
    "xlikert.collect.answers.tokens.known_scripts": "documented in docs/languages.md",
    "xlikert.collect.answers.vocabulary.show_bytes": "documented in docs/languages.md",
    "xlikert.collect.answers.vocabulary.token_bytes": "documented in docs/languages.md",
    "xlikert.collect.elicitation.parse_answer": "documented in docs/elicitation.md",
    "xlikert.collect.own_words.reply_tree": "documented in docs/elicitation.md",
    "xlikert.collect.own_words.sampler_probabilities": "documented in docs/elicitation.md",
    "xlikert.collect.stated.parse_stated": "documented in docs/elicitation.md",
    "xlikert.collect.stated.parse_stated_reply": "documented in docs/elicitation.md",
    "xlikert.collect.answers.walk.mass_bounds": "the walk's certified bounds as one formula, "
    "checked on its own in tests/collect/answers/test_label_walk.py",
    "xlikert.collect.stated.stated_user": "documented in docs/elicitation.md",
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.name.split(".")[-1])
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"[A-Za-z_][\w.:]*", node.value)  # getattr, lazy-import maps
        ):
            out.add(re.split(r"[.:]", node.value)[-1])
    return out


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        "command" in ast.unparse(d) or ast.unparse(d).startswith("click.")
        for d in node.decorator_list
    )


def _on_purpose(root: Path) -> set[str]:
    """Dotted names that are public API on purpose."""
    out: set[str] = set()
    for modname in PUBLIC_MODULES:
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError:  # a module another branch moved
            continue
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            out.add(f"{modname}.{name}")
            if getattr(obj, "__module__", None) and getattr(obj, "__name__", None):
                out.add(f"{obj.__module__}.{obj.__name__}")
    sampling = importlib.import_module("xlikert").sampling
    out |= {f"{getattr(getattr(sampling, n), '__module__', '')}.{n}" for n in sampling.__all__}
    api = root / "docs" / "api.rst"
    module = "xlikert"
    for line in api.read_text("utf-8").splitlines() if api.is_file() else []:
        if m := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = m.group(1)
        elif m := re.match(r"   ([A-Za-z_][\w.]*)$", line):
            dotted = f"{module}.{m.group(1)}"
            out.add(dotted)
            head, _, name = dotted.rpartition(".")
            try:
                obj = getattr(importlib.import_module(head), name)
            except (ModuleNotFoundError, AttributeError):
                continue
            if getattr(obj, "__module__", None):
                out.add(f"{obj.__module__}.{name}")
    return out


def module_local_public_helpers(root: Path = ROOT) -> list[str]:
    """Every module-local public helper of ``root/xlikert``, as a dotted name."""
    trees = {p: ast.parse(p.read_text("utf-8")) for p in sorted((root / "xlikert").rglob("*.py"))}
    used = {p: _names(t) for p, t in trees.items()}
    on_purpose = _on_purpose(root)
    found = []
    for path, tree in trees.items():
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name.startswith("_") or _is_command(node):
                continue
            if any(node.name in names for other, names in used.items() if other != path):
                continue
            dotted = f"{_module_name(path, root)}.{node.name}"
            if dotted not in on_purpose:
                found.append(dotted)
    return found


def test_no_module_local_public_helper():
    new = set(module_local_public_helpers()) - set(ALLOWED)
    assert not new, (
        f"public helpers used only in their own module ({len(new)}): make them private "
        "(a leading underscore) or say why in ALLOWED:\n  " + "\n  ".join(sorted(new))
    )


def test_the_measure_finds_a_module_local_helper(tmp_path):
    """The measure itself: a public function no other module names is found; one that
    another module imports, or that a public module's ``__all__`` lists, is not."""
    package = tmp_path / "xlikert"
    package.mkdir()
    (package / "a.py").write_text("def alone():\n    pass\n\n\ndef shared():\n    pass\n")
    (package / "b.py").write_text("from .a import shared\n")
    assert module_local_public_helpers(tmp_path) == ["xlikert.a.alone"]
