"""The checks of ``.pre-commit-config.yaml`` (ruff's lint and format, import-linter), run
here over the whole tree: what a commit checks is what CI checks. The two mypy hooks run
in ``tests/test_types.py`` (the same functions; mypy runs once per check in the suite)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".pre-commit-config.yaml"


def _hooks() -> list[dict]:
    config = yaml.safe_load(CONFIG.read_text("utf-8"))
    return [hook for repo in config["repos"] for hook in repo["hooks"]]


def test_the_hooks_run_offline_with_the_test_extras_tools():
    """Local hooks only (no hook repository to fetch), the ruff and import-linter checks."""
    config = yaml.safe_load(CONFIG.read_text("utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    assert {hook["language"] for hook in _hooks()} == {"system"}
    entries = {hook["entry"] for hook in _hooks()}
    assert entries == {
        "ruff check", "ruff format --check", "lint-imports --no-cache",
        "python tests/test_types.py", "python tests/test_types.py --strict",
    }  # fmt: skip


#: The hooks tests/test_types.py runs (its test_mypy_* are these hooks' commands).
TYPE_HOOKS = ("mypy", "mypy-strict")


@pytest.mark.parametrize(
    "hook", [h for h in _hooks() if h["id"] not in TYPE_HOOKS], ids=lambda hook: hook["id"]
)
def test_hook(hook):
    """The hook's command over the tree (the files of the repository, as ``--all-files``)."""
    cmd = shlex.split(hook["entry"]) + list(hook.get("args", []))
    if shutil.which(cmd[0]) is None:
        pytest.fail(f"{cmd[0]} is not installed (it is in the test extra)")
    if hook.get("pass_filenames", True):
        cmd.append(".")  # the tool's own file discovery, as configured in pyproject.toml
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
