"""One meaning per name (issue 32, item 3): the dimension arguments, the return types.

The convention is stated once, in :mod:`xlikert.core.dims`: ``dim`` = the dims an
operation reduces, ``by`` = the dims it keeps as groups, ``factors`` = the
design's factors of an analysis of the design. The old keywords are gone (no shims
before the first release): passing one is Python's ``TypeError``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xlikert as xl
from xlikert import plot, sampling

#: Names a dimension argument may no longer have (each renamed to dim, by or factors).
RETIRED = {"dims", "respondent_dims", "block_dims", "groups"}


def _public_functions():
    out = {n: getattr(xl, n) for n in xl.__all__ if inspect.isfunction(getattr(xl, n))}
    out |= {f"sampling.{n}": getattr(sampling, n) for n in sampling.__all__}
    out |= {f"plot.{n}": getattr(plot, n) for n in plot.__all__ if n != "OKABE_ITO"}
    return {k: v for k, v in out.items() if inspect.isfunction(v)}


@pytest.mark.parametrize("name", sorted(_public_functions()))
def test_no_public_function_takes_a_retired_dimension_name(name):
    params = set(inspect.signature(_public_functions()[name]).parameters)
    assert not params & RETIRED, f"{name}{inspect.signature(_public_functions()[name])}"


@pytest.mark.parametrize("method", ["marginal_slice", "silicon_population", "reliability"])
def test_accessor_signatures_repeat_the_functions(method):
    fn = inspect.signature(getattr(xl, method))
    acc = inspect.signature(getattr(xr.DataArray([0.5, 0.5], dims="score").likert, method))
    assert list(acc.parameters) == list(fn.parameters)[1:]


@pytest.fixture
def design() -> xr.DataArray:
    return xl.datasets.synthetic_pmf({"model": 2, "persona": 4}, n_items=3, scale=(1, 5))


@pytest.fixture
def human() -> xr.Dataset:
    rng = np.random.default_rng(3)
    t = pd.DataFrame(
        {
            "party": rng.choice(["D", "R"], 200),
            "edu": rng.choice(["lo", "hi"], 200),
            "q": rng.integers(1, 6, 200),
        }
    )
    return xl.human_pmf(t, ["q"], scale=(1, 5), by=["party", "edu"])


def _old_refused(old, new):
    """The old keyword is refused by name (``TypeError``); the result of the new one."""
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        old()
    return new()


def test_marginal_slice_keeps_by(design):
    comp = xl.composite(design)
    want = _old_refused(
        lambda: xl.marginal_slice(comp, dims="persona"),
        lambda: xl.marginal_slice(comp, by="persona"),
    )
    assert want.dims == ("persona", "score")  # kept, the model mixed over
    xr.testing.assert_identical(xl.marginal_slice(comp, "persona"), want)  # positional
    xr.testing.assert_identical(comp.likert.marginal_slice(by="persona"), want)
    with pytest.raises(TypeError):
        comp.likert.marginal_slice(dims="persona")


def test_human_marginal_and_silicon_population_reduce_dim(human):
    want = _old_refused(
        lambda: xl.human_marginal(human, dims="edu"), lambda: xl.human_marginal(human, dim="edu")
    )
    assert "edu" not in want.dims and "party" in want.dims  # edu pooled over, party kept
    model = xl.datasets.synthetic_pmf(
        {"model": 2, "party": ["D", "R"], "edu": ["hi", "lo"]}, n_items=1, scale=(1, 5)
    ).assign_coords(item=["q"])
    want = _old_refused(
        lambda: xl.silicon_population(model, human, dims="edu"),
        lambda: xl.silicon_population(model, human, dim="edu"),
    )
    assert "edu" not in want.dims and "party" in want.dims
    pooled = xl.human_marginal(human, dim="edu")
    xr.testing.assert_identical(human.likert.human_marginal(dim="edu"), pooled)
    xr.testing.assert_identical(model.likert.silicon_population(human, dim="edu"), want)
    with pytest.raises(TypeError):
        human.likert.human_marginal(dims="edu")
    with pytest.raises(TypeError):
        model.likert.silicon_population(human, dims="edu")


def test_human_pmf_keeps_by():
    t = pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]})
    want = _old_refused(
        lambda: xl.human_pmf(t, ["q"], scale=(1, 2), groups=["g"]),
        lambda: xl.human_pmf(t, ["q"], scale=(1, 2), by=["g"]),
    )
    assert want.pmf.dims == ("g", "item", "score")
    xr.testing.assert_identical(xl.human_pmf(t, ["q"], scale=(1, 2), by="g"), want)
    want = _old_refused(
        lambda: xl.human_composite(t, ["q"], scale=(1, 2), groups=["g"]),
        lambda: xl.human_composite(t, ["q"], scale=(1, 2), by=["g"]),
    )
    assert want.pmf.dims == ("g", "score")


def test_reliability_draws_respondents_from_dim(design):
    want = _old_refused(
        lambda: xl.reliability(design, respondent_dims="persona"),
        lambda: xl.reliability(design, dim="persona"),
    )
    assert want.alpha.dims == ("model",)  # persona reduced: one population per model
    xr.testing.assert_identical(design.likert.reliability(dim="persona"), want)


def test_comonotone_contrast_mixes_over_dim(design):
    terms = xl.composite(design).rename(model="term")
    want = _old_refused(
        lambda: xl.comonotone_contrast(terms, [1, -1], block_dims=["persona"]),
        lambda: xl.comonotone_contrast(terms, [1, -1], dim="persona"),
    )
    assert want.dims == ("effect",)


def test_consensus_returns_one_type_and_the_bounds_have_their_function(design):
    value = xl.consensus(design, tol=1e-6)
    assert isinstance(value, xr.DataArray) and value.name == "consensus"
    ds = xl.consensus_bounds(design, tol=1e-6)
    assert isinstance(ds, xr.Dataset)
    assert sorted(ds.data_vars) == ["consensus", "error", "lower", "upper"]
    xr.testing.assert_identical(ds["consensus"], value)
    with pytest.raises(TypeError, match="bounds"):
        xl.consensus(design, tol=1e-6, bounds=True)
    dsn = xl.dissension_bounds(design, tol=1e-6)
    xr.testing.assert_allclose(dsn["dissension"], 1 - value)
    xr.testing.assert_identical(xl.dissension(design, tol=1e-6), dsn["dissension"])
    with pytest.raises(TypeError, match="bounds"):
        xl.dissension(design, tol=1e-6, bounds=True)
    # the accessor likewise
    xr.testing.assert_identical(design.likert.consensus_bounds(tol=1e-6), ds)
    with pytest.raises(TypeError, match="bounds"):
        design.likert.consensus(tol=1e-6, bounds=True)
    xr.testing.assert_identical(design.likert.dissension_bounds(tol=1e-6), dsn)


def test_flip_probability_carries_batch_dims(design):
    """factors= names the design; every other dim is a batch dim carried along."""
    batch = xl.datasets.synthetic_pmf({"model": 2, "seed": 2, "persona": 3}, n_items=2)
    flips = sampling.flip_probability(batch, n=[10], factors=["model", "persona"])
    assert "seed" in flips.columns
    for level in batch["seed"].values:
        one = sampling.flip_probability(batch.sel(seed=level), n=[10])
        mine = flips[flips["seed"] == level].drop(columns="seed").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, one, check_dtype=False)


# ----------------------------------------------------------------- one home, one registry
def _code_strings(path):
    """Every string constant of a module's code (docstrings left out)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_no_factor_name_is_written_into_analysis_report_or_plot_code():
    """Factor names come from the data; the model factor's name from xlikert.core.dims."""
    from pathlib import Path

    root = Path(xl.__file__).parent
    files = [*(root / "analysis").rglob("*.py"), *(root / "report").rglob("*.py")]
    files += [*(root / "plot").rglob("*.py")]
    names = {"model", "target", "prompt", "persona", "party", "USA"}
    found = [
        f"{p.relative_to(root)}:{line}: {value!r}"
        for p in files
        for line, value in _code_strings(p)
        if value in names
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("module", "name", "home"),
    [
        ("xlikert.report.tables", "aggregate_vs_factorial", "xlikert.analysis.construct"),
        ("xlikert.report.tables", "interaction_node", "xlikert.analysis.construct"),
        ("xlikert.report.tables", "failure_summary", "xlikert.analysis.constraint"),
        ("xlikert.report.tables", "consensus_entropy", "xlikert.analysis.consensus"),
        ("xlikert.report.tables", "human_vs_llm", "xlikert.analysis.human"),
        ("xlikert.report.tables", "mixture_moments", "xlikert.analysis.sampling"),
        (
            "xlikert.report.sections.reliability",
            "reliability_table",
            "xlikert.analysis.reliability",
        ),
        ("xlikert.report.sections.alignment", "alignment_table", "xlikert.analysis.alignment"),
        ("xlikert.report.sections.formats", "variance_shares", "xlikert.analysis.construct"),
        ("xlikert.analysis.construct.summary", "summary_table", "xlikert.analysis.construct"),
        ("xlikert.analysis.sampling.flips", "flip_table", "xlikert.analysis.sampling.tables"),
        (
            "xlikert.analysis.sampling.decoding",
            "decoding_bias_table",
            "xlikert.analysis.sampling.tables",
        ),
        ("xlikert.analysis.sampling.tables", "level_frame", "xlikert.analysis.frames"),
        ("xlikert.report", "synthetic_results", "xlikert.datasets"),
        ("xlikert.report", "load_demo_results", "xlikert.datasets"),
    ],
)
def test_a_table_or_dataset_has_one_home_and_not_its_old_one(module, name, home):
    import importlib

    old = importlib.import_module(module)
    assert not hasattr(old, name)
    assert name in importlib.import_module(home).__all__


