"""The cluster recipe, run on one machine: N shards as parallel processes, then merge.

What examples/slurm/collect-array.sbatch and merge.sbatch do, with the job array's
tasks as processes started at once: ``xlikert run exp.toml --shard i/N -o part-i.nc``
for every i, then ``xlikert merge part-*.nc -o results.nc``. The merged file is the
file one run makes, bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.results import without_session
from support.tiny import save_tiny

from xlikert.collect import merge_shards
from xlikert.core.errors import CollectionError

ROOT = Path(__file__).resolve().parents[3]
N = 3
CLI = "from xlikert.cli import main; main()"


def xlikert(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.Popen([sys.executable, "-c", CLI, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return out


#: One worker makes the study and its shards once (module fixtures are per worker).
pytestmark = pytest.mark.xdist_group("shards_parallel")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    """An experiment of two tiny models, 2 targets and the 17 CETSCALE items (68 cells;
    items that name no country are the same prompt on both targets), and its one-run file."""
    root = tmp_path_factory.mktemp("array")
    a, b = save_tiny(root / "a", seed=0), save_tiny(root / "b", seed=1)
    cfg = root / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "array"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA", "France"]\n\n'
        "[collect]\nchunk_size = 5\nbatch_size = 4\ntop_k = 5\n\n"
        f'[[models]]\nname = "a"\nsource = "{a}"\n\n[[models]]\nname = "b"\nsource = "{b}"\n'
    )
    from click.testing import CliRunner

    from xlikert.cli import main

    # the one run in this process (the shards below are processes of their own)
    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(root / "one.nc"), "--quiet"])
    assert res.exit_code == 0, res.output
    return cfg, root


@pytest.fixture(scope="module")
def parts(study) -> list[Path]:
    """The N shard files, run as N processes at once (the array's tasks)."""
    cfg, root = study
    parts = [root / f"part-{i}.nc" for i in range(1, N + 1)]
    procs = [xlikert("run", str(cfg), "--shard", f"{i}/{N}", "-o", str(p), "--quiet")
             for i, p in enumerate(parts, 1)]  # fmt: skip
    for proc in procs:
        assert "wrote" in finish(proc)
    return parts


def test_n_shards_in_parallel_then_merge_is_one_run_bit_for_bit(study, parts):
    _, root = study
    merged = root / "merged.nc"
    said = finish(xlikert("merge", *map(str, parts), "-o", str(merged)))
    assert f"from {N} shards" in said
    one, got = without_session(root / "one.nc"), without_session(merged)
    # the same prompt on both targets is computed once, by the shard holding the first
    assert got.attrs["cells_copied"] == one.attrs["cells_copied"] > 0
    xr.testing.assert_identical(got, one)
    for v in one.data_vars:  # bit for bit, NaN included
        a, b = one[v].values, got[v].values
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), v


def test_merge_names_a_missing_or_repeated_shard(study, parts):
    _, root = study
    with pytest.raises(CollectionError, match=rf"shard\(s\) 2/{N} missing .*--shard 2/{N}"):
        merge_shards([parts[0], parts[2]])
    copy = root / "p1-again.nc"
    copy.write_bytes(parts[0].read_bytes())
    with pytest.raises(
        CollectionError, match=rf"shard 1/{N} is given 2 times \({parts[0]}, {copy}\)"
    ):
        merge_shards([parts[0], copy, *parts[1:]])
    proc = xlikert("merge", str(parts[0]), str(parts[1]), "-o", str(root / "x.nc"))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode != 0 and f"3/{N} missing" in err and not (root / "x.nc").exists()


def test_shard_files_reused_give_the_one_run_cells(study, parts):
    """Shard files as --reuse sources: each gives the cells it computed (not the empty
    cells another shard computed), so nothing is computed and no model loads."""
    from xlikert.cli.collect import _run_options
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    cfg, root = study
    exp = load_experiment(str(cfg))
    options = _run_options(exp.collect, "exp.toml [collect]")
    ds = collect(exp.build_prompts(), exp.models, root / "again.nc", options=options,
                 reuse=parts, progress=False, loader=None)  # fmt: skip
    assert ds.attrs["cells_computed"] == 0 and ds.attrs["cells_copied"] == 0
    assert ds.attrs["cells_reused"] == ds.cell_key.size
    one = without_session(root / "one.nc")
    for v in ("pmf", "valid_mass", "decoding_pmf", "topk_token", "prompt_token_ids", "cell_key"):
        np.testing.assert_array_equal(ds[v].values, one[v].values, err_msg=v)  # exact
