"""The wheel check (``check_wheel.py``, run by ``.ci/run``) catches a data file left out.

A copy of the tree whose package-data leaves out ``data/*.csv`` builds a wheel without
``xlikert/data/human_baseline.csv``: the contents check names it, and the installed
package fails the smoke run (``human_baseline()`` cannot read it). The real tree's wheel
passes the contents check. Built with the installed setuptools (``--no-isolation``, the
wheel only) and installed with ``--no-deps`` into a venv that sees this environment's
packages (whether this is the system interpreter, a venv or a conda env), so the test
stays offline and takes seconds; the smoke run's own guard fails
if any ``xlikert`` module came from elsewhere than the installed wheel.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import check_wheel as cw
import pytest

pytestmark = [pytest.mark.wheel, pytest.mark.xdist_group("wheel")]

PACKAGE_DATA = '"data/*"]'


def _copy_tree(dst):
    for name in [*cw.package_files(cw.ROOT), "pyproject.toml", "README.md", "LICENSE"]:
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cw.ROOT / name, target)
    return dst


@pytest.fixture(scope="module")
def build_backend():
    probe = subprocess.run([sys.executable, "-c", "import build, setuptools"], check=False)
    if probe.returncode != 0:
        pytest.fail("build and setuptools are needed (python -m pip install -e '.[test]')")


def test_a_wheel_without_a_data_file_fails_the_check(tmp_path, build_backend):
    tree = _copy_tree(tmp_path / "tree")
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text("utf-8")
    assert text.count(PACKAGE_DATA) == 1, "the package-data line to patch has changed"
    pyproject.write_text(text.replace(PACKAGE_DATA, '"data/*.nc"]'), "utf-8")
    wheel, _ = cw.build(tree, tmp_path / "dist", isolation=False)

    problems = cw.check_contents(wheel, tree)
    assert problems == ["xlikert/data/human_baseline.csv: missing from the wheel"]

    cw.make_venv(tmp_path / "venv", wheel, see_running_packages=True)
    with pytest.raises(cw.WheelCheckError, match=r"human_baseline\.csv"):
        cw.smoke(tmp_path / "venv", tree, commands=False)


def test_the_real_wheel_passes_the_contents_check(tmp_path, build_backend):
    wheel, _ = cw.build(_copy_tree(tmp_path / "tree"), tmp_path / "dist", isolation=False)
    assert cw.check_contents(wheel, cw.ROOT) == []


def test_the_contents_check_refuses_tests_and_foreign_files(tmp_path):
    """A wheel holding a test, a benchmark or a top-level folder is refused, naming each."""
    import zipfile

    real = cw.package_files(cw.ROOT)
    version = cw.version_of(cw.ROOT)
    wheel = tmp_path / f"xlikert-{version}-py3-none-any.whl"
    extra = ["xlikert/tests/test_x.py", "xlikert/conftest.py", "benchmarks/bench.py"]
    with zipfile.ZipFile(wheel, "w") as z:
        for name in [*real, *extra]:
            if name not in cw.NOT_SHIPPED:
                z.writestr(name, "")
        z.writestr(f"xlikert-{version}.dist-info/METADATA", "")
        z.writestr(f"xlikert-{version}.dist-info/licenses/LICENSE", "")
    assert cw.check_contents(wheel, cw.ROOT) == [
        "xlikert/tests/test_x.py: a test or benchmark file in the wheel",
        "xlikert/conftest.py: a test or benchmark file in the wheel",
        f"benchmarks/bench.py: outside xlikert/ and xlikert-{version}.dist-info/",
    ]


PROBE = "_xlikert_running_environment_probe"


def test_a_venv_made_from_inside_a_venv_sees_that_venvs_packages(tmp_path):
    """The check run by a user's venv sees the user's venv, not its base interpreter.

    A venv stands in for the user's (it sees this environment's packages and holds a
    module of its own, :data:`PROBE`, that no other environment has). From its python,
    :func:`check_wheel.fresh_venv` makes the venv the wheel is installed into: that one
    must import both the probe and xarray. With ``--system-site-packages`` it saw the
    base interpreter's packages only, and the wheel test failed in every user's venv.
    """
    outer = cw.fresh_venv(tmp_path / "user-venv", see_running_packages=True)
    (cw.venv_site_packages(tmp_path / "user-venv") / f"{PROBE}.py").write_text("", "utf-8")
    make_inner = (
        "import sys; sys.path.insert(0, sys.argv[1]); import check_wheel as cw; "
        "from pathlib import Path; print(cw.fresh_venv(Path(sys.argv[2]), see_running_packages=True))"
    )
    done = subprocess.run(
        [str(outer), "-c", make_inner, str(cw.ROOT / "tests" / "wheel"), str(tmp_path / "inner")],
        capture_output=True,
        text=True,
        check=True,
    )
    inner = done.stdout.strip().splitlines()[-1]
    probe = subprocess.run(
        [inner, "-c", f"import {PROBE}, xarray, sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == str(tmp_path / "inner")
