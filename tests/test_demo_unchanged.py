"""The committed demo results file opens and analyses as it did before questionnaires.

``tests/data/demo_analyses.nc`` holds what xlikert computed on
``xlikert/data/demo_results.nc`` (a single-scale file: one 1..7 scale, every item
ordinal, no non-substantive options) before items had their own options: made by
:func:`analyses` at main 7e1882b (before the questionnaires branch), with ``python
tests/test_demo_unchanged.py`` run from outside the repository with that tree first on
``PYTHONPATH``. Every number must stay what it was (to float rounding).

The demo file was rewritten in the current results schema (token ids, cell keys;
``tests/data/make_demo_results.py``): a prompt shared by two cells is now read once and
copied, where the old file had read it twice (float32 noise apart, at most 1.4e-5 in a
PMF). The reference was then made again the same way, by 7e1882b's code on the rewritten
file; it moved by at most 5.0e-6 (entropy), and today's code gives it bit for bit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import xarray as xr

REFERENCE = Path(__file__).parent / "data" / "demo_analyses.nc"


def analyses(ds: xr.Dataset) -> xr.Dataset:
    """Analyses of every stage that reads the scale or the items, on one results file."""
    import xlikert as xl

    bounds = xl.consensus_bounds(ds.pmf.isel(model=0, target=[0, 1]), item_dim="item")
    out = {
        "failure_rate": xl.failure_rate(ds),
        "tastle": xl.tastle_consensus(ds.pmf),
        "entropy": xl.entropy(ds.pmf, item_dim=None),
        "composite": xl.composite(ds.pmf).rename(score="total"),
        "mixture": xl.grand_mixture(ds.pmf, factors="target"),
        "consensus_lower": bounds["lower"].rename(target="bounded_target"),
        "consensus_upper": bounds["upper"].rename(target="bounded_target"),
        "alpha": xl.reliability(ds.pmf, dim="target")["alpha"],
    }
    return xr.Dataset({k: v.reset_coords(drop=True) for k, v in out.items()}, attrs={})


def test_the_demo_file_analyses_as_before():
    from xlikert.datasets import load_demo_results

    got = analyses(load_demo_results())
    want = xr.load_dataset(REFERENCE)
    assert set(got.data_vars) == set(want.data_vars)
    for name in want.data_vars:
        assert got[name].dims == want[name].dims, name
        np.testing.assert_allclose(got[name].values, want[name].values, rtol=1e-10, atol=1e-12,
                                   err_msg=name)  # fmt: skip
    # the file itself: no item options, no option axis
    ds = load_demo_results()
    assert "option" not in ds.dims and "nonsubstantive_mass" not in ds and "nominal" not in ds


def test_the_demo_file_carries_the_current_schema_and_its_token_ids():
    """Every per-cell variable of the results schema, with its dims and fill values; every
    cell's token ids open with read_sequence; its cell keys and model identities are
    today's (the demo file needs no reader of older files)."""
    from xlikert.collect import read_sequence
    from xlikert.core.io import read_attrs
    from xlikert.core.schema import variable_table
    from xlikert.datasets import load_demo_results

    ds = load_demo_results(verbose=False)
    cells = ("model", "target", "item")
    for name, var in variable_table().items():
        assert ds[name].dims == (*cells, *var.dims), name
    for name in ("cell_key", "reused_from"):
        assert ds[name].dims == cells, name
    assert (ds.cell_key != "").all() and (ds.reused_from == "").all()
    models = read_attrs(ds)["models"]
    for model in ds.model.values:
        assert models[model]["backend"] == "transformers"
        for target in ds.target.values:
            for item in ds.item.values:
                seq = read_sequence(ds, model=model, target=target, item=item)
                assert seq.ids.size > 10 and seq.trace.size == 0, (model, target, item)
    # a prompt shared by two cells (an item naming no country) was read once: one key
    usa, china = ds.sel(target="USA"), ds.sel(target="China")
    same = (usa.prompt_text == china.prompt_text).values
    assert same.any() and ((usa.cell_key == china.cell_key).values == same).all()


if __name__ == "__main__":  # regenerate the reference (see the module docstring)
    from xlikert.datasets import load_demo_results

    analyses(load_demo_results()).to_netcdf(sys.argv[1] if len(sys.argv) > 1 else REFERENCE)
