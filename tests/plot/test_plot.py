"""Every figure function on 1-, 2- and 3-factor designs (Agg backend)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from xlikert import plot, sampling
from xlikert.core.errors import DesignError
from xlikert.datasets import human_baseline, synthetic_pmf

DESIGNS = {
    1: {"model": ["a", "b", "c"]},
    2: {"model": ["a", "b", "c"], "target": ["USA", "China"]},
    3: {"framing": 2, "persona": ["x", "y"], "lang": ["en", "de", "fr"]},  # no model/target
}


def _composite(pmf: xr.DataArray) -> xr.DataArray:
    """Composite PMF by plain convolution (test helper, independent of the engine)."""
    p = pmf.transpose(..., "item", "score").values
    lead = p.shape[:-2]
    flat = p.reshape(-1, *p.shape[-2:])
    out = []
    for cond in flat:
        acc = np.array([1.0])
        for item in cond:
            acc = np.convolve(acc, item)
        out.append(acc)
    k = pmf.sizes["item"]
    lo = int(pmf.score.min()) * k
    arr = np.array(out).reshape(*lead, -1)
    dims = [d for d in pmf.dims if d not in ("item", "score")]
    return xr.DataArray(
        arr,
        dims=[*dims, "score"],
        coords={**{d: pmf[d] for d in dims}, "score": np.arange(lo, lo + arr.shape[-1])},
    )


@pytest.fixture(params=sorted(DESIGNS))
def design(request):
    pmf = synthetic_pmf(DESIGNS[request.param], n_items=4, seed=request.param, concentration=0.5)
    yield request.param, pmf
    plt.close("all")


def _check(fig):
    assert isinstance(fig, matplotlib.figure.Figure)
    fig.canvas.draw()  # renders without error
    assert fig.axes


def test_failure_rate(design):
    _, pmf = design
    rng = np.random.default_rng(0)
    fr = xr.DataArray(
        10.0 ** rng.uniform(-12, -1, pmf.isel(score=0).shape),
        dims=pmf.isel(score=0).dims,
        coords=pmf.isel(score=0, drop=True).coords,
    )
    fr[(0,) * fr.ndim] = 0.0  # an exact zero is drawn at the floor and counted
    fig = plot.failure_rate(fr)
    _check(fig)
    assert "drawn at" in fig.axes[0].get_ylabel()
    f = fr.dims[0]
    sized = fr.assign_coords({f"{f}_size": (f, np.arange(1.0, fr.sizes[f] + 1))})
    _check(plot.failure_rate(sized))  # colour bar for a size coordinate


def test_consensus(design):
    _, pmf = design
    rng = np.random.default_rng(1)
    cns = xr.DataArray(
        rng.uniform(0.5, 1.0, pmf.isel(item=0, score=0).shape),
        dims=pmf.isel(item=0, score=0).dims,
        coords=pmf.isel(item=0, score=0, drop=True).coords,
    )
    fig = plot.consensus(cns)
    _check(fig)
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == int(np.prod([cns.sizes[d] for d in cns.dims[:2]]))


def test_composite_pmfs(design):
    _, pmf = design
    fig = plot.composite_pmfs(_composite(pmf))
    _check(fig)
    first = pmf.dims[0]
    assert sum(ax.get_visible() for ax in fig.axes) == pmf.sizes[first]


def test_effect_distributions_and_heatmap(design):
    _, pmf = design
    comp = _composite(pmf)
    factors = [d for d in comp.dims if d != "score"]
    rng = np.random.default_rng(2)
    f = factors[0]
    eff = xr.DataArray(
        rng.dirichlet(np.ones(9), comp.sizes[f]),
        dims=(f, "effect"),
        coords={f: comp[f], "effect": np.arange(-4, 5)},
    )
    e = (eff * eff.effect).sum("effect")
    sd = np.sqrt((eff * eff.effect**2).sum("effect") - e**2)
    summ = xr.Dataset({"E": e, "SD": sd, "SNR": abs(e) / sd, "dPD": e * 0 + 0.7})
    _check(plot.effect_distributions(eff, summ))
    with pytest.raises(DesignError):
        plot.effect_distributions(eff.expand_dims(z=2))
    if len(factors) >= 2:
        E = xr.DataArray(
            rng.normal(size=[comp.sizes[d] for d in factors[:2]]),
            dims=factors[:2],
            coords={d: comp[d] for d in factors[:2]},
        )
        ingroup = E > 1
        fig = plot.interaction_heatmap(E, SD=abs(E), ingroup=ingroup)
        _check(fig)
        assert len(fig.axes[0].texts) == E.size
    else:
        with pytest.raises(DesignError):
            plot.interaction_heatmap(xr.DataArray(np.zeros(3), dims=factors[:1]))


def test_human_vs_llm():
    hb = human_baseline()
    tab = pd.concat(
        [
            hb.assign(label=hb["sample"])[["group", "label", "mean", "sd"]],
            pd.DataFrame(
                {"group": "LLM", "label": ["m1", "m2"], "mean": [80.0, 60.0], "sd": [1.0, 5.0]}
            ),
        ]
    )
    fig = plot.human_vs_llm(tab)
    _check(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][-1] == "m2"


def test_sampling_figures(design):
    _, pmf = design
    se = sampling.standard_error(pmf, n=[10, 100, 1000])
    _check(plot.standard_error(se))
    flips = sampling.flip_probability(pmf, n=[10, 100])
    _check(plot.flip_probability(flips))
    grid = pmf.expand_dims(temperature=[0.5, 1.0], top_p=[0.9, 1.0]).copy()
    grid = grid.copy(data=grid.values**1.0)
    ds = xr.Dataset({"pmf": pmf, "decoding_pmf": grid.transpose(..., "score")})
    bias = sampling.decoding_bias(ds) + xr.DataArray([0.0, 0.5], dims="temperature")
    fig = plot.decoding_bias(bias)
    _check(fig)
    assert len(fig.axes) == 2


def test_decoding_bias_layout_does_not_overlap():
    pmf = synthetic_pmf(DESIGNS[2], n_items=4, seed=2, concentration=0.5)
    grid = pmf.expand_dims(temperature=[0.5, 1.0, 1.5], top_p=[0.8, 0.9, 1.0])
    ds = xr.Dataset({"pmf": pmf, "decoding_pmf": grid.transpose(..., "score")})
    bias = sampling.decoding_bias(ds) + xr.DataArray([-1.0, 0.0, 0.5], dims="temperature")
    cns = xr.DataArray([0.55, 0.29, 0.5], dims="model", coords={"model": pmf.model})
    long = ["SmolLM2-135M-Instruct", "Qwen2.5-Coder-0.5B-Instruct", "Gemma-3-270M"]
    bias = bias.assign_coords(model=long)  # the demo's names: a wide legend
    fig = plot.decoding_bias(bias, by="model", consensus=cns.assign_coords(model=bias.model))
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    (legend,) = fig.legends
    boxes = {"legend": legend.get_window_extent(r), "title": fig._suptitle.get_window_extent(r)}
    boxes |= {f"axes{i}": ax.get_tightbbox(r) for i, ax in enumerate(fig.axes)}
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if {a, b} != {"axes0", "axes1"}:  # the two panels share the y axis, side by side
                assert not boxes[a].overlaps(boxes[b]), (a, b)
    plt.close(fig)


def test_arguments_after_the_data_are_keyword_only():
    pmf = synthetic_pmf(DESIGNS[2], n_items=3, seed=3)
    se = sampling.standard_error(pmf, n=[10, 100])
    with pytest.raises(TypeError, match="positional argument"):
        plot.standard_error(se, "target")
    new = plot.standard_error(se, by="target")
    assert [t.get_text() for t in new.axes[0].get_legend().get_texts()]
    fig, ax = plt.subplots()
    flips = sampling.flip_probability(pmf, n=[10])
    with pytest.raises(TypeError, match="positional argument"):
        plot.flip_probability(flips, ax, False)
    got = plot.flip_probability(flips, ax=ax, log_x=False)
    assert got is fig and ax.get_xscale() == "linear"
