"""The registry of dimension roles (xlikert.core.dims): complete, and the one rule everywhere."""

from __future__ import annotations

import pytest
import xarray as xr
from support.pmfs import make_pmf

import xlikert as xl
from xlikert import sampling, subscale_composites
from xlikert.analysis.constraint import item_pmf_from_tokens
from xlikert.core import dims
from xlikert.core.errors import DesignError
from xlikert.datasets import synthetic_results


def test_the_names_the_design_notes_list_are_auxiliary():
    for name in ("rank", "temperature", "top_p", "effect", "slope", "pair", "trace", "subscale"):
        assert name in dims.AUXILIARY_DIMS
    assert set(dims.COLLECTION_DIMS) <= set(dims.AUXILIARY_DIMS)
    assert set(dims.DECODING_DIMS) <= set(dims.AUXILIARY_DIMS)
    assert set(dims.RESERVED_NAMES) == (
        set(dims.CORE_DIMS) | set(dims.AUXILIARY_DIMS) | set(dims.VARIABLE_NAMES)
    )


def _outputs():
    """Every dim and variable the library makes on a 2-factor design, by function."""
    pmf = make_pmf([2, 3], n_items=2, n_scores=3, seed=1).rename(f0="model", f1="target")
    pmf = pmf.assign_coords(size=("model", [1.0, 3.0]))
    s = xl.composite(pmf)
    dec = xl.decompose(pmf)
    out = {
        "composite": s,
        "consensus": xl.consensus_bounds(pmf),
        "dissension": xl.dissension_bounds(pmf),
        "entropy": xl.entropy(pmf),
        "tastle": xl.tastle_consensus(pmf),
        "summarize": xl.summarize(s, dim="score"),
        "contrast": xl.contrast(pmf, "target"),
        "trend": xl.trend(pmf, "model", values="size"),
        "moments": sampling.composite_moments(pmf),
        "se": sampling.standard_error(pmf, n=[10]),
        "subscales": subscale_composites(pmf, ["a", "b"]),
        "results": synthetic_results(n_items=2),
        "bias": sampling.decoding_bias(synthetic_results(n_items=2)),
        "tokens": item_pmf_from_tokens(
            xr.DataArray([[0.2, 0.3, 0.1]], dims=("item", "token"), coords={"token": list("123")}),
            {"1": 1, "2": 2, "3": 3},
        ),
    }
    for name, node in dec.children.items():
        out[f"decompose:{name}"] = node.to_dataset()
    return out, dec


def test_every_dim_the_library_makes_is_registered():
    """No output dim is left to be taken for a factor: each is core or auxiliary."""
    outputs, _ = _outputs()
    factors = {"model", "target"}
    for name, obj in outputs.items():
        for d in obj.dims:
            assert d in factors or d in dims.CORE_DIMS or d in dims.AUXILIARY_DIMS, (name, d)


def test_every_variable_the_library_writes_is_reserved():
    outputs, dec = _outputs()
    for name, obj in outputs.items():
        names = list(obj.data_vars) if isinstance(obj, xr.Dataset) else [obj.name]
        for v in names:
            if v is not None and v not in ("model", "target"):
                assert v in dims.RESERVED_NAMES, (name, v)
    assert "grand" in dims.RESERVED_NAMES  # a decomposition node next to the factor nodes
    table = sampling.flip_probability(make_pmf([2, 2]), n=[10])
    assert set(table.columns) <= set(dims.RESERVED_NAMES)
    summary = xl.summary_table(dec)
    assert set(summary.columns) <= set(dims.RESERVED_NAMES)


def test_every_variable_and_dim_of_the_collection_schema_is_registered():
    """dims.py derives the result variables from the schema; every dim the schema uses is
    a core or a collection dim."""
    from xlikert.core.schema import BOUND_VARIABLES, TRACE_VARIABLES, VARIABLES

    table = {**VARIABLES, **BOUND_VARIABLES, **TRACE_VARIABLES}
    assert set(table) <= set(dims.RESULT_VARIABLES)
    assert {d for v in table.values() for d in v.dims} - set(dims.CORE_DIMS) <= set(
        dims.COLLECTION_DIMS
    )


