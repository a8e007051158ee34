"""netCDF round trips: bit-exact data, attrs preserved, atomic writes."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from support.pmfs import make_pmf

import xlikert as xl
from xlikert.core.errors import ConfigError
from xlikert.datasets import synthetic_pmf


def assert_bit_exact(a: xr.Dataset, b: xr.Dataset) -> None:
    xr.testing.assert_identical(a, b)
    for name in a.variables:
        va, vb = np.asarray(a[name].values), np.asarray(b[name].values)
        if va.dtype.kind == "f":
            assert va.tobytes() == vb.astype(va.dtype).tobytes(), name
        else:
            assert va.tolist() == vb.tolist(), name
        assert a[name].attrs == b[name].attrs


def results_dataset() -> xr.Dataset:
    pmf = make_pmf([2, 3], n_items=3, n_scores=7, zeros=0.2, seed=1)
    pmf = pmf.assign_coords(f0=["Aya-32B", "Qwen3 Next-80B"], f1=["USA", "China", "Côte d'Ivoire"])
    ds = pmf.to_dataset()
    ds["valid_mass"] = xr.full_like(pmf.isel(score=0, drop=True), 0.97)
    ds["prompt_text"] = xr.DataArray(
        np.array([[["p"] * 3] * 3] * 2, dtype=object), dims=("f0", "f1", "item")
    )
    ds.attrs = {
        "instrument": "CETSCALE",
        "scale": [1, 7],
        "revisions": {"Aya-32B": "abc", "Qwen3 Next-80B": None},
        "trust_remote_code": False,
        "note": None,
        "surface_forms": ["1", "2", "▁3"],
        "mixed": [1, "a"],
        "one_name": ["Aya-32B"],  # netCDF alone reads a one-element list back as a scalar
        "one_number": [0.5],
        "temperature": 0.7,
    }
    ds["pmf"].attrs = {"renormalised": True, "units": "probability"}
    return ds


def test_results_round_trip(tmp_path):
    ds = results_dataset()
    path = xl.to_netcdf(ds, tmp_path / "results.nc")
    back = xl.open_results(path)
    assert_bit_exact(
        ds.drop_vars("prompt_text"), xl.core.io.decode_attrs(back).drop_vars("prompt_text")
    )
    assert back["prompt_text"].values.tolist() == ds["prompt_text"].values.tolist()
    attrs = back.likert.attrs  # the structure, decoded from the JSON text netCDF holds
    assert attrs["revisions"] == {"Aya-32B": "abc", "Qwen3 Next-80B": None}
    assert attrs["trust_remote_code"] is False
    assert attrs["note"] is None
    assert list(attrs["surface_forms"]) == ["1", "2", "▁3"]
    assert attrs["mixed"] == [1, "a"]
    assert attrs["one_name"] == ["Aya-32B"] and attrs["one_number"] == [0.5]
    assert back["pmf"].likert.attrs["renormalised"] is True
    assert isinstance(back.attrs["revisions"], str)  # as stored: netCDF-ready
    # loaded into memory, file closed: the path can be replaced at once
    xl.to_netcdf(back, path)
    assert [p.name for p in tmp_path.iterdir()] == ["results.nc"]


def test_results_round_trip_the_xarray_way(tmp_path):
    """An xlikert Dataset writes with ds.to_netcdf and reads with xr.open_dataset, as any."""
    ds = xl.core.io.encode_attrs(results_dataset())
    xr.testing.assert_identical(xl.core.io.encode_attrs(ds), ds)  # encoding is idempotent
    ds.to_netcdf(tmp_path / "plain.nc")
    plain = xr.load_dataset(tmp_path / "plain.nc")
    back = xl.open_results(tmp_path / "plain.nc")
    assert_bit_exact(back, plain)
    assert plain.likert.attrs == ds.likert.attrs == xl.core.io.read_attrs(results_dataset())
    # written again by xarray: the same file content
    back.to_netcdf(tmp_path / "again.nc")
    assert_bit_exact(xr.load_dataset(tmp_path / "again.nc"), plain)
    # and the analysis runs on what plain xarray read
    xr.testing.assert_identical(xl.composite(plain), xl.composite(ds))


def test_dataarray_round_trip(tmp_path):
    pmf = make_pmf([2], n_items=2)
    xl.to_netcdf(pmf, tmp_path / "a.nc")
    back = xl.open_results(tmp_path / "a.nc")
    xr.testing.assert_identical(back["pmf"], pmf)


def test_decomposition_round_trip_with_inf_and_string_coords(tmp_path):
    pmf = make_pmf([3, 2], n_items=2, n_scores=4, seed=3)
    pmf = pmf.assign_coords(f0=["Aya-32B", "Gemma 3-27B", "Llama"], f1=["USA", "China"])
    dec = xl.decompose(pmf)
    snr = dec["f0"].ds["SNR"].copy()
    snr[0] = np.inf
    dec["f0"] = dec["f0"].to_dataset().assign(SNR=snr)
    path = xl.to_netcdf(dec, tmp_path / "dec.nc")
    back = xl.open_decomposition(path)
    xr.testing.assert_identical(dec, back)
    assert back.attrs["decompose_factors"] == ["f0", "f1"]
    assert np.isinf(back["f0"].SNR.values[0])
    for node in dec.subtree:
        assert_bit_exact(node.to_dataset(inherit=False), back[node.path].to_dataset(inherit=False))
    assert xl.summary_table(back).equals(xl.summary_table(dec))


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    ds = results_dataset()
    path = tmp_path / "r.nc"
    xl.to_netcdf(ds, path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        xl.to_netcdf(ds, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]


def test_io_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="no such netCDF file"):
        xl.open_results(tmp_path / "missing.nc")
    with pytest.raises(ConfigError, match="does not exist"):
        xl.to_netcdf(make_pmf([2]), tmp_path / "nodir" / "x.nc")


def test_written_file_gets_default_permissions(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = xl.to_netcdf(synthetic_pmf({"model": 2}, n_items=2).to_dataset(), tmp_path / "r.nc")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_atomic_write_of_a_file_and_a_folder(tmp_path):
    """Whole or absent: an error inside the block leaves the target as it was and no
    temporary behind; a folder replaces the old one only once complete."""
    from xlikert.core.io import atomic_write

    target = tmp_path / "f.bin"
    with atomic_write(target) as part:
        assert part.parent == tmp_path and part.name.startswith(".f.bin.")
        part.write_bytes(b"one")
    with pytest.raises(KeyboardInterrupt), atomic_write(target) as part:
        part.write_bytes(b"tw")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"one" and sorted(tmp_path.iterdir()) == [target]
    folder = tmp_path / "d"
    for text in ("old", "new"):
        with atomic_write(folder, folder=True) as part:
            part.mkdir()
            (part / "x.txt").write_text(text)
    with pytest.raises(OSError), atomic_write(folder, folder=True) as part:
        part.mkdir()
        raise OSError(28, "No space left on device")
    assert (folder / "x.txt").read_text() == "new"
    assert sorted(tmp_path.iterdir()) == [folder, target]


def test_the_atomic_write_exists_once():
    """Every move into place is core.io.atomic_write's (the zoo renames shards inside
    the folder it is writing)."""
    import ast
    from pathlib import Path

    root = Path(xl.__file__).parent
    found = [
        f"{path.relative_to(root).as_posix()}: {node.value.id}.{node.attr}"
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr in ("replace", "rename", "mkstemp")
        and isinstance(node.value, ast.Name)
        and node.value.id in ("os", "tempfile")
    ]
    assert sorted(found) == ["collect/zoo.py: os.replace", "core/io.py: os.replace"], found
