"""What every figure of a report shows as text: labels from the data as they are, the axes'
own tick labels as rendered mathtext (issue 43, "Figures that read").

The report is written with matplotlib's Agg renderer watched: every string it draws is
recorded with the flag that says whether it was typeset as mathtext, exactly as the
renderer got it. A level named ``a$b$c`` must be drawn as plain text ``a$b$c`` (not typeset
as math, which would show ``abc`` in italics), and a log axis's tick label
``$\\mathdefault{10^{-1}}$`` must be typeset (drawn as ``10⁻¹``, narrower than its source),
never drawn as its source.
"""

from __future__ import annotations

import html
import itertools
import re
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg

import xlikert as xl
from xlikert import plot, sampling
from xlikert.datasets import load_demo_results
from xlikert.report import page, write_report
from xlikert.report.tables import markdown_escape

#: Level names with a ``$`` pair (math for matplotlib if not escaped), HTML markup, and a
#: leading underscore (a legend drops such a label unless it is escaped).
MODELS = ["US $5 <img src=x>", "a$b$c", "_under"]
PARTIES = ["$D$", "R<img>"]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Write the demo report (levels renamed, two targets, human data by party) with the
    renderer watched: ``{figure: [(text, ismath, width_drawn, width_as_source)]}``."""
    ds = load_demo_results(verbose=False).isel(target=[0, 1])
    ds = ds.assign_coords(model=MODELS)
    rng = np.random.default_rng(0)
    items = [str(i) for i in ds["item"].values[:3]]
    people = pd.DataFrame({i: rng.integers(1, 8, 120) for i in items})
    people["party"] = rng.choice(PARTIES, 120)
    human = xl.human_pmf(people, items, scale=(1, 7), by=["party"])
    out = tmp_path_factory.mktemp("report") / "r"
    texts: dict[str, list[tuple[str, bool, float, float]]] = defaultdict(list)
    current = {"name": ""}
    draw_text, add_figure = RendererAgg.draw_text, page.Section.figure

    def watched_draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            drawn_w = self.get_text_width_height_descent(s, prop, ismath=ismath)[0]
            source_w = self.get_text_width_height_descent(s, prop, ismath=False)[0]
            texts[current["name"]].append((s, bool(ismath), drawn_w, source_w))
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    def named_figure(self, fig, out_dir, name, caption):
        current["name"] = name
        return add_figure(self, fig, out_dir, name, caption)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(RendererAgg, "draw_text", watched_draw_text)
        m.setattr(page.Section, "figure", named_figure)
        path = write_report(ds, out, human=human)
    return path, dict(texts)


def test_every_figure_is_drawn_and_named(drawn):
    path, texts = drawn
    pngs = {p.stem for p in (path.parent / "figures").glob("*.png")}
    assert set(texts) == pngs
    expected = {
        "failure_rate", "consensus", "composite_pmfs", "human_vs_llm", "main_effect_model",
        "main_effect_target", "interaction_model_target", "sampling_se", "flip_probability",
        "decoding_bias", "human_pmfs", "human_representativeness",
    }  # fmt: skip
    assert expected <= pngs, expected - pngs


def test_the_axes_tick_labels_are_typeset_as_mathtext(drawn):
    """A log axis's labels are mathtext that renders: typeset (``ismath``), and narrower
    than their source would be as text; no figure shows mathtext source as text."""
    _, texts = drawn
    for name, rows in texts.items():
        for s, ismath, width, source_width in rows:
            if ismath:
                assert width < 0.7 * source_width, (name, s, width, source_width)
            else:
                assert "\\mathdefault" not in s and "\\$" not in s and "$\\" not in s, (name, s)
    for name in ("failure_rate", "sampling_se", "flip_probability"):  # the log axes
        math = [s for s, ismath, *_ in texts[name] if ismath]
        assert any(re.fullmatch(r"\$\\mathdefault\{10\^\{-?\d+\}\}\$|\$10\^\{\d+\}\$", s)
                   for s in math), (name, math)  # fmt: skip


def test_a_label_with_dollars_and_markup_is_drawn_as_it_is(drawn):
    """Every label from the data is drawn as plain text, character for character."""
    _, texts = drawn
    for name, rows in texts.items():
        math = [s for s, ismath, *_ in rows if ismath]
        assert not any(level in s or "b$c" in s for s in math for level in MODELS), (name, math)
    plain = {name: [s for s, ismath, *_ in rows if not ismath] for name, rows in texts.items()}
    shows_models = set(texts) - {"flip_probability", "main_effect_target"}  # no model levels
    for name in shows_models:
        for level in MODELS:
            assert any(level in s for s in plain[name]), (name, level, plain[name])
    for name in ("human_pmfs", "human_representativeness"):
        for party in PARTIES:
            assert any(party in s for s in plain[name]), (name, party, plain[name])


def test_the_page_and_the_markdown_show_the_labels_as_text(drawn):
    path, _ = drawn
    page_html = path.read_text(encoding="utf-8")
    md = (path.parent / "report.md").read_text(encoding="utf-8")
    assert "<img src=x>" not in page_html and "<img>" not in page_html
    for label in [*MODELS, *PARTIES]:
        assert html.escape(label) in page_html, label
        assert markdown_escape(label) in md, label


def _tick_boxes(fig, ax):
    canvas = FigureCanvasAgg(fig)  # a standalone figure (plot.offscreen): Agg draws it
    canvas.draw()
    renderer = canvas.get_renderer()
    return [
        t.get_window_extent(renderer)
        for t in ax.get_xticklabels()
        if t.get_visible() and t.get_text().strip()
    ]


@pytest.mark.parametrize(
    "budgets",
    [(10, 100, 1000, 1_000_000), (10, 20, 50, 100, 200, 500, 1000), tuple(range(5, 100, 5))],
)
def test_the_sampling_noise_figure_x_labels_stand_apart(budgets):
    """The x tick labels of the SE figure do not run into one another, whatever the budgets."""
    pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=3)
    with plot.offscreen():
        fig = plot.standard_error(sampling.standard_error(pmf, n=list(budgets)))
    ax = fig.axes[0]
    boxes = sorted(_tick_boxes(fig, ax), key=lambda b: b.x0)
    assert len(boxes) >= 2
    for left, right in itertools.pairwise(boxes):
        assert left.x1 <= right.x0, (left, right)
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    if len(budgets) <= 8:  # the budgets themselves, as the SE table names them
        assert len(shown) == len(budgets)


def test_escape_keeps_text_as_text_and_leaves_math_on():
    """plot.text.escape: what matplotlib draws is the label, with math parsing left on."""
    from matplotlib.text import Text

    from xlikert.plot.text import escape

    assert matplotlib.rcParams["text.parse_math"]
    for label in ["a$b$c", "$\\x$", "US $5", "a\\$b", "_x", "plain"]:
        shown, ismath = Text(0, 0, escape(label))._preprocess_math(escape(label))
        assert not ismath and shown.lstrip("\u200b") == label
    with matplotlib.rc_context({"text.parse_math": False}):
        assert escape("a$b$c") == "a$b$c"  # nothing to escape: drawn as it is


@pytest.mark.parametrize(("low", "high", "fewest"), [(0.3, 1.8, 3), (0.05, 15.0, 3)])
def test_the_flip_figure_labels_its_log_axis_with_numbers_that_stand_apart(low, high, fewest):
    """Effects within two decades get 1-2-5 steps (a decades-only axis showed one label);
    wider ones keep the decades. Either way, several labels, none running into another."""
    e = np.geomspace(low, high, 12)
    flips = pd.DataFrame(
        {"n": 10, "E": np.r_[e, 0.0], "order": 1, "p_flip": np.linspace(0.5, 0.0, e.size + 1)}
    )
    with plot.offscreen():
        fig = plot.flip_probability(flips)
    ax = fig.axes[0]
    boxes = sorted(_tick_boxes(fig, ax), key=lambda b: b.x0)
    assert len(boxes) >= fewest, [t.get_text() for t in ax.get_xticklabels()]
    for left, right in itertools.pairwise(boxes):
        assert left.x1 <= right.x0, (left, right)


def test_figure_numbers_carry_a_true_minus_sign():
    """Numbers the figures write themselves use '−' as matplotlib's tick labels do."""
    import xarray as xr

    from xlikert.plot.text import number

    assert number(-0.5, "+.2f") == "\u22120.50" and number(0.5, "+.2f") == "+0.50"
    effect = xr.DataArray([[-1.5, 2.0], [0.25, -0.75]], dims=("a", "b"),
                          coords={"a": ["x", "y"], "b": ["u", "v"]})  # fmt: skip
    with plot.offscreen():
        fig = plot.interaction_heatmap(effect)
    cells = [t.get_text() for t in fig.axes[0].texts]
    assert "\u22121.50" in cells and "+2.00" in cells and not any("-" in c for c in cells)
