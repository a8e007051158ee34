"""One meaning per name (issue 43, item 4): the collisions the release review found stay gone.

* ``context`` is sequential administration (``collect/context/``,
  ``analysis/context.py``); the report's bundle is :class:`ReportInputs`.
* ``options`` is the run's configuration (:class:`CollectOptions`); an item's answer
  options' labels are ``labels_by_score`` and ``nonsubstantive_labels``, and what a
  results file records of them is its scale (``ITEM_SCALE_VARIABLES``).
* ``engine`` is what runs a model (vLLM, llama.cpp, transformers); numba or numpy is
  a call's ``kernels``.
* ``xl.sampling`` is the module :mod:`xlikert.analysis.sampling`.
* Every dim name constant is defined in :mod:`xlikert.core.dims`.

Across the whole package (issue 49, deliverable 5), a public module-level name means one
thing: :func:`defined_twice` lists every public name defined (``def``, ``class``,
assignment) at the top of two or more modules, and the test fails on any not in
:data:`SAME_MEANING` (one meaning, written in each module for a stated reason) or
:data:`PENDING`. A name imported from another module and re-exported is the same
object, so it is not a second definition; nor is ``NAME = module.NAME``. Private names
(``_x``) are module-local: ``tests/test_architecture.py`` keeps them from crossing
modules.
"""

from __future__ import annotations

import ast
import inspect
import shutil
from collections.abc import Iterator
from pathlib import Path

import xlikert as xl
from xlikert import api, kernels
from xlikert.core import dims

ROOT = Path(__file__).resolve().parents[1]

#: Public names defined in several modules with one meaning: name -> the modules.
SAME_MEANING: dict[str, frozenset[str]] = {
    # The backend protocol (xlikert.collect.protocol.Backend; DESIGN.md section 6): each
    # backend package defines the same functions and says, in the same names, which
    # model-entry keys it takes and how it reads its numbers.
    **dict.fromkeys(
        ("check", "check_elicitation", "inputs", "open"),
        frozenset({
            "xlikert.collect.backends.openai",
            "xlikert.collect.backends.transformers",
            "xlikert.collect.backends.vllm",
        }),
    ),
    "KEYS": frozenset({"xlikert.collect.backends.transformers", "xlikert.collect.backends.vllm.model"}),
    "READOUT": frozenset(
        {"xlikert.collect.backends.transformers.loading", "xlikert.collect.backends.vllm.model"}
    ),
    # xlikert.collect.load_model is the transformers backend's, imported when called (so
    # that importing xlikert.collect does not import torch).
    "load_model": frozenset(
        {"xlikert.collect", "xlikert.collect.backends.transformers.loading"}
    ),
    # The numpy core (xlikert.kernels) and its xarray wrapper: one quantity.
    "consensus_bounds": frozenset(
        {"xlikert.analysis.consensus.multivariate", "xlikert.kernels.consensus"}
    ),
    "noise_ceiling": frozenset({"xlikert.analysis.alignment.estimate", "xlikert.kernels.alignment"}),
    # xlikert.plot mirrors xlikert.analysis: plot.<name> draws what the analysis <name>
    # computes (the plot module's table lists them).
    "consensus": frozenset({"xlikert.analysis.consensus.multivariate", "xlikert.plot.consensus"}),
    "decoding_bias": frozenset({"xlikert.analysis.sampling.decoding", "xlikert.plot.sampling"}),
    "failure_rate": frozenset({"xlikert.analysis.constraint", "xlikert.plot.constraint"}),
    "flip_probability": frozenset({"xlikert.analysis.sampling.flips", "xlikert.plot.sampling"}),
    "human_vs_llm": frozenset({"xlikert.analysis.human.baseline", "xlikert.plot.human"}),
    "representativeness": frozenset(
        {"xlikert.analysis.alignment.metrics", "xlikert.plot.alignment"}
    ),
    "standard_error": frozenset({"xlikert.analysis.sampling.moments", "xlikert.plot.sampling"}),
}  # fmt: skip

#: Collisions left for after the merge of concurrent work: a name whose rename edits files
#: being refactored at the same time waits here, with the rename it gets (none now).
PENDING: dict[str, frozenset[str]] = {}


def test_every_dim_name_constant_is_defined_in_dims():
    outside = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {target.id}"
        for path in sorted((ROOT / "xlikert").rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "xlikert/core/dims.py"
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id.lstrip("_").endswith("_DIM")
    ]
    assert not outside, "dim names defined outside xlikert/core/dims.py:\n" + "\n".join(outside)
    for name in ("ADMINISTRATION_DIM", "SUBSCALE_DIM", "OTHER_ITEM_DIM", "OTHER_SCORE_DIM"):
        assert name in dims.__all__


def test_no_public_function_calls_numba_or_numpy_an_engine():
    functions = {**api.exports(), "use_kernels": kernels.use_kernels}
    functions.update({f"sampling.{n}": getattr(xl.sampling, n) for n in xl.sampling.__all__})
    takes = [
        name
        for name, fn in functions.items()
        if callable(fn) and not inspect.isclass(fn)
        if "engine" in inspect.signature(fn).parameters
    ]
    assert not takes, takes
    assert "kernels" in inspect.signature(xl.composite).parameters
    assert not {"use_engine", "get_engine", "set_engine", "ENGINES"} & set(dir(kernels))


