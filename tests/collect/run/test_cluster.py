"""The Ray executor on a local cluster of two nodes (two ``ray start`` processes on this
machine): the file one process makes, a replica killed mid-run, the driver killed with
``kill -9`` then rerun, a model the cluster has no room for refused before it loads.

One cluster per session (its start costs seconds), on one xdist worker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.results import without_session
from support.tiny import save_answering_tiny, save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.core.errors import CollectionError

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("ray_cluster")]

TESTS = Path(__file__).resolve().parents[2]  # tests/ (support/ is in it)
ROOT = TESTS.parent
KW = {"progress": False, "batch_size": 2, "chunk_size": 2, "top_k": 3, "reply_tokens": 3,
      "own_words_tol": 0.05, "own_words_max_passes": 12}  # fmt: skip
LEVELS = ["first_token", "greedy", "own_words"]


@pytest.fixture(scope="session")
def ray_cluster():
    """A head and a second node, one CPU each, on loopback; stopped in teardown, always."""
    pytest.importorskip("ray")
    from support.ray_cluster import LocalCluster

    cluster = LocalCluster(nodes=2, cpus=1)
    try:
        yield cluster
    finally:
        cluster.stop()


def executor(cluster, **kw):
    from xlikert.collect.run.cluster import RayExecutor

    return RayExecutor(cluster.address, **kw)


def elicited() -> xr.Dataset:
    """2 targets x 3 items x 3 elicitation levels: first-token, greedy and own-words cells."""
    return tiny_prompts(n_targets=2, n_items=3).expand_dims(elicitation=LEVELS)


def sequential() -> xr.Dataset:
    return tiny_prompts(n_targets=2, n_items=3).expand_dims(
        administration=["isolated", "sequential"]
    )


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("cluster")
    return [{"name": "tiny", "source": str(save_answering_tiny(root / "a"))},
            {"name": "tiny2", "source": str(save_tiny(root / "b", seed=3))}]  # fmt: skip


@pytest.fixture(scope="module")
def one(spec, tmp_path_factory) -> Path:
    """The single-process file of the elicitation study."""
    out = tmp_path_factory.mktemp("one") / "one.nc"
    collect(elicited(), spec, out, **KW)
    return out


def same_file(got: Path, want: Path) -> dict:
    """``got`` equals ``want`` in every value (bit for bit), dtype, key and attr, but the
    cluster record, which is returned."""
    a, b = without_session(want), without_session(got)
    record = b.attrs.pop("cluster")
    assert "cluster" not in a.attrs
    xr.testing.assert_identical(b, a)
    for v in a.variables:
        assert a[v].dtype == b[v].dtype, v
        if a[v].dtype.kind in "fiucb":
            assert a[v].values.tobytes() == b[v].values.tobytes(), v
    return __import__("json").loads(record.removeprefix("xlikert-json:"))


def test_cluster_run_is_the_single_process_file(ray_cluster, spec, one, tmp_path):
    out = tmp_path / "ray.nc"
    ex = executor(ray_cluster, replicas=2, batch_seconds=60.0)  # batches: half a share at most
    collect(elicited(), spec, out, executor=ex, **KW)
    # several units per call once a model's speed is known, every unit saved once
    assert ex.timing["saves"] == len(same_file(out, one)["units"]) == 18
    assert ex.timing["batches"] < ex.timing["saves"]
    record = same_file(out, one)
    assert len(record["nodes"]) == 2
    used = [r for r in record["replicas"] if r["units"]]
    assert {r["model"] for r in used} == {"tiny", "tiny2"}
    assert sum(r["units"] for r in used) == len(record["units"])
    assert set(record["units"].values()) <= {r["replica"] for r in record["replicas"]}


def test_a_replica_killed_mid_run_gives_the_same_file(ray_cluster, spec, one, tmp_path):
    ex = executor(ray_cluster, replicas=2)
    killed: list[int] = []

    def kill_one(done: int, total: int) -> None:
        busy = [r for r in ex.live_replicas() if r.get("busy") and r.get("pid")]
        if not killed and busy:
            killed.append(busy[0]["pid"])
            os.kill(busy[0]["pid"], signal.SIGKILL)

    out = tmp_path / "ray.nc"
    collect(elicited(), spec, out, executor=ex, on_unit=kill_one, **KW)
    assert killed, "no replica was busy when a unit was saved"
    record = same_file(out, one)
    died = [r for r in record["replicas"] if r["ended"] == "died"]
    assert [r["pid"] for r in died] == killed
    # every unit saved once, by a replica that finished it
    assert len(record["units"]) == sum(r["units"] for r in record["replicas"])


DRIVER = """
import sys, time
from support.tiny import tiny_prompts
from xlikert.collect import collect
from xlikert.collect.run.cluster import RayExecutor
from xlikert.collect.run.interrupt import RunInterrupted
prompts = tiny_prompts(n_targets=2, n_items=3).expand_dims(
    administration=["isolated", "sequential"])
try:
    collect(prompts, [{"name": "tiny2", "source": sys.argv[2]}], sys.argv[3], progress=False,
            batch_size=2, chunk_size=2, top_k=3, executor=RayExecutor(sys.argv[1], replicas=2),
            on_unit=lambda done, total: time.sleep(float(sys.argv[4])))
