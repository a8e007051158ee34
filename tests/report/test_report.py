"""The report: any design, tables in the paper's layout, netCDF from another process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from click.testing import CliRunner

import xlikert as xl
from xlikert import sampling
from xlikert.analysis.human import human_vs_llm
from xlikert.cli import main
from xlikert.datasets import human_baseline, load_demo_results, synthetic_pmf, synthetic_results
from xlikert.report import tables, write_report
from xlikert.report.layout import paper_layout


def _results_from(pmf: xr.DataArray) -> xr.Dataset:
    rng = np.random.default_rng(0)
    valid = xr.DataArray(
        1 - 10 ** rng.uniform(-9, -2, pmf.isel(score=0).shape), dims=pmf.isel(score=0).dims
    )
    return xr.Dataset({"pmf": pmf, "valid_mass": valid})


def _assert_report(path, must_have=()):
    html = path.read_text(encoding="utf-8")
    out = path.parent
    assert (out / "report.md").is_file()
    for s in ("Constraint", "Consensus", "Construct", "cost of generative sampling", *must_have):
        assert s in html, s
    for img in [p for p in html.split('src="')[1:]]:
        assert (out / img.split('"')[0]).is_file()
    for ext in ("csv", "tex", "md"):
        assert (out / "tables" / f"effects.{ext}").is_file()
    for csv in sorted((out / "tables").glob("*.csv")):
        _assert_tex_well_formed(csv.with_suffix(".tex"))
        _assert_md_well_formed(csv.with_suffix(".md").read_text(encoding="utf-8"), csv)
    _assert_md_well_formed((out / "report.md").read_text(encoding="utf-8"))
    theads = re.findall(r"<thead>.*?</thead>", html, re.DOTALL)
    assert theads
    for thead in theads:  # one header row: none holding only the index name
        assert thead.count("<tr") == 1, thead
    return html


_UNESCAPED = r"(?<!\\)"  # not preceded by a backslash


def _assert_tex_well_formed(path):
    """What pdfLaTeX needs from a pasted table, checked without TeX."""
    tex = path.read_text(encoding="utf-8")
    assert tex.isascii(), (path.name, sorted({c for c in tex if not c.isascii()}))
    assert not re.search(r"\bnan\b", tex, re.IGNORECASE), path.name
    (caption,) = re.findall(r"^\\caption\{(.*)\}$", tex, re.MULTILINE)
    assert not re.search(_UNESCAPED + r"[&%#_$]", caption), caption
    (label,) = re.findall(r"^\\label\{(.*)\}$", tex, re.MULTILINE)
    assert re.fullmatch(r"tab:[A-Za-z0-9:._-]+", label), label
    (spec,) = re.findall(r"^\\begin\{tabular\}\{([lrc]+)\}$", tex, re.MULTILINE)
    rows = tex.split("\\toprule\n")[1].split("\n\\bottomrule")[0].splitlines()
    assert rows.pop(1) == "\\midrule"
    for row in rows:
        # a row opening with [ or * is read as an argument of the \\ or \midrule before it
        assert row[:1] not in ("[", "*"), (path.name, row)
        assert row.endswith(" \\\\"), (path.name, row)
        assert len(re.findall(_UNESCAPED + "&", row)) == len(spec) - 1, (path.name, row)


def _assert_md_well_formed(md, csv=None):
    """Every Markdown table row has as many unescaped | as its header (and the CSV)."""
    blocks = re.findall(r"(?:^\|.*\n?)+", md, re.MULTILINE)
    assert blocks
    for block in blocks:
        lines = block.strip("\n").splitlines()
        n = [len(re.findall(_UNESCAPED + r"\|", line)) for line in lines]
        assert set(n) == {n[0]}, (csv, block)
        assert re.fullmatch(r"\|(---\|)+", lines[1]), lines[1]
        assert not re.search(r"\bnan\b", block, re.IGNORECASE)
        if csv is not None:
            assert n[0] - 1 == pd.read_csv(csv).shape[1], (csv.name, lines[0])


@pytest.fixture(scope="module")
def paper_report(tmp_path_factory):
    """The report of the paper's design (human baseline, decoding grid, in-group cells)."""
    return write_report(synthetic_results(n_items=17, seed=3), tmp_path_factory.mktemp("paper"))


