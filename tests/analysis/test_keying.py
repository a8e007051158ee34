"""The analysis scores the instrument: reverse keys reflected, one composite per subscale.

Checked on the built-in mini-IPIP (20 items, 11 reverse-keyed, five subscales of
four items) with synthetic item PMFs on its items, against a hand computation
from the item means: reflected item mean ``6 - m``, subscale composite mean the
sum of its items' means, effects the Möbius contrasts of the cell means.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xlikert as xl
from xlikert import sampling
from xlikert.datasets import synthetic_pmf
from xlikert.design import load_instrument

FACTORS = {"model": 2, "persona": ["a student", "a retiree", "a nurse"]}


@pytest.fixture(scope="module")
def ipip() -> xr.DataArray:
    """Synthetic item PMFs on the mini-IPIP's items, with the item coords its prompts carry."""
    inst = load_instrument("mini_ipip")
    pmf = synthetic_pmf(FACTORS, n_items=len(inst.items), scale=(1, 5), seed=11)
    return pmf.assign_coords(
        item=[it.id for it in inst.items],
        reverse_keyed=("item", [it.reverse_keyed for it in inst.items]),
        subscale=("item", [it.subscale for it in inst.items]),
    )


def _hand_cell_means(pmf: xr.DataArray, reflect: bool, by_subscale: bool) -> xr.DataArray:
    """Composite means per cell from the item means, written out by hand (no xlikert)."""
    m = (pmf * pmf["score"]).sum("score")  # item means
    if reflect:
        m = xr.where(pmf["reverse_keyed"], 1 + 5 - m, m)
    if not by_subscale:
        return m.sum("item")
    names = list(dict.fromkeys(pmf["subscale"].values.tolist()))
    parts = [m.where(pmf["subscale"] == s).sum("item") for s in names]
    return xr.concat(parts, dim="subscale").assign_coords(subscale=names)


def _hand_effects(cell: xr.DataArray) -> dict[str, xr.DataArray]:
    grand = cell.mean(["model", "persona"])
    model = cell.mean("persona") - grand
    persona = cell.mean("model") - grand
    inter = cell - cell.mean("persona") - cell.mean("model") + grand
    return {"grand": grand, "model": model, "persona": persona, "model:persona": inter}


def _check(dec: xr.DataTree, hand: dict[str, xr.DataArray]) -> None:
    for node, want in hand.items():
        got = dec[node].to_dataset()["E"]
        xr.testing.assert_allclose(got.reset_coords(drop=True), want.transpose(*got.dims))


def test_decompose_gives_reflected_per_subscale_values(ipip):
    dec = xl.decompose(ipip)
    assert dec["grand"].to_dataset()["E"].dims == ("subscale",)
    assert dec["grand"]["subscale"].values.tolist() == [
        "extraversion",
        "agreeableness",
        "conscientiousness",
        "neuroticism",
        "intellect",
    ]
    assert dec["model:persona"].to_dataset()["E"].dims == ("model", "persona", "subscale")
    cell = _hand_cell_means(ipip, reflect=True, by_subscale=True)
    _check(dec, _hand_effects(cell))
    # grand SD: mixture of the cells' composites, Var = mean(Var_c + mu_c^2) - mu^2
    y = ipip["score"]
    m = (ipip * y).sum("score")
    var_item = (ipip * y**2).sum("score") - m**2  # reflection keeps an item's variance
    var = xr.concat(
        [var_item.where(ipip["subscale"] == s).sum("item") for s in cell["subscale"].values],
        dim="subscale",
    ).assign_coords(subscale=cell["subscale"].values)
    sd = np.sqrt((var + cell**2).mean(["model", "persona"]) - cell.mean(["model", "persona"]) ** 2)
    xr.testing.assert_allclose(dec["grand"].to_dataset()["SD"].reset_coords(drop=True), sd)
    # a subscale's composite lives on 4..20: nothing outside its own support
    comp = xl.composite(ipip)
    assert comp["score_min"].values.tolist() == [4] * 5
    np.testing.assert_allclose(comp.sum("score"), 1.0, atol=1e-12)


