"""A perturbation factor collected on the tiny model: each cell read its level's text, the
rules travel with the results, and ``decompose`` gives the factor's effect."""

from __future__ import annotations

import numpy as np
from support.tiny import save_tiny

import xlikert as xl
from xlikert.collect import collect
from xlikert.design import experiment_from_dict


def test_the_perturbed_prompts_are_read_and_decomposed(tmp_path):
    model = save_tiny(tmp_path / "model")
    exp = experiment_from_dict({
        "experiment": {"name": "noise", "instrument": "cetscale", "items": ["1", "2"]},
        "factors": {"target": {"levels": ["USA"]},
                    "noise": {"kind": "perturbation",
                              "levels": {"clean": "none", "typos": "typos rate=0.3 seed=1",
                                         "upper": "case upper"}}},
        "models": [{"name": "tiny", "source": str(model)}],
    })  # fmt: skip
    prompts = exp.build_prompts()
    res = collect(prompts, [{"name": "tiny", "source": str(model)}], progress=False)
    assert res.attrs["perturbation_rules"] == prompts.attrs["perturbation_rules"]
    for level in ("clean", "typos", "upper"):
        for item in ("1", "2"):
            user = str(prompts["user"].sel(target="USA", noise=level, item=item).values)
            text = str(res["prompt_text"].sel(model="tiny", target="USA", noise=level,
                                              item=item).values)  # fmt: skip
            assert user in text
    dec = xl.decompose(res["pmf"], reflect=False, subscale=None)
    means = (res["pmf"] * res["score"]).sum("score").sum("item").isel(model=0, target=0).values
    np.testing.assert_allclose(dec["noise"]["E"].values, means - means.mean(), atol=1e-9)
    assert float(np.abs(dec["noise"]["E"]).max()) > 0  # the texts moved the tiny model
