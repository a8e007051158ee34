"""One meaning per name (issue 43, item 4): the collisions the release review found stay gone.

* ``context`` is sequential administration (``collect/context/``,
  ``analysis/context.py``); the report's bundle is :class:`ReportInputs`.
* ``options`` is the run's configuration (:class:`CollectOptions`); an item's answer
  options' labels are ``labels_by_score`` and ``nonsubstantive_labels``.
* ``engine`` is what runs a model (vLLM, llama.cpp, transformers); numba or numpy is
  a call's ``kernels``.
* ``xl.sampling`` is the module :mod:`xlikert.analysis.sampling`.
* Every dim name constant is defined in :mod:`xlikert.core.dims`.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import xlikert as xl
from xlikert import api, kernels
from xlikert.core import dims

ROOT = Path(__file__).resolve().parents[1]


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


def test_xl_sampling_is_the_module_of_its_name():
    assert xl.sampling.__name__ == "xlikert.analysis.sampling"