def test_opting_out_gives_todays_numbers(ipip):
    raw = xl.decompose(ipip, reflect=False, subscale=None)
    _check(raw, _hand_effects(_hand_cell_means(ipip, reflect=False, by_subscale=False)))
    # today's numbers: the raw sum of all 20 items, as for PMFs without item coords
    bare = ipip.drop_vars(["reverse_keyed", "subscale"])
    for node in raw.children:
        xr.testing.assert_allclose(raw[node].to_dataset(), xl.decompose(bare)[node].to_dataset())
    # each opt-out on its own
    _check(
        xl.decompose(ipip, subscale=None),
        _hand_effects(_hand_cell_means(ipip, reflect=True, by_subscale=False)),
    )
    _check(
        xl.decompose(ipip, reflect=False),
        _hand_effects(_hand_cell_means(ipip, reflect=False, by_subscale=True)),
    )


def test_one_subscale_or_none_behaves_as_before():
    """The CETSCALE case: no reverse keys, no subscales (and one subscale is the same)."""
    pmf = synthetic_pmf({"model": 2, "target": 2}, n_items=4, scale=(1, 7), seed=2)
    plain = xl.composite(pmf)
    for coords in (
        {"subscale": ("item", [""] * 4), "reverse_keyed": ("item", [False] * 4)},
        {"subscale": ("item", ["ethno"] * 4)},
    ):
        got = xl.composite(pmf.assign_coords(coords))
        xr.testing.assert_identical(got, plain)


def test_nothing_is_reflected_twice(ipip):
    once = xl.reflect_reverse_keyed(ipip)
    xr.testing.assert_identical(xl.composite(once), xl.composite(ipip))
    comp = xl.composite(ipip)
    keyed = ipip["item"].values[ipip["reverse_keyed"].values].tolist()
    assert comp.attrs["reflected_items"] == str(keyed).replace("'", '"')
    # a composite passed back in is not composed (or reflected) again
    for node in ("grand", "model:persona"):
        xr.testing.assert_allclose(
            xl.decompose(comp)[node].to_dataset(), xl.decompose(ipip)[node].to_dataset()
        )


def test_contrast_trend_and_sampling_per_subscale(ipip):
    ipip = ipip.assign_coords(size=("model", [1.0, 3.0]))
    items = {s: ipip["item"].values[ipip["subscale"].values == s] for s in ["intellect"]}
    one = ipip.sel(item=items["intellect"])  # one subscale alone: no subscale dim
    pairs = xl.contrast(ipip, "persona")
    assert pairs.dims == ("pair", "subscale", "effect")
    want = xl.summarize(xl.contrast(one, "persona"))
    got = xl.summarize(pairs.sel(subscale="intellect"))
    np.testing.assert_allclose(got["E"], want["E"], atol=1e-12)
    np.testing.assert_allclose(got["SD"], want["SD"], atol=1e-12)
    tr = xl.summarize(xl.trend(ipip, "model", values="size"), dim="slope")
    tr_one = xl.summarize(xl.trend(one, "model", values="size"), dim="slope")
    np.testing.assert_allclose(float(tr["E"].sel(subscale="intellect")), float(tr_one["E"]))

    cell = _hand_cell_means(ipip, reflect=True, by_subscale=True)
    mom = sampling.composite_moments(ipip)
    xr.testing.assert_allclose(
        mom["mean"].reset_coords(drop=True),
        cell.reset_coords(drop=True).transpose(*mom["mean"].dims),
    )
    flips = sampling.flip_probability(ipip, n=[10])
    model = _hand_effects(cell)["model"]
    row = flips[(flips.term == "model") & (flips.subscale == "neuroticism")]
    np.testing.assert_allclose(row["E"], model.sel(subscale="neuroticism").values)
    se = sampling.sampling_se_table(ipip, n=[10])
    assert se.index.names == ["model", "subscale"] and len(se) == 2 * 5
    raw = sampling.composite_moments(ipip, reflect=False, subscale=None)
    xr.testing.assert_allclose(
        raw["mean"].reset_coords(drop=True),
        _hand_cell_means(ipip, reflect=False, by_subscale=False).reset_coords(drop=True),
    )