def test_report_tables_module_only_renders():
    from xlikert.report import tables

    assert set(tables.__all__) == {
        "MARKDOWN_SPECIAL", "export", "latex_escape", "markdown_code", "markdown_escape",
        "to_html", "to_latex", "to_markdown",
    }  # fmt: skip


def test_mixture_moments_reduces_dim():
    m = xr.DataArray([0.0, 2.0], dims="a")
    v = xr.DataArray([1.0, 1.0], dims="a")
    want = _old_refused(
        lambda: sampling.mixture_moments(m, v, dims=["a"]),
        lambda: sampling.mixture_moments(m, v, dim="a"),
    )
    assert float(want["var"]) == 2.0


def test_mixtures_carry_the_subscales_of_a_composite():
    """grand_mixture and marginal_slice mix the design's factors; a composite's subscale dim
    is carried along (one mixture per subscale), as decompose carries it."""
    pmf = xl.datasets.synthetic_pmf({"model": 2, "persona": 3}, n_items=4, scale=(1, 5))
    comp = xl.composite(pmf.assign_coords(subscale=("item", ["A", "A", "B", "B"])))
    assert xl.grand_mixture(comp).dims == ("subscale", "score")
    sliced = xl.marginal_slice(comp, by="persona")
    assert sliced.dims == ("persona", "subscale", "score")
    for name in ("A", "B"):
        one = comp.sel(subscale=name)
        xr.testing.assert_allclose(sliced.sel(subscale=name), xl.marginal_slice(one, "persona"))
