"""The report fits the design (issue 53): a composite only where the instrument defines one,
sections chosen by name, and figures that hold for one group and for hundreds of levels.

Every figure a report draws is checked (:mod:`support.figures`): no axes collapsed, no legend
of more than 12 entries, no layout matplotlib gave up on; on designs of 1, 2 and 300 levels.
Where Chromium is installed, the pages are also read as it renders them.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support.browser import chromium, rendered_dom
from support.figures import MAX_LEGEND, watch_figures

import xlikert as xl
from xlikert.core.errors import ConfigError
from xlikert.datasets import synthetic_results
from xlikert.report import section_names, write_report

#: Two standalone questions on scales of their own (the GSS's happiness and attendance).
SUPPORTS = {"happy": (1, 3), "attend": (0, 8)}
#: A model name as long as a real one: its legend must not squeeze the panels away.
LONG = "Qwen2.5-0.5B-Instruct-Q4_K_M-offline"
COMPOSITE_TITLES = ("Construct", "Reliability", "The cost of generative sampling")


def standalone(levels: int, seed: int = 0) -> tuple[xr.Dataset, xr.Dataset]:
    """Results of the two standalone items for two models and ``levels`` respondents, and
    human PMFs of one group (no group attribute)."""
    rng = np.random.default_rng(seed)
    items, axis = list(SUPPORTS), np.arange(0, 9)
    pmf = np.zeros((2, levels, 2, axis.size))
    for j, (lo, hi) in enumerate(SUPPORTS.values()):
        pmf[:, :, j, lo : hi + 1] = rng.dirichlet(np.ones(hi - lo + 1), size=(2, levels))
    ds = xr.Dataset(
        {"pmf": (("model", "respondent", "item", "score"), pmf),
         "valid_mass": (("model", "respondent", "item"), rng.uniform(0.6, 0.9, (2, levels, 2)))},
        coords={"model": [LONG, "m2"], "respondent": [f"r{i:03d}" for i in range(levels)],
                "item": items, "score": axis,
                "score_min": ("item", [lo for lo, _ in SUPPORTS.values()]),
                "score_max": ("item", [hi for _, hi in SUPPORTS.values()])},
        attrs={"instrument": "gss"},
    )  # fmt: skip
    people = pd.DataFrame({i: rng.integers(lo, hi + 1, 200) for i, (lo, hi) in SUPPORTS.items()})
    return ds, xl.human_pmf(people, items, scale=SUPPORTS)


def one_scale(levels: int) -> xr.Dataset:
    """Results of three items on one scale (a composite) for two models and ``levels``
    respondents."""
    models = {LONG: ("China", 0.5), "m2": ("USA", 1.0)}
    targets = [f"r{i:03d}" for i in range(levels)]
    return synthetic_results(models, targets=targets, n_items=3, seed=1).rename(target="respondent")


def written(tmp_path, ds, **kw):
    """The report of ``ds`` with every figure checked: (index.html, {figure: faults})."""
    with watch_figures() as figs, warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "constrained_layout not applied"
        path = write_report(ds, tmp_path, **kw)
    return path, figs


def headings(html: str) -> list[str]:
    return re.findall(r"<h2[^>]*>([^<]+)</h2>", html)


@pytest.fixture(scope="module", params=[1, 2, 300], ids=lambda n: f"{n}-levels")
def standalone_report(request, tmp_path_factory):
    ds, human = standalone(request.param)
    return written(tmp_path_factory.mktemp(f"standalone{request.param}"), ds, human=human)


@pytest.fixture(scope="module", params=[1, 2, 300], ids=lambda n: f"{n}-levels")
def one_scale_report(request, tmp_path_factory):
    return written(tmp_path_factory.mktemp(f"scale{request.param}"), one_scale(request.param))


def test_standalone_items_get_no_composite_and_a_note_saying_why(standalone_report):
    path, figs = standalone_report
    html = path.read_text(encoding="utf-8")
    heads = headings(html)
    assert "Alignment with human respondents" in heads and "Consensus" in heads
    for title in COMPOSITE_TITLES:
        assert title not in " ".join(heads), heads
    assert "No composite: the items are on scales of their own (happy 1..3, attend 0..8)" in html
    assert "the per-item sections (failure rate, Consensus per item" in html
    assert not {"composite_pmfs", "sampling_se"} & set(figs)
    assert not (path.parent / "tables" / "effects.csv").exists()


def test_every_figure_holds_on_standalone_items(standalone_report):
    _, figs = standalone_report
    assert "human_pmfs" in figs and "consensus" in figs
    assert {k: v for k, v in figs.items() if v} == {}


def test_every_figure_holds_on_a_composite(one_scale_report):
    path, figs = one_scale_report
    assert "Construct: composite scores and distributional ANOVA" in headings(
        path.read_text(encoding="utf-8")
    )
    assert {"composite_pmfs", "consensus", "sampling_se"} <= set(figs)
    assert {k: v for k, v in figs.items() if v} == {}


def test_the_checker_sees_a_legend_per_person_and_a_collapsed_panel():
    """The checks can fail: a legend of 13 entries and a figure squeezed by its legend."""
    from matplotlib.figure import Figure
    from support.figures import figure_faults

    fig = Figure(figsize=(3, 2), layout="constrained")
    ax = fig.subplots()
    for k in range(MAX_LEGEND + 1):
        ax.plot([0, 1], [k, k], label=f"person {k}")
    fig.legend(loc="outside right upper")
    assert f"a legend of {MAX_LEGEND + 1} entries (at most {MAX_LEGEND})" in figure_faults(fig)
    fig = Figure(figsize=(2, 2), layout="constrained")
    fig.subplots().plot([0, 1], [0, 1], label="x" * 80)
    fig.legend(loc="outside right upper")
    assert any("constrained_layout" in f or "collapsed" in f for f in figure_faults(fig))


def test_sections_are_chosen_by_name_and_an_unknown_name_is_refused(tmp_path):
    ds = one_scale(2)
    path = write_report(ds, tmp_path / "few", sections=["design", "consensus"], figures=False)
    assert headings(path.read_text(encoding="utf-8")) == ["Design", "Consensus"]
    path = write_report(ds, tmp_path / "less", skip=["construct", "sampling_cost"], figures=False)
    heads = headings(path.read_text(encoding="utf-8"))
    assert "Consensus" in heads and not any(h.startswith("Construct") for h in heads)
    assert "The cost of generative sampling" not in heads
    with pytest.raises(ConfigError, match=r"unknown report section\(s\) \['composite'\]: the "
                       r"sections are \['design', 'constraint', "):  # fmt: skip
        write_report(ds, tmp_path / "bad", skip=["composite"])
    assert not (tmp_path / "bad").exists()
    assert next(iter(section_names())) == "design"


def test_cli_report_sections_and_skip(tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main

    nc = tmp_path / "r.nc"
    xl.to_netcdf(one_scale(2), nc)
    run = CliRunner().invoke
    res = run(main, ["report", str(nc), "-o", str(tmp_path / "a"), "--no-figures",
                     "--sections", "design, constraint"])  # fmt: skip
    assert res.exit_code == 0, res.output
    html = (tmp_path / "a" / "index.html").read_text(encoding="utf-8")
    assert headings(html) == ["Design", "Constraint: failure rate"]
    res = run(main, ["report", str(nc), "-o", str(tmp_path / "b"), "--skip", "nope"])
    assert res.exit_code != 0 and "unknown report section(s) ['nope']" in res.output
    assert "'scale_reliability'" in res.output


def _rendered(path, figs, composite: bool) -> None:
    """The page as headless Chromium renders it: a composite section or the note saying why
    there is none, and every figure an image the page links, its file there."""
    dom = rendered_dom(path)
    heads = headings(dom)
    assert any(h.startswith("Construct") for h in heads) == composite, heads
    assert ("No composite: the items are on scales of their own" in dom) != composite
    images = re.findall(r'<img src="([^"]+)"', dom)
    assert sorted(i.removeprefix("figures/").removesuffix(".png") for i in images) == sorted(figs)
    assert all((path.parent / i).is_file() for i in images)


@pytest.mark.skipif(chromium() is None, reason="no Chromium (apt-get install chromium)")
def test_the_standalone_report_renders_in_chromium(standalone_report):
    _rendered(*standalone_report, composite=False)


@pytest.mark.skipif(chromium() is None, reason="no Chromium (apt-get install chromium)")
def test_the_composite_report_renders_in_chromium(one_scale_report):
    _rendered(*one_scale_report, composite=True)