def test_the_report_s_bundle_is_not_a_context():
    from xlikert import report

    assert not any("context" in name.lower() for name in dir(report) if "Report" in name)
    assert report.inputs.ReportInputs.__name__ == "ReportInputs"


def test_collect_options_name_no_item_options():
    from xlikert.collect import CollectOptions

    assert not [f for f in dir(CollectOptions) if f.startswith("option")]


def test_an_items_options_are_its_scale_not_options():
    """An item's answer options are its scale (:data:`~xlikert.core.schema.ITEM_SCALE_VARIABLES`),
    a survey column's non-substantive codes are ``nonsubstantive_codes``."""
    from xlikert.analysis.human.inputs import read_answers
    from xlikert.core import schema

    assert "options" not in inspect.signature(read_answers).parameters
    assert not [n for n in dir(schema) if "option" in n.lower()]
    assert "option_label" in schema.ITEM_SCALE_VARIABLES


def test_xl_sampling_is_the_module_of_its_name():
    assert xl.sampling.__name__ == "xlikert.analysis.sampling"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(body: list[ast.stmt]) -> Iterator[str]:
    """The names a module body binds by ``def``, ``class`` or assignment (inside a
    top-level ``if`` or ``try`` too), less ``NAME = module.NAME`` (a re-export)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            reexport = value.attr if isinstance(value, ast.Attribute) else None
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id != reexport:
                        yield name.id
        elif isinstance(node, ast.If | ast.Try):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)
            yield from _top_level(getattr(node, "finalbody", []))


def defined_twice(package: Path) -> dict[str, frozenset[str]]:
    """Every public name defined at the top of two or more modules under ``package``.

    Parameters
    ----------
    package : pathlib.Path
        The package's folder (its ``.py`` files are parsed, not imported).

    Returns
    -------
    dict of str to frozenset of str
        Name -> the dotted names of the modules defining it.
    """
    where: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package.parent)
        for name in _top_level(ast.parse(path.read_text("utf-8")).body):
            if not name.startswith("_"):
                where.setdefault(name, set()).add(module)
    return {name: frozenset(mods) for name, mods in sorted(where.items()) if len(mods) > 1}


def unexplained(found: dict[str, frozenset[str]], known: dict[str, frozenset[str]]) -> list[str]:
    """What the one-meaning test fails on: a name defined twice and not ``known`` with
    exactly these modules, and a ``known`` name that is no longer defined twice."""
    new = [
        f"{name}: defined in {', '.join(sorted(mods))}"
        for name, mods in found.items()
        if known.get(name) != mods
    ]
    gone = [f"{name}: no longer defined twice (remove it)" for name in known if name not in found]
    return new + gone


def test_every_name_defined_in_two_modules_has_one_meaning():
    problems = unexplained(defined_twice(ROOT / "xlikert"), SAME_MEANING | PENDING)
    assert not problems, (
        "a public name defined in two modules must mean one thing: rename one of them, or "
        "re-export the same object (from .x import name); names of one meaning written "
        "in several modules are listed in SAME_MEANING with the reason:\n" + "\n".join(problems)
    )


def test_a_name_defined_in_two_modules_fails_the_check(tmp_path):
    """The check on a small package: a collision is found, a re-export is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import read\nfrom . import a\nCOUNT = a.COUNT\n")
    (pkg / "a.py").write_text("COUNT = 1\n_helper = 0\n\ndef read():\n    return COUNT\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\n_helper = 1\nif TYPE_CHECKING:\n    class read: ...\n"
    )
    found = defined_twice(pkg)
    assert found == {"read": frozenset({"pkg.a", "pkg.sub.b"})}
    assert unexplained(found, {}) == ["read: defined in pkg.a, pkg.sub.b"]
    assert unexplained(found, {"read": frozenset({"pkg.a", "pkg.sub.b"})}) == []
    assert unexplained({}, {"read": frozenset({"pkg.a"})}) == [
        "read: no longer defined twice (remove it)"
    ]


def test_the_package_with_an_added_collision_fails_the_check(tmp_path):
    """The package itself, copied, with one more module defining a name it already has."""
    copy = tmp_path / "xlikert"
    shutil.copytree(
        ROOT / "xlikert",
        copy,
        ignore=lambda folder, names: [
            n for n in names if not n.endswith(".py") and not (Path(folder) / n).is_dir()
        ],
    )
    (copy / "report" / "extra.py").write_text("def summary_table(dec):\n    return dec\n")
    (copy / "plot" / "extra.py").write_text("from ..analysis import failure_rate\n")
    known = SAME_MEANING | PENDING
    before = unexplained(defined_twice(ROOT / "xlikert"), known)
    after = unexplained(defined_twice(copy), known)
    assert [p for p in after if p not in before] == [
        "summary_table: defined in xlikert.analysis.construct.tables, xlikert.report.extra"
    ]
