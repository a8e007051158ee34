"""Reverse keying and subscale composites feed the analysis correctly."""

from __future__ import annotations

from functools import reduce

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from xlikert import reflect_reverse_keyed, subscale_composites
from xlikert.core.errors import DesignError
from xlikert.datasets import synthetic_pmf
from xlikert.design import load_experiment


def keyed_pmf(seed=0, scale=(1, 5)):
    pmf = synthetic_pmf({"model": 2, "target": 3}, n_items=5, scale=scale, seed=seed)
    return pmf.assign_coords(
        reverse_keyed=("item", [False, True, False, True, True]),
        subscale=("item", ["E", "E", "A", "A", "A"]),
    )


def test_reflect_reverses_only_reverse_keyed_items():
    pmf = keyed_pmf()
    out = reflect_reverse_keyed(pmf)
    assert out.dims == pmf.dims and out.attrs == pmf.attrs
    np.testing.assert_array_equal(out["score"].values, pmf["score"].values)
    lo, hi = 1, 5
    for item, rev in zip(pmf["item"].values, pmf.reverse_keyed.values, strict=True):
        for y in range(lo, hi + 1):
            src = lo + hi - y if rev else y
            np.testing.assert_array_equal(
                out.sel(item=item, score=y).values, pmf.sel(item=item, score=src).values
            )
    assert out.reflected.values.tolist() == pmf.reverse_keyed.values.tolist()
    # mean of a reflected item is y_min + y_max - mean
    mean = (pmf * pmf.score).sum("score")
    mean_out = (out * out.score).sum("score")
    np.testing.assert_allclose(mean_out.sel(item="2"), 6 - mean.sel(item="2"), rtol=1e-12)
    np.testing.assert_allclose(mean_out.sel(item="1"), mean.sel(item="1"), rtol=0)


def test_reflect_refuses_a_second_reflection_and_bad_specs():
    out = reflect_reverse_keyed(keyed_pmf())
    with pytest.raises(DesignError, match="already reflected"):
        reflect_reverse_keyed(out)
    bare = synthetic_pmf({"model": 2}, n_items=3)
    with pytest.raises(DesignError, match="no 'reverse_keyed' coordinate"):
        reflect_reverse_keyed(bare)
    with pytest.raises(DesignError, match="unknown items"):
        reflect_reverse_keyed(bare, ["9"])
    with pytest.raises(DesignError, match="2 values for 3 items"):
        reflect_reverse_keyed(bare, [True, False])


def test_reflect_spec_forms_agree():
    bare = synthetic_pmf({"model": 2}, n_items=3, seed=3)
    a = reflect_reverse_keyed(bare, [False, True, False])
    b = reflect_reverse_keyed(bare, ["2"])
    c = reflect_reverse_keyed(bare, {"2": True})
    d = reflect_reverse_keyed(
        bare, xr.DataArray([False, True, False], dims="item", coords={"item": bare["item"].values})
    )
    for other in (b, c, d):
        xr.testing.assert_identical(a, other)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), lo=st.integers(-3, 3), width=st.integers(1, 9))
def test_reflect_is_an_involution(seed, lo, width):
    pmf = synthetic_pmf({"model": 2}, n_items=4, scale=(lo, lo + width), seed=seed)
    pmf = pmf.assign_coords(reverse_keyed=("item", [True, False, True, False]))
    once = reflect_reverse_keyed(pmf)
    twice = reflect_reverse_keyed(once.drop_vars("reflected"))
    xr.testing.assert_equal(twice.drop_vars("reflected"), pmf)
    np.testing.assert_allclose(once.sum("score"), 1.0, atol=1e-12)


def oracle(pmf, items):
    """Composite of ``items`` at each (model, target) by repeated np.convolve."""
    out = np.empty((*pmf.shape[:-2], (pmf.shape[-1] - 1) * len(items) + 1))
    for idx in np.ndindex(*pmf.shape[:-2]):
        out[idx] = reduce(np.convolve, [pmf.sel(item=i).values[idx] for i in items])
    return out


def test_one_composite_per_subscale_matches_convolution():
    pmf = keyed_pmf()
    comp = subscale_composites(pmf)
    assert comp.dims == ("model", "target", "subscale", "score")
    assert comp.subscale.values.tolist() == ["E", "A"]
    assert comp.n_items.values.tolist() == [2, 3]
    assert comp.score_min.values.tolist() == [2, 3]
    assert comp.score_max.values.tolist() == [10, 15]
    assert comp.score.values.tolist() == list(range(2, 16))
    np.testing.assert_allclose(comp.sum("score"), 1.0, atol=1e-12)
    flipped = reflect_reverse_keyed(pmf)
    e = comp.sel(subscale="E", score=slice(2, 10)).values
    np.testing.assert_allclose(e, oracle(flipped, ["1", "2"]), atol=1e-12)
    assert (comp.sel(subscale="E", score=slice(11, 15)) == 0).all()  # padding outside the range
    a = comp.sel(subscale="A", score=slice(3, 15)).values
    np.testing.assert_allclose(a, oracle(flipped, ["3", "4", "5"]), atol=1e-12)
    assert (comp.sel(subscale="A", score=2) == 0).all()


def test_subscale_composites_reflects_exactly_once():
    pmf = keyed_pmf(seed=5)
    auto = subscale_composites(pmf)
    pre = subscale_composites(reflect_reverse_keyed(pmf))  # already reflected: not again
    xr.testing.assert_allclose(auto, pre, rtol=0, atol=1e-14)
    raw = subscale_composites(pmf, reflect=False)
    assert not np.allclose(raw.values, auto.values)
    np.testing.assert_allclose(
        raw.sel(subscale="E", score=slice(2, 10)).values, oracle(pmf, ["1", "2"]), atol=1e-12
    )


def test_subscale_spec_forms_and_errors():
    pmf = keyed_pmf().drop_vars("subscale")
    by_list = subscale_composites(pmf, ["x", "x", "y", "", "y"])
    by_map = subscale_composites(pmf, {"1": "x", "2": "x", "3": "y", "4": "", "5": "y"})
    xr.testing.assert_identical(by_list, by_map)
    assert by_list.attrs["items_without_subscale"] == '["4"]'
    with pytest.raises(DesignError, match="no item along 'item' belongs to a subscale"):
        subscale_composites(pmf, [""] * 5)
    with pytest.raises(DesignError, match="no 'subscale' coordinate"):
        subscale_composites(pmf)


def test_mini_ipip_pipeline_five_subscales(tmp_path):
    """Prompts -> (synthetic) item PMFs carrying the item coords -> one composite per subscale."""
    path = tmp_path / "ipip.toml"
    path.write_text('[experiment]\ninstrument = "mini_ipip"\n', encoding="utf-8")
    prompts = load_experiment(path).build_prompts()
    pmf = synthetic_pmf({"model": 2}, n_items=20, scale=(1, 5), seed=7)
    pmf = pmf.assign_coords(item=prompts.item.values).assign_coords(
        reverse_keyed=prompts.reverse_keyed, subscale=prompts.subscale
    )
    comp = subscale_composites(pmf)
    assert comp.subscale.values.tolist() == [
        "extraversion",
        "agreeableness",
        "conscientiousness",
        "neuroticism",
        "intellect",
    ]
    assert comp.score.values.tolist() == list(range(4, 21))
    flipped = reflect_reverse_keyed(pmf)
    np.testing.assert_allclose(
        comp.sel(subscale="extraversion").values,
        oracle(flipped, ["1", "6", "11", "16"]),
        atol=1e-12,
    )
