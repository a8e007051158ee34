"""Runs that survive how clusters treat them: one run per output, signals, full disks."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.results import without_session
from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.run.interrupt import RunInterrupted
from xlikert.collect.run.lock import LockHeld, RunLock
from xlikert.core.errors import CollectionError

TESTS = Path(__file__).resolve().parents[2]
CHILD = TESTS / "support" / "collect_child.py"
KW = {"progress": False, "batch_size": 2, "chunk_size": 2}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(save_tiny(tmp_path_factory.mktemp("safety") / "model"))


@pytest.fixture(scope="module")
def clean(tiny, tmp_path_factory) -> xr.Dataset:
    """The file an uninterrupted run makes (its session attrs dropped)."""
    out = tmp_path_factory.mktemp("clean") / "clean.nc"
    collect(tiny_prompts(), spec(tiny), out, **KW)
    return without_session(out)


def spec(tiny: str) -> list[dict[str, str]]:
    return [{"name": "tiny", "source": tiny}]


def child(tiny: str, out: Path, **cfg) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    arg = json.dumps({"model_dir": tiny, "out": str(out), "models": ["tiny"], **cfg})
    return subprocess.Popen([sys.executable, str(CHILD), arg], env=env, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


# ----------------------------------------------------------------------------- the lock
def test_a_second_run_on_one_output_stops_naming_the_holder(tiny, tmp_path):
    out = tmp_path / "r.nc"
    proc = child(tiny, out, delay=0.5, ready=str(tmp_path / "ready"))
    try:
        wait_for(tmp_path / "ready", proc)
        with pytest.raises(LockHeld) as err:
            collect(tiny_prompts(), spec(tiny), out, **KW)
        msg = str(err.value)
        assert f"host {socket.gethostname()}, process {proc.pid}, started 20" in msg
        assert f"output {out} is being collected by another run" in msg
        # the command line says the same and fails
        from click.testing import CliRunner

        from xlikert.cli import main

        cfg = tmp_path / "e.toml"
        cfg.write_text('[experiment]\nname = "e"\ninstrument = "cetscale"\n\n'
                       '[factors.target]\nlevels = ["USA"]\n\n'
                       f'[[models]]\nname = "tiny"\nsource = "{tiny}"\n')  # fmt: skip
        res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet"])
        assert res.exit_code == 1 and f"process {proc.pid}" in res.output
    finally:
        proc.kill()
        proc.wait()
    # killed (SIGKILL): its lock file stays, naming it; the next run takes it over
    assert json.loads((tmp_path / "r.nc.partial" / "lock").read_text())["pid"] == proc.pid
    with pytest.warns(UserWarning, match=rf"took over the lock .* process {proc.pid}.*that "
                      "process is gone"):  # fmt: skip
        collect(tiny_prompts(), spec(tiny), out, **KW)
    assert out.exists() and not (tmp_path / "r.nc.partial").exists()


def test_a_stale_lock_is_taken_over_and_said(tiny, tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    folder = tmp_path / "r.nc.partial"
    folder.mkdir()
    record = {"host": socket.gethostname(), "pid": gone.pid, "started": "2025-01-02T03:04:05+00:00"}
    (folder / "lock").write_text(json.dumps(record))
    with pytest.warns(UserWarning) as said:
        collect(tiny_prompts(1, 2), spec(tiny), tmp_path / "r.nc", **KW)
    (line,) = [str(w.message) for w in said if "took over" in str(w.message)]
    assert line == (
        f"took over the lock {folder / 'lock'} left by host {socket.gethostname()}, process "
        f"{gone.pid}, started 2025-01-02T03:04:05+00:00: that process is gone"
    )
    # a lock of another host whose run ended (nobody holds it) is taken over too
    folder.mkdir()
    (folder / "lock").write_text(json.dumps({**record, "host": "node-17"}))
    lock = RunLock(folder, tmp_path / "r.nc")
    said = lock.acquire()
    assert said.startswith(f"took over the lock {folder / 'lock'} left by host node-17, ")
    assert said.endswith("it no longer holds the lock (that run ended)")
    assert json.loads((folder / "lock").read_text())["pid"] == os.getpid()
    lock.release()
    assert not (folder / "lock").exists()


# ----------------------------------------------------------------------------- signals
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_after_saving_and_the_rerun_is_a_clean_run(
    tiny, clean, tmp_path, sig
):
    out, partial = tmp_path / "r.nc", tmp_path / "r.nc.partial"
    proc = child(tiny, out, delay=0.4, ready=str(tmp_path / "ready"))
    wait_for(tmp_path / "ready", proc)
    time.sleep(0.2)  # inside the next unit's wait, or its scoring
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {sig.name} after saving every finished unit" in err
    assert f"saved in {partial}" in err and "rerun the same command to resume" in err
    saved = list(partial.glob("m*-u*.npz"))
    assert 1 <= len(saved) < 8 and not out.exists() and not (partial / "lock").exists()
    for f in saved:  # every saved unit is whole
        with np.load(f) as z:
            assert z["pmf"].shape[0] == len(z["cell_key"])
    collect(tiny_prompts(), spec(tiny), out, **KW)
    xr.testing.assert_identical(without_session(out), clean)


# ----------------------------------------------------------------------------- full disks
def _mount_tmpfs(path: Path, size: str) -> bool:
    """A small tmpfs at ``path`` (root only); False where mounting is not possible."""
    path.mkdir()
    if os.geteuid() != 0:
        return False
    run = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                         capture_output=True, check=False)  # fmt: skip
    return run.returncode == 0


def _fill(path: Path) -> Path:
    """A file that takes every free byte of the filesystem of ``path``."""
    filler = path / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _saved(out: Path) -> list[Path]:
    return sorted(out.with_name(out.name + ".partial").glob("m*-u*.npz"))


def _full_disk_then_free(tiny: str, folder: Path, make_full) -> tuple[str, list[str], Path]:
    """Run until the disk is full after two units; the message, the units saved, the output."""
    out = folder / "r.nc"

    def after(done, total):
        if len(_saved(out)) == 2:
            make_full()

    with pytest.raises(CollectionError) as err:
        collect(tiny_prompts(), spec(tiny), out, on_unit=after, **KW)
    saved = sorted(p.name for p in (folder / "r.nc.partial").glob("m*-u*.npz"))
    return str(err.value), saved, out


@pytest.mark.parametrize("how", ["tmpfs", "mocked"])
def test_a_full_filesystem_loses_nothing_and_the_rerun_completes_identically(
    tiny, clean, tmp_path, monkeypatch, how
):
    """On a real 2 MB tmpfs (mounted where the test may: root), and with ENOSPC raised by
    the write itself (mocked, for machines that cannot mount)."""
    disk = tmp_path / "disk"
    mounted = how == "tmpfs" and _mount_tmpfs(disk, "2m")
    if how == "tmpfs" and not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root); the mocked case runs instead")
    try:
        filler: list[Path] = []
        if mounted:
            make_full = lambda: filler.append(_fill(disk))  # noqa: E731
        else:
            disk.mkdir(exist_ok=True)
            real = np.savez

            def savez(fh, **arrays):
                raise OSError(errno.ENOSPC, "No space left on device")

            make_full = lambda: monkeypatch.setattr(np, "savez", savez)  # noqa: E731
        msg, saved, out = _full_disk_then_free(tiny, disk, make_full)
        assert re.search(rf"cannot write finished unit 2 of model 0 to {disk}/r.nc.partial/"
                         r"m000-u00002-[0-9a-f]{16}\.npz: ", msg)  # fmt: skip
        assert "No space left on device (ENOSPC)" in msg
        assert "the 2 unit(s) saved before in" in msg and "free space" in msg
        assert len(saved) == 2 and not out.exists()
        assert not list((disk / "r.nc.partial").glob(".*tmp*"))  # no half-written file
        assert not (disk / "r.nc.partial" / "lock").exists()
        for f in (disk / "r.nc.partial").glob("m*-u*.npz"):  # what was saved is whole
            with np.load(f) as z:
                assert z["pmf"].shape == (2, 7)
        if mounted:  # space freed
            filler[0].unlink()
        else:
            monkeypatch.setattr(np, "savez", real)
        collect(tiny_prompts(), spec(tiny), out, **KW)
        xr.testing.assert_identical(without_session(out), clean)
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)


def test_a_read_only_folder_is_named_before_anything_runs(tiny, tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "4m"):
        pytest.skip("needs root to mount a tmpfs")
    try:
        out = disk / "r.nc"

        def stop(done, total):
            if len(_saved(out)) == 2:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            collect(tiny_prompts(), spec(tiny), out, on_unit=stop, **KW)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(CollectionError, match=rf"cannot write output {out}: directory "
                           rf"{disk} is not writable"):  # fmt: skip
            collect(tiny_prompts(), spec(tiny), out, **KW)
        assert len(list((disk / "r.nc.partial").glob("m*-u*.npz"))) == 2
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        ds = collect(tiny_prompts(), spec(tiny), out, **KW)
        assert ds.attrs["cells_computed"] == 15 - 2  # item 5: computed once, copied twice
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _signal_on_render(monkeypatch, after: int) -> dict[str, int]:
    """SIGTERM to this process from inside the ``after``-th chat template rendered from
    now on (the template then renders to its end, as a real one does)."""
    from transformers import PreTrainedTokenizerBase

    render = PreTrainedTokenizerBase.apply_chat_template
    calls = {"n": 0, "sent": 0}

    def rendering(self, *args, **kw):
        calls["n"] += 1
        if calls["n"] == after:
            calls["sent"] += 1
            os.kill(os.getpid(), signal.SIGTERM)  # handled between two bytecodes, in here
        return render(self, *args, **kw)

    monkeypatch.setattr(PreTrainedTokenizerBase, "apply_chat_template", rendering)
    return calls


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signals are handled in the main thread only",
)
@pytest.mark.parametrize("after", [1, 20])  # while keys are predicted; while units are read
def test_a_signal_inside_a_chat_template_stops_the_run_and_never_changes_a_prompt(
    tiny, clean, tmp_path, monkeypatch, after
):
    # A chat template that refuses a system turn is rendered again with the system
    # prompt merged into the user turn; a signal arriving inside the template must not
    # look like such a refusal (seen once: the rerun failed the key check, exit 1).
    out, before = tmp_path / "r.nc", signal.getsignal(signal.SIGTERM)
    calls = _signal_on_render(monkeypatch, after)
    with pytest.raises(RunInterrupted) as err:
        collect(tiny_prompts(), spec(tiny), out, **KW)
    assert calls["sent"] == 1 and err.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before  # the run's handler is gone
    monkeypatch.undo()
    collect(tiny_prompts(), spec(tiny), out, **KW)
    xr.testing.assert_identical(without_session(out), clean)
