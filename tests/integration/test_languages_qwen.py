"""A three-language design on the real Qwen2.5-Coder-0.5B-Instruct (issue 40, item 1).

The built-in experiment ``languages`` (BFI-10 in English, German and Chinese, one
instrument whose translations are a factor), two items: each language's prompt is
its own translation, every cell is read, and decompose gives the language effect. Its
report, rendered by headless Chromium where one is installed, has the section
"Languages" with the run's numbers.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from scipy.stats import wasserstein_distance
from support.browser import chromium, rendered_dom

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

import xlikert as xl
from xlikert.collect import collect
from xlikert.design import load_experiment
from xlikert.report import write_report

pytestmark = [pytest.mark.usefixtures("qwen_folder"), pytest.mark.xdist_group("languages")]


@pytest.fixture(scope="module")
def run():
    exp = load_experiment("languages")
    prompts = exp.build_prompts().sel(item=["2", "8"])
    return collect(prompts, exp.models, progress=False)


def test_three_languages_run_on_a_real_model(run):
    ds = run
    print(ds.valid_mass.squeeze().to_pandas().round(4))  # the record: valid mass per cell
    assert list(ds.language.values) == ["en", "de", "zh"]
    assert "非常同意" in str(ds.prompt_text.sel(language="zh", item="2").values.ravel()[0])
    assert "Trifft" in str(ds.prompt_text.sel(language="de", item="2").values.ravel()[0])
    assert (ds.valid_mass > 0.5).all()
    np.testing.assert_allclose(ds.pmf.sum("score"), 1.0, atol=1e-9)
    dec = xl.decompose(ds, factors=["language"], reflect=False, subscale=None)
    e = dec["language"].ds.E
    m = (ds.pmf * ds.score).sum("score").sum("item").mean("model")
    np.testing.assert_allclose(np.ravel(e.values), (m - m.mean()).values, atol=1e-9)


@pytest.mark.skipif(chromium() is None, reason="no Chromium (apt-get install chromium)")
def test_the_report_renders_the_languages_section_in_chromium(run, tmp_path):
    """The report of the three-language run, as headless Chromium renders it: the section
    "Languages" with a row per language (its valid mass and where its translation comes
    from) and the items that move, in the rendered DOM."""
    page = write_report(run, tmp_path / "report", figures=False)
    dom = rendered_dom(page)
    heads = re.findall(r"<h2[^>]*>([^<]+)", dom)
    assert "Languages" in heads, heads
    section = dom[re.search(r"<h2[^>]*>Languages</h2>", dom).end() :]
    section = section[: section.find("<h2")] if "<h2" in section else section
    rows = [
        re.sub(r"<[^>]+>", " ", r).split() for r in re.findall(r"<tr>(.*?)</tr>", section, re.S)
    ]
    by_language = {r[0]: r for r in rows if r and r[0] in ("en", "de", "zh")}
    assert sorted(by_language) == ["de", "en", "zh"], rows
    assert "own" in " ".join(by_language["zh"]), by_language["zh"]
    vm = run.valid_mass.mean([d for d in run.valid_mass.dims if d != "language"])
    for lv, row in by_language.items():  # the valid mass shown is the run's, per language
        shown = [float(x) for x in row[1:] if re.fullmatch(r"[01]\.\d+", x)]
        assert any(abs(x - float(vm.sel(language=lv))) < 5e-3 for x in shown), (lv, row)
    # the items table: each item's largest W1 between two languages, by hand (scipy)
    w1 = {r[0]: float(r[2]) for r in rows if r and r[0] in ("2", "8")}
    for item, shown in w1.items():
        p = run.pmf.mean("model").sel(item=item)
        d = max(wasserstein_distance(p.score, p.score, p.sel(language=a), p.sel(language=b))
                for a, b in itertools.combinations(["en", "de", "zh"], 2))  # fmt: skip
        assert abs(shown - d) < 5e-3, (item, shown, d)
    assert sorted(w1) == ["2", "8"], rows