def test_report_paper_design(paper_report):
    ds = synthetic_results(n_items=17, seed=3)
    out = paper_report.parent
    html = _assert_report(
        paper_report, ["Human samples", "aggregate", "Decoding bias", "SYNTHETIC"]
    )
    assert (out / "figures" / "interaction_model_target.png").is_file()
    avf = pd.read_csv(out / "tables" / "aggregate_vs_factorial.csv")
    b = avf[avf.panel == "B"]
    assert b.ingroup.sum() == 5  # each model has exactly one own-country target
    assert "human_vs_llm.png" in html
    # Panel B E equals the engine's interaction E; reversal flags agree with signs
    dec = xl.decompose(ds.pmf)
    e = dec["model:target"].E
    main_e = dec["target"].E
    for _, row in b.iterrows():
        model = row.model.split(" (")[0]
        want = float(e.sel(model=model, target=row.target))
        assert pytest.approx(want, abs=1e-9) == row.E
        assert row.reversal == (want * float(main_e.sel(target=row.target)) < 0)


def test_report_no_target_factor(tmp_path):
    pmf = synthetic_pmf({"framing": 3, "persona": ["a", "b"]}, n_items=3, seed=1)
    path = write_report(_results_from(pmf), tmp_path / "r")
    html = _assert_report(path, ["framing", "persona", "No <code>decoding_pmf</code>"])
    assert "Human samples" not in html  # no instrument -> no human baseline
    assert (tmp_path / "r" / "figures" / "interaction_framing_persona.png").is_file()


@pytest.mark.parametrize("factors", [{"model": 3}, {"a": 2, "b": 2, "c": 2}])
def test_report_one_and_three_factors(tmp_path, factors):
    pmf = synthetic_pmf(factors, n_items=3, seed=2)
    _assert_report(write_report(_results_from(pmf), tmp_path / "r"))


@pytest.mark.parametrize("keep", ["model", "target", "model,target"])
def test_report_one_level_factors(tmp_path, keep):
    """A one-model (or one-target) run reports like any other; the constant is named."""
    full = synthetic_results(n_items=3, seed=2)
    ds = full.isel({f: [0] for f in keep.split(",")})
    html = _assert_report(write_report(ds, tmp_path / "r"))
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    held = "; ".join(f"**{f}** = {ds[f].values[0]}" for f in keep.split(","))
    assert f"Held constant (one level, so no effect is estimated): {held}." in md
    effects = pd.read_csv(tmp_path / "r" / "tables" / "effects.csv")
    varying = [f for f in ("model", "target") if ds.sizes[f] > 1]
    assert effects.term.unique().tolist() == ["grand", *varying]
    want = float(xl.composite(ds.pmf).pipe(lambda c: (c * c.score).sum("score")).mean())
    assert effects.E.iloc[0] == pytest.approx(want, rel=1e-12)
    if not varying:
        assert "no factorial parameter whose sign could flip" in html
        assert not (tmp_path / "r" / "tables" / "flip_by_effect_size.csv").exists()
    else:
        flips = pd.read_csv(tmp_path / "r" / "tables" / "flip_by_effect_size.csv")
        n_params = sum(ds.sizes[f] for f in varying)
        assert flips["Params (%)"].sum() == pytest.approx(100.0)
        assert n_params == len(sampling.flip_probability(ds.pmf, n=[10]))
    contrasts = (tmp_path / "r" / "tables" / "contrasts_target.csv").exists()
    assert contrasts == ("target" in varying)  # no empty table of a constant factor