def test_summary_table_mean_item_scale(ipip):
    dec = xl.decompose(ipip)
    sums = xl.summary_table(dec)
    means = xl.summary_table(dec, scoring="mean")
    both = xl.summary_table(dec, scoring="both")
    assert "subscale" in sums.columns and "n_items" not in sums.columns
    np.testing.assert_allclose(means["E"], sums["E"] / 4)
    np.testing.assert_allclose(means["SD"], sums["SD"] / 4)
    pd.testing.assert_series_equal(means["SNR"], sums["SNR"])
    np.testing.assert_allclose(both["E_item"], sums["E"] / 4)
    assert "mean-item" in means.attrs["scoring"] and "divided" in both.attrs["scoring"]
    # the hand grand mean per item: mean of the reflected item means of the subscale
    cell = _hand_cell_means(ipip, reflect=True, by_subscale=True) / 4
    grand = means[means.term == "grand"].set_index("subscale")["E"]
    for s in cell["subscale"].values:
        assert grand[s] == pytest.approx(float(cell.sel(subscale=s).mean()))
    # without subscales the whole instrument's 20 items
    flat = xl.summary_table(xl.decompose(ipip, subscale=None), scoring="mean")
    np.testing.assert_allclose(
        flat["E"], xl.summary_table(xl.decompose(ipip, subscale=None))["E"] / 20
    )
    with pytest.raises(xl.XlikertError, match="scoring must be one of"):
        xl.summary_table(dec, scoring="median")
    with pytest.raises(xl.DesignError, match="item count is unknown"):
        xl.summary_table(xl.decompose(xl.composite(ipip, subscale=None)), scoring="mean")


# ----------------------------------------------------------------- the report


def _results(pmf: xr.DataArray) -> xr.Dataset:
    ds = xr.Dataset({"pmf": pmf, "valid_mass": 0.99 + 0 * pmf.isel(score=0, drop=True)})
    ds.attrs["instrument"] = "mini_ipip"
    return ds


def test_report_follows_the_instrument(ipip, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    small = ipip.isel(persona=[0, 1])
    path = xl.report.write_report(_results(small), tmp_path / "rep")
    out = path.parent
    effects = pd.read_csv(out / "tables" / "effects.csv")
    grand = effects[effects.term == "grand"].set_index("subscale")
    cell = _hand_cell_means(small, reflect=True, by_subscale=True)
    for s in cell["subscale"].values:
        want = float(cell.sel(subscale=s).mean())
        assert grand.loc[s, "E"] == pytest.approx(want, abs=1e-6)
        assert grand.loc[s, "E_item"] == pytest.approx(want / 4, abs=1e-6)
        assert (out / "figures" / f"main_effect_model_{s}.png").is_file()
    # the composite PMFs as small multiples: one row per subscale in one figure
    assert (out / "figures" / "composite_pmfs.png").is_file()
    assert not list((out / "figures").glob("composite_pmfs_*.png"))
    md = (out / "report.md").read_text(encoding="utf-8")
    keyed = ", ".join(small["item"].values[small["reverse_keyed"].values])
    assert f"reflected (y → 6 − y) before any composite: items {keyed}." in md
    assert "**neuroticism** (K = 4): items 4, 9, 14, 19" in md
    assert "divided by the number of items" in md
    # the same answers without the instrument's coords: today's raw 20-item sum
    path = xl.report.write_report(
        _results(small.drop_vars(["reverse_keyed", "subscale"])), tmp_path / "raw", figures=False
    )
    raw = pd.read_csv(path.parent / "tables" / "effects.csv")
    want = float(_hand_cell_means(small, reflect=False, by_subscale=False).mean())
    assert raw.loc[raw.term == "grand", "E"].item() == pytest.approx(want, abs=1e-6)
    assert "subscale" not in raw.columns


def test_a_failing_report_leaves_nothing_behind(ipip, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from xlikert.report.sections import construct

    def broken(*args, **kwargs):
        raise RuntimeError("broken table")

    monkeypatch.setattr(construct, "paper_layout", broken)  # fails after the first figures
    ds = _results(ipip.isel(persona=[0, 1]))
    with pytest.raises(RuntimeError, match="broken table"):
        xl.report.write_report(ds, tmp_path / "new")
    assert list(tmp_path.iterdir()) == []
    # an earlier report in the folder is left as it was
    old = tmp_path / "old"
    (old / "figures").mkdir(parents=True)
    (old / "index.html").write_text("old report", encoding="utf-8")
    with pytest.raises(RuntimeError, match="broken table"):
        xl.report.write_report(ds, old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]
    assert (old / "index.html").read_text(encoding="utf-8") == "old report"
    assert list((old / "figures").iterdir()) == []
