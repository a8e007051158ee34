"""Units streamed to disk: a run with an output writes its file block by block from the
saved units and returns it opened lazily; the values and attrs are those of the
in-memory assembly."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.results import SESSION_ATTRS
from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.run import session
from xlikert.collect.run.stream import StoredUnit, _open_lazily
from xlikert.core.io import open_results

KW = {"progress": False, "batch_size": 2, "chunk_size": 2}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> list[dict[str, str]]:
    return [{"name": "tiny", "source": str(save_tiny(tmp_path_factory.mktemp("s") / "m"))}]


def _same(a: xr.Dataset, b: xr.Dataset) -> None:
    """Every variable's values, dtype and attrs, and the file's attrs but the session's."""
    assert sorted(a.variables) == sorted(b.variables)
    for k in a.variables:
        assert a[k].dims == b[k].dims, k
        assert a[k].dtype == b[k].dtype, (k, a[k].dtype, b[k].dtype)
        np.testing.assert_array_equal(a[k].values, b[k].values, err_msg=k)
        assert a[k].attrs == b[k].attrs, k
    drop = lambda d: {k: str(v) for k, v in d.items() if k not in SESSION_ATTRS}  # noqa: E731
    assert drop(a.attrs) == drop(b.attrs)


def _open_here(path: Path) -> bool:
    fds = Path("/proc/self/fd")
    return any(os.path.realpath(f) == str(path.resolve()) for f in fds.iterdir()
               if f.is_symlink())  # fmt: skip


def test_a_streamed_file_equals_the_in_memory_assembly(tiny, tmp_path, monkeypatch):
    """Blocks of 4 cells over 15 cells in units of 2 (units across blocks; item 5 a twin
    copied twice): the returned Dataset and the file equal the in-memory assembly."""
    monkeypatch.setattr(session, "BLOCK_CELLS", 4)
    memory = collect(tiny_prompts(), tiny, **KW)
    out = tmp_path / "r.nc"
    returned = collect(tiny_prompts(), tiny, out, **KW)
    assert int(returned.attrs["cells_copied"]) == 2
    assert not returned["pmf"].variable._in_memory  # opened lazily
    assert not returned["prompt_text"].variable._in_memory  # read when used, as open_dataset
    if Path("/proc/self/fd").is_dir():
        assert not _open_here(out)  # no handle held: reopened when read
    assert isinstance(returned["pmf"].sel(item="1").values, np.ndarray)  # numpy, not dask
    _same(memory, returned.load())
    _same(memory, open_results(out))
    assert not out.with_name("r.nc.partial").exists()  # the file holds the units


def test_open_lazily_decodes_text_as_xarray_does(tiny, tmp_path):
    out = tmp_path / "r.nc"
    collect(tiny_prompts(n_targets=3, n_items=4), tiny, out, **KW)
    lazy = _open_lazily(out, block_cells=2)  # one target level a block
    assert not lazy["prompt_text"].variable._in_memory and lazy["prompt_text"].chunks is None
    _same(open_results(out), lazy.load())
    lazy.close()
    if Path("/proc/self/fd").is_dir():
        assert not _open_here(out)  # ds.close() closes what reading opened


def test_the_returned_dataset_written_over_its_own_file_by_xlikert(tiny, tmp_path):
    """xl.to_netcdf writes a temporary file and renames it: the lazily read result can be
    written over its own file (an attr added), and the file holds the same values."""
    import xlikert as xl

    out = tmp_path / "r.nc"
    ds = collect(tiny_prompts(n_items=3), tiny, out, **KW)
    before = open_results(out).load()
    ds.attrs["note"] = "checked"
    xl.to_netcdf(ds, out)
    after = open_results(out)
    assert after.attrs["note"] == "checked"
    after.attrs.pop("note")
    _same(before, after)


def test_a_returned_dataset_refuses_a_file_written_again(tiny, tmp_path):
    """The Dataset collect returned reads its file lazily: after the output is written
    again (another configuration), reading it is refused by name, never another run's."""
    from xlikert.core.errors import CollectionError

    out = tmp_path / "r.nc"
    first = collect(tiny_prompts(n_items=3), tiny, out, **KW)
    kept = collect(tiny_prompts(n_items=3), tiny, tmp_path / "k.nc", **KW).load()
    collect(tiny_prompts(n_items=4), tiny, out, overwrite=True, **KW)
    for name in ("pmf", "prompt_text"):
        with pytest.raises(CollectionError, match=rf"the results file {out} was replaced"):
            first[name].load()
    _same(kept, collect(tiny_prompts(n_items=3), tiny, tmp_path / "k.nc", **KW).load())


def test_a_stored_unit_reads_its_arrays_from_its_file(tmp_path):
    from xlikert.collect.record import UnitResult

    r = UnitResult.empty(3, {"score": 7, "rank": 2, "temperature": 1, "top_p": 1}, traces=2)
    r.data["pmf"][:] = np.arange(21.0).reshape(3, 7)
    r.cells = np.array([0, 4, 9])
    np.savez(tmp_path / "u.npz", **r.to_arrays())
    s = StoredUnit.of(r, tmp_path / "u.npz")
    assert s.traces == 2 and not s.bounded and s.mode == "exact"
    assert sorted(s.data) == sorted(r.data) and "pmf" in s.data and "nope" not in s.data
    np.testing.assert_array_equal(s.data["pmf"], r.data["pmf"])
    np.testing.assert_array_equal(s.data["prompt_text"], r.data["prompt_text"].astype(str))
    (tmp_path / "u.npz").unlink()  # nothing is held in memory: the file is read when asked
    with pytest.raises(FileNotFoundError):
        s.data["pmf"]
