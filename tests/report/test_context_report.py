"""Section "Context and order": written for sequential results, absent without them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.datasets import synthetic_results
from xlikert.report import write_report


@pytest.fixture(scope="module")
def sequential_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctxreport")
    model = save_tiny(root / "model")
    prompts = tiny_prompts(n_targets=2, n_items=3).expand_dims(
        administration=["isolated", "sequential"]
    )
    ds = collect(prompts, [{"name": "tiny", "source": str(model)}], root / "r.nc",
                 progress=False, top_k=3)  # fmt: skip
    return ds, root


def test_the_section_compares_isolation_and_shows_bounds_and_carry_over(sequential_results):
    ds, root = sequential_results
    out = write_report(root / "r.nc", root / "report", figures=False).parent
    text = (out / "report.md").read_text()
    assert "## Context and order" in text and "the sequential PMFs are exact" in text
    tables = out / "tables"
    iso = pd.read_csv(tables / "context_isolated_vs_sequential.csv")
    seq = ds.sel(model="tiny", administration="sequential")
    mean = (seq.pmf * seq.score).sum("score").mean("target")
    np.testing.assert_allclose(iso["E_sequential"], mean.values, atol=1e-9)
    bounds = pd.read_csv(tables / "context_bounds.csv")
    assert bounds["passes"].tolist() == [57, 57] and (bounds["tol_met"] == "yes").all()
    carry = pd.read_csv(tables / "context_carry_over.csv")
    assert carry[["earlier", "later"]].astype(str).values.tolist() == [["1", "2"], ["2", "3"]]
    # E[Y_2 | Y_1 = 1] from the stored joint of the first target
    j = seq.context_joint.isel(target=0).sel(item="1", other_item="2").isel(score=0)
    want = float((j * j.other_score).sum() / j.sum())
    assert carry.loc[0, "after 1"] == pytest.approx(want, abs=5e-3)  # the table's 2 digits


def test_no_sequential_data_no_section_and_no_files(tmp_path):
    out = write_report(synthetic_results(n_items=4, seed=1), tmp_path / "r", figures=False).parent
    assert "Context and order" not in (out / "report.md").read_text()
    assert not list((out / "tables").glob("context_*"))