except RunInterrupted as exc:
    print(exc, file=sys.stderr)
    sys.exit(exc.exit_status)
"""


def test_driver_killed_then_rerun_gives_the_same_file(ray_cluster, spec, tmp_path):
    """``kill -9`` of the driver after some units are saved; the rerun (sequential and
    isolated cells) computes only the rest and writes the single-process file."""
    model = [spec[1]]
    clean = tmp_path / "clean.nc"
    collect(sequential(), model, clean, batch_size=2, chunk_size=2, top_k=3, progress=False)
    out = tmp_path / "killed.nc"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS),
                                                      os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, ray_cluster.address,
                             model[0]["source"], str(out), "1.0"], env=env)  # fmt: skip
    partial = tmp_path / "killed.nc.partial"
    deadline = time.time() + 240
    while time.time() < deadline and len(list(partial.glob("m*-u*.npz"))) < 2:
        assert proc.poll() is None, "the driver ended before it was killed"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = {int(re.match(r"m0*-u(\d+)-", f.name).group(1)) for f in partial.glob("m*-u*.npz")}
    assert len(saved) >= 2 and not out.exists()
    with pytest.warns(UserWarning, match="took over the lock"):
        ds = collect(sequential(), model, out, batch_size=2, chunk_size=2, top_k=3,
                     progress=False, executor=executor(ray_cluster, replicas=2))  # fmt: skip
    record = same_file(out, clean)
    # the saved units were not computed again; every other unit was, once
    again = {int(k.split("/")[1]) for k in record["units"]}
    assert not again & saved and again | saved == set(range(n_units(model)))
    assert ds.attrs["xlikert_fingerprint"] == xr.open_dataset(clean).attrs["xlikert_fingerprint"]


def n_units(model: list[dict]) -> int:
    """The units of the sequential study's plan (one per 2 isolated cells of one system
    prompt, one per conversation)."""
    from xlikert.collect.run.checked import check_run
    from xlikert.collect.run.runner import Plan

    run = check_run(sequential(), model, None, options=None, shard=None, reuse=(),
                    overrides={"batch_size": 2, "chunk_size": 2, "top_k": 3})  # fmt: skip
    return len(Plan(run).units)


def test_a_model_the_cluster_has_no_room_for_is_refused_before_it_loads(ray_cluster, spec,
                                                                        tmp_path):  # fmt: skip
    big = [spec[0], {**spec[1], "name": "big", "device": "cuda"}]
    out = tmp_path / "no.nc"
    with pytest.raises(CollectionError, match=r"model 'big' asks for 1 GPU\(s\) .* has 0 GPU"):
        collect(elicited(), big, out, executor=executor(ray_cluster), **KW)
    assert not out.exists() and not (tmp_path / "no.nc.partial").exists()


def test_without_ray_the_error_names_the_extra(monkeypatch, spec):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(CollectionError, match=r"pip install 'xlikert\[ray\]'"):
        collect(elicited(), spec, executor="ray", **KW)


def test_the_executor_is_refused_by_name_before_anything_runs(spec):
    with pytest.raises(CollectionError, match="executor must be one of"):
        collect(elicited(), spec, executor="dask", **KW)
    with pytest.raises(CollectionError, match="replicas must be an integer >= 1"):
        collect(elicited(), spec, executor="ray", replicas=0, **KW)


def test_xlikert_run_ray_refuses_by_name_before_anything_loads(ray_cluster, spec, tmp_path):
    """``xlikert run --ray ADDRESS`` takes the Ray executor: a model asking for a GPU the
    cluster lacks is refused by name, nothing written."""
    from click.testing import CliRunner

    from xlikert.cli import main

    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "ray"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA"]\n\n'
        f'[[models]]\nname = "gpu"\nsource = "{spec[1]["source"]}"\ndevice = "cuda"\n'
    )
    out = tmp_path / "o.nc"
    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--ray", ray_cluster.address,
                                    "--quiet"])  # fmt: skip
    assert res.exit_code != 0 and "model 'gpu' asks for 1 GPU(s)" in res.output, res.output
    assert not out.exists() and not (tmp_path / "o.nc.partial").exists()
    bad = CliRunner().invoke(main, ["run", str(cfg), "--replicas", "0", "--ray", "auto"])
    assert bad.exit_code != 0 and "replicas must be an integer >= 1" in bad.output


def test_sigterm_stops_the_driver_after_saving_every_finished_unit(ray_cluster, spec, tmp_path):
    """SIGTERM to a driver on the cluster: every finished unit saved, the replicas ended,
    exit status 143 and the message saying how to resume; the lock is free again."""
    from xlikert.collect.run.lock import RunLock

    out = tmp_path / "t.nc"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS),
                                                      os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, ray_cluster.address,
                             spec[1]["source"], str(out), "1.0"], env=env, text=True,
                            stderr=subprocess.PIPE)  # fmt: skip
    partial = tmp_path / "t.nc.partial"
    deadline = time.time() + 240
    while time.time() < deadline and not list(partial.glob("m*-u*.npz")):
        assert proc.poll() is None, "the driver ended before the signal"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "stopped by SIGTERM after saving every finished unit" in err
    assert list(partial.glob("m*-u*.npz")) and not out.exists()
    lock = RunLock(partial, out)
    lock.acquire()  # free (no LockHeld): the stopped run released it
    lock.release()