def test_report_from_file_written_by_another_process(tmp_path):
    nc = tmp_path / "results.nc"
    code = textwrap.dedent(
        f"""
        import xlikert as xl
        from xlikert.datasets import synthetic_results
        xl.to_netcdf(synthetic_results(n_items=4, seed=5), {str(nc)!r})
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    res = CliRunner().invoke(
        main, ["report", str(nc), "-o", str(tmp_path / "out"), "--origin", "Qwen3-Next-80B=China",
               "--no-figures"],  # the file and the option are the subject; figures: below
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Report written" in res.output
    _assert_report(tmp_path / "out" / "index.html")
    avf = pd.read_csv(tmp_path / "out" / "tables" / "aggregate_vs_factorial.csv")
    assert avf.ingroup.sum() == 1  # only the mapping given on the command line


def test_a_report_without_figures_has_the_same_text_and_tables(tmp_path):
    """``figures=False`` (``--no-figures``) draws nothing and says so; every table and
    every paragraph of the full report is there, to the byte."""
    import matplotlib.pyplot as plt

    from xlikert.report.page import NO_FIGURES

    nc = tmp_path / "r.nc"
    xl.to_netcdf(synthetic_results(n_items=3, seed=4), nc)
    full = write_report(nc, tmp_path / "full").parent
    before = plt.get_fignums()
    res = CliRunner().invoke(
        main, ["report", str(nc), "-o", str(tmp_path / "text"), "--no-figures"]
    )
    assert res.exit_code == 0, res.output
    text = tmp_path / "text"
    assert not (text / "figures").exists() and (full / "figures").is_dir()
    assert plt.get_fignums() == before  # none made and left open either
    md_full = (full / "report.md").read_text(encoding="utf-8").split("\n\n")
    md_text = (text / "report.md").read_text(encoding="utf-8").split("\n\n")
    assert f"*{NO_FIGURES}*" in md_text and f"*{NO_FIGURES}*" not in md_full
    figure_blocks = [b for b in md_full if b.startswith("![")]
    assert len(figure_blocks) >= 5
    kept = [b for b in md_full if not b.startswith("![")]
    captions = {b.split("](")[0].removeprefix("![") for b in figure_blocks}
    kept = [b for b in kept if b.strip("*") not in captions]  # each figure's caption line
    assert [b for b in md_text if b != f"*{NO_FIGURES}*"] == kept
    tables = sorted(p.name for p in (full / "tables").iterdir())
    assert tables == sorted(p.name for p in (text / "tables").iterdir())
    for name in tables:
        assert (full / "tables" / name).read_bytes() == (text / "tables" / name).read_bytes()


def test_cli_rejects_bad_origin(tmp_path):
    nc = tmp_path / "r.nc"
    xl.to_netcdf(_results_from(synthetic_pmf({"model": 2}, n_items=2)), nc)
    res = CliRunner().invoke(main, ["report", str(nc), "--origin", "nope"])
    assert res.exit_code == 2  # a usage error, not a traceback
    assert "LEVEL=ORIGIN" in res.output and "'nope'" in res.output


def test_paper_layout_grand_first_and_exports(tmp_path):
    pmf = synthetic_pmf({"model": 2, "target": 2}, n_items=3)
    df = paper_layout(xl.summary_table(xl.decompose(pmf)))
    assert df["Parameter"].iloc[0].startswith("μ∅")
    assert list(df.columns[-4:]) == ["E", "SD", "SNR", "dPD"]
    frag = tables.export(df, tmp_path, "t", caption="c", index=False)
    assert "\\begin{tabular}" in (tmp_path / "t.tex").read_text()
    assert frag["markdown"].count("\n") == len(df) + 1
    back = pd.read_csv(tmp_path / "t.csv")
    np.testing.assert_allclose(back["E"].values, df["E"].values)


def test_flip_effects_match_engine():
    pmf = synthetic_pmf({"model": 3, "target": 2}, n_items=3, seed=4)
    dec = xl.decompose(pmf)
    flips = sampling.flip_probability(pmf, n=[10])
    for term in ("model", "target", "model:target"):
        got = flips[flips.term == term]["E"].to_numpy()
        want = dec[term].E.values.ravel()
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_human_vs_llm_table_is_exact_mixture():
    pmf = synthetic_pmf({"model": 2, "target": ["USA", "China"], "frame": 2}, n_items=17)
    hv = human_vs_llm(pmf, human_baseline(), by="model", condition={"target": "USA"})
    assert list(hv.group[:6]) == ["Human"] * 6
    comp = xl.composite(pmf.sel(target="USA")).mean("frame")  # mixture PMF over frame
    y = comp.score
    e = (comp * y).sum("score")
    sd = np.sqrt((comp * y**2).sum("score") - e**2)
    llm = hv[hv.group == "LLM"].set_index("label")
    for m in pmf.model.values:
        assert llm.loc[m, "mean"] == pytest.approx(float(e.sel(model=m)))
        assert llm.loc[m, "sd"] == pytest.approx(float(sd.sel(model=m)))


def test_load_demo_results_labels_synthetic(capsys):
    ds = load_demo_results()
    assert "pmf" in ds
    msg = capsys.readouterr().out
    assert ("SYNTHETIC" in msg) == bool(ds.attrs.get("synthetic"))


def test_report_trend_over_numeric_coordinate(tmp_path):
    ds = synthetic_results()
    write_report(ds, tmp_path, figures=False)
    trends = pd.read_csv(tmp_path / "tables" / "trends.csv")
    assert trends[["Factor", "Ordered by"]].values.tolist() == [["model", "model_size"]]
    # E of the per-unit trend is the secant slope of the model marginal means
    comp = xl.composite(ds.pmf)
    means = (comp * comp.score).sum("score").mean("target")
    size = ds.model_size.values
    lo, hi = np.argmin(size), np.argmax(size)
    secant = float((means[hi] - means[lo]) / (size[hi] - size[lo]))
    assert trends.E.iloc[0] == pytest.approx(secant, rel=1e-9)
    # a design without numeric coordinates gets no trend table
    write_report(ds.drop_vars("model_size"), tmp_path / "none", figures=False)
    assert not (tmp_path / "none" / "tables" / "trends.csv").exists()


def test_report_names_each_models_answer_rule(tmp_path):
    ds = synthetic_results(n_items=3, seed=1)
    models = [str(m) for m in ds.model.values]
    ds.attrs["models"] = {
        models[0]: {"answers": "one token or split space (exact, same pass): answer y = ..."},
        models[1]: {"answers": "one token: the next token is a valid token"},
    }
    html = write_report(ds, tmp_path, figures=False).read_text(encoding="utf-8")
    assert f"{models[0]}: one token or split space (exact, same pass);" in html
    assert f"{models[1]}: one token." in html
    # the same from a file opened with plain xarray (provenance still JSON-encoded)
    xl.to_netcdf(ds, tmp_path / "r.nc")
    raw = xr.load_dataset(tmp_path / "r.nc")
    assert isinstance(raw.attrs["models"], str)
    html = write_report(raw, tmp_path / "raw", figures=False).read_text(encoding="utf-8")
    assert f"{models[1]}: one token." in html
    # no provenance, no sentence
    bare = write_report(synthetic_results(n_items=3), tmp_path / "bare", figures=False)
    html = bare.read_text(encoding="utf-8")
    assert "Valid answers" not in html


def _nasty_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "M|Bias|": [1.5, np.nan, -2.25],
            "flag": [True, False, True],
            "note": ["*starred", "a & b_c 50% #1 $x ~ ^ {x} \\", "μ∅ × − — ≥ ± ✓ ·"],
        },
        index=pd.Index(["[0, 1)", "[1, 2)", "≥ 10"], name="|E|"),
    )


def test_export_escapes_latex_and_markdown(tmp_path):
    df = _nasty_table()
    frag = tables.export(df, tmp_path, "nasty", caption="A & B_1: 5% of |E| (μ ≥ 0)")
    _assert_tex_well_formed(tmp_path / "nasty.tex")
    _assert_md_well_formed(frag["markdown"], tmp_path / "nasty.csv")
    tex = (tmp_path / "nasty.tex").read_text(encoding="utf-8")
    assert "\\caption{A \\& B\\_1: 5\\% of \\textbar{}E\\textbar{} (\\ensuremath{\\mu} " in tex
    assert "{[0, 1)} & 1.50" in tex and "{[1, 2)} &  & " in tex  # NaN is an empty cell
    assert "{*starred}" in tex
    for cmd in ("\\emptyset", "\\times", "\\geq", "\\pm", "\\surd", "\\cdot", "---"):
        assert cmd in tex, cmd
    # Markdown and HTML keep the Unicode; Markdown escapes the pipes; missing is empty
    md = frag["markdown"].splitlines()
    assert md[0] == "| \\|E\\| | M\\|Bias\\| | flag | note |"
    assert md[3].startswith("| \\[1, 2) |  |  | a \\& b\\_c 50% \\#1 \\$x")
    assert "μ∅ × − — ≥ ± ✓ ·" in md[4]
    back = pd.read_csv(tmp_path / "nasty.csv", index_col=0)
    assert back.index.name == "|E|" and back["note"].iloc[2] == "μ∅ × − — ≥ ± ✓ ·"


def test_export_html_has_one_header_row_and_aligned_columns(tmp_path):
    html = tables.export(_nasty_table(), tmp_path, "nasty")["html"]
    assert html.count("<tr>") == 1 + 3  # header + rows: the index name shares the header row
    assert '<th class="text">|E|</th><th class="num">M|Bias|</th>' in html
    assert '<td class="num"></td>' in html  # NaN
    assert "a &amp; b_c" in html and "μ∅" in html
    no_index = tables.export(_nasty_table(), tmp_path, "plain", index=False)["html"]
    assert "|E|" not in no_index and no_index.count("<tr>") == 4


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="needs pdflatex (TeX Live)")
def test_exported_tex_compiles_with_pdflatex(paper_report, tmp_path):
    """Every table of a full report, plus the adversarial one, in one pdfLaTeX run."""
    tables.export(_nasty_table(), tmp_path, "nasty", caption="A & B_1: 5% of |E| (μ ≥ 0)")
    inputs = [*sorted((paper_report.parent / "tables").glob("*.tex")), tmp_path / "nasty.tex"]
    assert len(inputs) >= 10
    _compile_with_pdflatex(inputs, tmp_path)


def _compile_with_pdflatex(inputs, tmp_path):
    """One pdfLaTeX run over the ``inputs`` (booktabs only): no error, no missing glyph."""
    doc = tmp_path / "doc.tex"
    doc.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
        + "".join(f"\\input{{{p.as_posix()}}}\n\\clearpage\n" for p in inputs)
        + "\\end{document}\n",
        encoding="utf-8",
    )
    res = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert "Missing character" not in log


def test_demo_report_names_the_file_it_was_made_from(tmp_path, monkeypatch):
    """``xlikert demo`` writes results.nc, then reports from that file (not 'in-memory')."""
    import xlikert.collect as xc

    def fake_collect(prompts, models, output, **kw):  # the demo's models take minutes
        ds = synthetic_results(n_items=3, seed=3)
        xl.to_netcdf(ds, output)
        return ds

    monkeypatch.setattr(xc, "collect", fake_collect)
    out = tmp_path / "demo"
    res = CliRunner().invoke(main, ["demo", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"Results: `{out / 'results.nc'}`" in md and "in-memory" not in md


def test_a_section_is_one_entry_in_sections(tmp_path, monkeypatch):
    """A new section is a function of the report's inputs added to ``SECTIONS``; ``None`` leaves it out."""
    import xlikert.report as report
    from xlikert.report.page import Section

    seen = []

    def extra_section(inputs):
        seen.append((inputs.by, inputs.second, inputs.out))
        s = Section("Extra section")
        s.text(f"**{inputs.by}** by `{inputs.second}`.")
        s.table(pd.DataFrame({"a": [1.5]}), inputs.out, "extra", "An extra table.")
        return s

    def absent_section(inputs):
        return None

    sections = (*report.SECTIONS[:2], extra_section, absent_section, *report.SECTIONS[2:])
    monkeypatch.setattr(report, "SECTIONS", sections)
    html = write_report(
        synthetic_results(n_items=3, seed=1), tmp_path / "r", figures=False
    ).read_text()
    assert seen and seen[0][:2] == ("model", "target")
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## (.*)$", md, re.MULTILINE)
    assert heads[:4] == ["Design", "Constraint: failure rate", "Extra section", "Consensus"]
    assert "**model** by `target`." in md
    assert '<a href="#s2">Extra section</a>' in html and "<strong>model</strong>" in html
    assert (tmp_path / "r" / "tables" / "extra.csv").is_file()


#: Labels a results file or a CSV may hold: markup of Markdown, HTML and LaTeX (issue 33).
NASTY = [
    "<script>alert(1)</script>",
    "a|b *em* _u_ **b**",
    "back\\slash $\\nope$ & 5% #1",
    "{brace} `tick` ~ ^",
    "two\nlines [l](u) <b>",
]


def _nasty_results() -> xr.Dataset:
    pmf = synthetic_pmf({"model": NASTY[:2], "t&%#{x}": NASTY[2:]}, n_items=4, seed=5)
    pmf = pmf.assign_coords(
        item=["q*1*", "q_2_", "q<3>", "q|4`"],
        reverse_keyed=("item", [False, True, False, True]),
        subscale=("item", ["S<1>|*", "S<1>|*", "S_2 $", "S_2 $"]),
    )
    ds = _results_from(pmf)
    ds.attrs["title"] = "Title <i>*x*</i> | $y$"
    return ds


def test_untrusted_labels_are_escaped_in_every_output(tmp_path):
    """Factor names and levels, item ids and subscale names with markup show as text in
    report.md (rendered by a CommonMark parser), index.html and every LaTeX table."""
    import html as html_lib

    from xlikert.report.tables import markdown_escape

    markdown_it = pytest.importorskip("markdown_it")
    path = write_report(_nasty_results(), tmp_path / "r")
    out = path.parent
    md = (out / "report.md").read_text(encoding="utf-8")
    _assert_md_well_formed(md)
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    page = path.read_text(encoding="utf-8")
    for shown in (rendered, page):
        assert "<script" not in shown and "<i>" not in shown and "<b>" not in shown
        assert "<em>em</em>" not in shown and "<strong>b</strong>" not in shown
        assert "<code>tick</code>" not in shown and '<a href="u">' not in shown
    for label in [*NASTY, "t&%#{x}", "q*1*", "q|4`", "S<1>|*", "S_2 $"]:
        text = " ".join(label.split("\n"))
        assert html_lib.escape(text) in rendered, label  # shown as it is, as text
        assert html_lib.escape(text) in page, label
        assert markdown_escape(label) in md, label
    for csv in sorted((out / "tables").glob("*.csv")):
        _assert_tex_well_formed(csv.with_suffix(".tex"))
        _assert_md_well_formed(csv.with_suffix(".md").read_text(encoding="utf-8"), csv)
        tex = csv.with_suffix(".tex").read_text(encoding="utf-8")
        body = tex.split("\\toprule\n")[1]
        assert not re.search(_UNESCAPED + r"[$%#_^~]", body), csv.name
        assert "<script>" not in tex and "\n\n" not in tex
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", p.name) for p in out.rglob("*") if p.is_file())
    if shutil.which("pdflatex"):
        _compile_with_pdflatex(sorted((out / "tables").glob("*.tex")), tmp_path)


def test_write_report_leaves_the_callers_backend_and_figures_alone(tmp_path, monkeypatch):
    """The report draws standalone Figure objects (xlikert.plot.offscreen): it switches no
    backend, makes no pyplot figure and closes none of the caller's. matplotlib's 'template'
    backend stands in for a GUI one (a real GUI backend needs a display)."""
    import matplotlib.pyplot as plt

    def refuse(*args, **kwargs):
        raise AssertionError("the report switched the backend or made a pyplot figure")

    results = _results_from(synthetic_pmf({"model": 2, "target": 3}, n_items=2))
    before = matplotlib.get_backend()
    plt.switch_backend("template")
    try:
        plt.figure()  # the caller's open figure
        open_before = plt.get_fignums()
        with monkeypatch.context() as m:
            for module, name in ((plt, "switch_backend"), (matplotlib, "use"), (plt, "figure")):
                m.setattr(module, name, refuse)
            write_report(results, tmp_path / "r")
        assert matplotlib.get_backend() == "template" and plt.get_fignums() == open_before
        assert len(list((tmp_path / "r" / "figures").glob("*.png"))) >= 5
    finally:
        plt.close("all")
        plt.switch_backend(before)


def _questionnaire_results() -> tuple[xr.Dataset, xr.Dataset]:
    """Results of items with their own scales, a nominal item and a Don't know option, and
    human data that count Don't know apart: hand-made, as the collection writes them."""
    rng = np.random.default_rng(5)
    supports = {"a": (1, 4), "b": (0, 7), "c": (0, 7), "vote": (1, 2)}
    items, axis = list(supports), np.arange(0, 8)
    pmf = np.zeros((2, 2, len(items), axis.size))
    for j, (lo, hi) in enumerate(supports.values()):
        pmf[:, :, j, lo : hi + 1] = rng.dirichlet(np.ones(hi - lo + 1), size=(2, 2))
    dk = np.where(np.array([1, 1, 0, 0], bool), rng.uniform(0.02, 0.2, (2, 2, 4)), np.nan)
    ds = xr.Dataset(
        {
            "pmf": (("model", "party", "item", "score"), pmf),
            "valid_mass": (("model", "party", "item"), rng.uniform(0.6, 0.75, (2, 2, 4))),
            "nonsubstantive_mass": (("model", "party", "item", "option"), dk[..., None]),
        },
        coords={
            "model": ["m1", "m2"],
            "party": ["Dem", "Rep"],
            "item": items,
            "score": axis,
            "option": ["Don't know"],
            "score_min": ("item", [v[0] for v in supports.values()]),
            "score_max": ("item", [v[1] for v in supports.values()]),
            "nominal": ("item", [i == "vote" for i in items]),
            "reverse_keyed": ("item", [i == "a" for i in items]),
        },
    )
    n = 300
    table = {"party": rng.choice(["Dem", "Rep"], n)}
    for item, (lo, hi) in supports.items():
        table[item] = rng.integers(lo, hi + 1, n)
    table["a"] = np.where(rng.random(n) < 0.1, 8, table["a"])
    human = xl.human_pmf(
        pd.DataFrame(table), items, scale=supports, by=["party"], nonsubstantive={"Don't know": [8]}
    )
    return ds, human


def test_report_of_a_questionnaire_shows_nonsubstantive_rates_and_nominal_exclusions(tmp_path):
    ds, human = _questionnaire_results()
    # a decoding grid, as a collection writes it
    ds["decoding_pmf"] = ds.pmf.expand_dims(temperature=[0.7, 1.0], top_p=[1.0]).copy()
    path = write_report(ds, tmp_path / "r", human=human)
    html = path.read_text(encoding="utf-8")
    assert "Alignment with human respondents" in html
    assert "Nominal items vote are left out of Consensus" in html
    # items on scales of their own without subscales: no composite, its ANOVA, reliability
    # or sampling cost (issue 53); the design says why
    assert "No composite: the items are on scales of their own (a 1..4, b 0..7, c 0..7)" in html
    for title in (">Construct", ">Reliability<", ">The cost of generative sampling<"):
        assert title not in html, title
    assert "Multivariate Consensus needs one scale: it is over the items on 0..7 (b, c)" in html
    # the groups by name, not a list's repr, and not called personas
    assert "grouped by <code>party</code>, factors of the results too" in html
    ns = pd.read_csv(tmp_path / "r" / "tables" / "nonsubstantive.csv")
    assert sorted(set(ns["item"])) == ["a", "b"] and set(ns["option"]) == {"Don't know"}
    want = float(xl.nonsubstantive_rate(ds).sel(model="m1", item="a").mean())
    got = ns[(ns["model"] == "m1") & (ns["item"] == "a")]["rate_mean"].item()
    assert got == pytest.approx(want, abs=1e-4)
    hn = pd.read_csv(tmp_path / "r" / "tables" / "human_nonsubstantive.csv")
    assert set(hn["item"]) == {"a", "b"}  # the items the model offers Don't know on
    assert (hn["difference"] - (hn["model_rate"] - hn["human_rate"])).abs().max() < 2e-3
    assert not (tmp_path / "r" / "tables" / "decoding_bias.csv").exists()
    rep = pd.read_csv(tmp_path / "r" / "tables" / "human_representativeness.csv")
    assert "vote" not in set(rep["item"]) and {"a", "b", "c"} <= set(rep["item"])


def test_human_csv_of_a_questionnaire_is_read_on_each_items_own_scale(tmp_path):
    from xlikert.report.sections.human_data import load_human as _load_human

    ds, _ = _questionnaire_results()
    table = pd.DataFrame({"party": ["Dem", "Rep"] * 3, "a": [1, 2, 3, 4, 1, 2], "c": [0, 7] * 3})
    table.to_csv(tmp_path / "h.csv", index=False)
    human, _ = _load_human(tmp_path / "h.csv", ds.pmf)
    assert human.score.values.tolist() == list(range(8))  # the results' axis
    assert human.score_max.values.tolist() == [4, 7]
    table.loc[0, "a"] = 6  # on the results' axis, off item a's own 1..4
    table.to_csv(tmp_path / "h.csv", index=False)
    with pytest.raises(xl.DesignError, match=r"column 'a' .* outside the scale 1..4"):
        _load_human(tmp_path / "h.csv", ds.pmf)


def test_importing_the_report_and_the_figures_sets_no_matplotlib_backend():
    """Importing xlikert.report or xlikert.plot leaves matplotlib's backend as it was (not yet
    chosen, in a fresh interpreter): the user's session picks it."""
    code = textwrap.dedent(
        """
        import matplotlib
        before = dict.__getitem__(matplotlib.rcParams, "backend")
        import xlikert.report, xlikert.plot
        import xlikert as xl
        xl.report, xl.plot
        print(before == dict.__getitem__(matplotlib.rcParams, "backend"))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "MPLBACKEND": ""},
    )  # fmt: skip
    assert out.stdout.split() == ["True"], out.stderr