@pytest.mark.parametrize("name", ["n", "temperature", "E", "grand", "_x", "a:b", "a/b"])
def test_check_factor_name_rejects(name):
    with pytest.raises(DesignError, match=f"factor {name!r}: the name {name!r} is reserved"):
        dims.check_factor_name(name, where=f"factor {name!r}")


@pytest.mark.parametrize("name", ["model", "target", "prompt", "prompt_variant", "persona", "size"])
def test_check_factor_name_accepts(name):
    assert dims.check_factor_name(name, where="x") is None
    assert dims.reserved_role(name) is None


def test_factor_dims():
    pmf = make_pmf([2, 2], n_items=2).rename(f0="model", f1="target")
    assert dims.factor_dims(pmf) == ["model", "target"]
    assert dims.factor_dims(pmf, "target") == ["target"]
    assert dims.factor_dims(pmf.to_dataset()) == ["model", "target"]
    with pytest.raises(DesignError, match="factor 'nope' is not a dimension"):
        dims.factor_dims(pmf, ["nope"])
    with pytest.raises(DesignError, match="'item' is a core dimension"):
        dims.factor_dims(pmf, ["item"])
    se = sampling.standard_error(pmf, n=[10])
    assert dims.factor_dims(se, item_dim=None, score_dim=None, auxiliary=["n"]) == [
        "model",
        "target",
    ]
    with pytest.raises(DesignError, match="dim 'n' of the SE: the name 'n' is reserved"):
        dims.factor_dims(se, item_dim=None, score_dim=None, what="the SE")
    # a batch dim (not among the given factors) is checked too
    grid = pmf.expand_dims(n=[1])
    with pytest.raises(DesignError, match="'n'"):
        dims.factor_dims(grid, ["model"])


def test_the_property_test_draws_reserved_names_from_the_registry():
    from test_api_property import RESERVED

    assert all(dims.reserved_role(name) for name in RESERVED)


#: Modules where the string "model" is not the model factor: what the word names there.
MODEL_WORD_ELSEWHERE = {
    "xlikert/core/dims.py": "the registry itself (MODEL_DIM)",
    "xlikert/design/problems.py": "the noun of a [[models]] table in error messages",
    "xlikert/collect/run/identity.py": "the key of a cell identity's JSON (KEY_RULE)",
    "xlikert/collect/run/session.py": "the key of a cell identity's JSON",
    "xlikert/collect/run/reuse.py": "the part of a cell identity's JSON a reuse reason names",
    "xlikert/collect/backends/openai/contexts.py": "the vLLM request field",
    "xlikert/collect/backends/openai/elicit.py": "the OpenAI request field",
    "xlikert/collect/backends/openai/model.py": "the OpenAI request field",
    "xlikert/collect/backends/openai/plan.py": "the OpenAI request field",
    "xlikert/collect/backends/openai/spec.py": "the OpenAI request field, an entry key",
    "xlikert/collect/backends/vllm/model.py": "vllm.LLM's argument",
}


def test_the_model_factor_is_named_by_the_registry_only():
    """Code (docstrings aside) names the model factor by dims.MODEL_DIM, never by a literal."""
    import ast
    from pathlib import Path

    root = Path(xl.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docs = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        if any(
            isinstance(n, ast.Constant) and n.value == dims.MODEL_DIM and id(n) not in docs
            for n in ast.walk(tree)
        ):
            found.add(path.relative_to(root.parent).as_posix())
    assert found - set(MODEL_WORD_ELSEWHERE) == set()
    assert set(MODEL_WORD_ELSEWHERE) <= found  # an entry no longer needed goes
