"""The example ``examples/validity.py`` (issue 52), reduced, on the real SmolLM2-135M.

One ANES 1996 group (Democrats with a college degree) on the self-placement, all five
elicitation levels, through the example's own functions: each level that reads a PMF is
set against the group's respondents, and its W1 is scipy's on the model's cell and the
respondents' answer counts (counted here with pandas); a stated cell holds its reply's
parse and a level without a PMF is named, not compared. Costly: five levels of one cell on
two busy cores take a few minutes (the stated reply is up to 80 tokens).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("statsmodels")

from scipy.stats import wasserstein_distance

from xlikert.collect.stated import parse_stated
from xlikert.datasets import anes96_respondents
from xlikert.design.elicitation import ELICITATIONS
from xlikert.testing.engines import ROOT

pytestmark = [pytest.mark.usefixtures("smollm2_folder"), pytest.mark.costly]

GROUP = {"party": ["Democrat"], "education": ["college"]}


def _example():
    spec = importlib.util.spec_from_file_location("validity", ROOT / "examples" / "validity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_anes_group_against_its_respondents(tmp_path):
    example = _example()
    part = example.anes_groups(tmp_path, models=(example.SMOL,), groups=GROUP)
    ds = part.results.sel(model=example.SMOL["name"], party="Democrat", education="college",
                          item=example.ITEM)  # fmt: skip
    assert list(ds["elicitation"].values) == list(ELICITATIONS)
    v, notes = example.compare(part)
    people = anes96_respondents()
    people = people[(people.party == "Democrat") & (people.education == "college")]
    scores = np.arange(1, 8)
    counts = people[example.ITEM].value_counts().reindex(scores, fill_value=0).values
    stated = ds.sel(elicitation="stated")
    labels = [str(y) for y in scores]
    reading = parse_stated(str(stated.reply_text.values), labels)
    assert str(stated.stated_status.values) == reading.status
    compared = []
    for level in ELICITATIONS:
        pmf = ds.pmf.sel(elicitation=level).values
        if np.isnan(pmf).all():
            assert any(f": {level} has no PMF in 1 of 1 cells" in n for n in notes), notes
            continue
        compared.append(level)
        w1 = wasserstein_distance(scores, scores, pmf, counts)
        got = v.estimate.sel(model=example.SMOL["name"], elicitation=level, party="Democrat",
                             education="college", item=example.ITEM, metric="wasserstein")  # fmt: skip
        assert float(got) == pytest.approx(w1, abs=1e-12), level
    # first token, prefix and own words always read a PMF: there is a closest level
    assert {"first_token", "prefix", "own_words"} <= set(compared)
    table = example.closest_table(v, "test")
    assert table.iloc[0]["closest"] in compared
    print("\n" + table.to_string(), notes)
