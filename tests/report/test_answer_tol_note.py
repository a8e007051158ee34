"""A walk budget that cannot meet ``answer_tol``: the bound reached is stored, and the run's
summary (``xlikert run``) and the report say so, naming the cells and their bounds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from click.testing import CliRunner
from support.tiny import save_word_tiny

from xlikert.cli import main
from xlikert.core.io import open_results
from xlikert.report import write_report

LABELS = ["No", "Nay", "Meh", "Ok", "Aye", "Yes", "Y"]  # "Y" is read at the first level


def test_a_budget_that_cannot_meet_answer_tol_is_stored_and_said(tmp_path):
    folder = save_word_tiny(tmp_path / "model", LABELS)
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "budget"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA"]\n\n'
        f"[collect]\nanswer_labels = {LABELS!r}\nanswer_tol = 1e-9\nanswer_max_passes = 8\n\n"
        f'[[models]]\nname = "tiny"\nsource = "{folder}"\n'
    )
    out = tmp_path / "r.nc"
    with pytest.warns(RuntimeWarning, match=r"did not meet answer_tol=1e-09 .*answer_max_passes=8"):
        res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    ds = open_results(out)
    assert (ds.answer_tol_met == 0).all() and (ds.answer_passes >= 8).all()
    err = ds.answer_error.values
    assert (err > 1e-9).all()  # the bound reached, not the one asked
    # the stored interval is that bound: no PMF wider apart than it
    assert np.nanmax((ds.pmf_upper - ds.pmf_lower).values) <= np.nanmax(err) + 1e-12
    n = int(ds.answer_tol_met.size)
    assert f"warning: {n} of {n} cells read by the labels' walk did not meet answer_tol" in (
        res.output
    )
    worst = ds.answer_error.where(ds.answer_error == ds.answer_error.max(), drop=True)
    item = str(worst["item"].values.ravel()[0])
    assert f"item={item!r}" in res.output and f"{float(worst.max()):.3g}" in res.output
    page = (write_report(out, tmp_path / "report").parent / "report.md").read_text()
    assert "Word answers read within a bound." in page and f"item={item!r}" in page
