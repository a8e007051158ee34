"""A three-language design on the real Qwen2.5-Coder-0.5B-Instruct (issue 40, item 1).

The built-in experiment ``languages`` (BFI-10 in English, German and Chinese, one
instrument whose translations are a factor), two items: each language's prompt is
its own translation, every cell is read, and decompose gives the language effect.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

import xlikert as xl
from xlikert.collect import collect
from xlikert.design import load_experiment

pytestmark = [pytest.mark.usefixtures("qwen_folder"), pytest.mark.xdist_group("languages")]


def test_three_languages_run_on_a_real_model():
    exp = load_experiment("languages")
    prompts = exp.build_prompts().sel(item=["2", "8"])
    ds = collect(prompts, exp.models, progress=False)
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
