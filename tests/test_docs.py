"""The documentation site builds with warnings as errors, its API reference lists every
public name, and the examples of its pages and of the README run.

One cold build per test session (``sphinx-build -W -E`` into a temporary folder, the
API stubs regenerated): the tests of this module share it and run on one worker. The
build does not execute the walkthrough notebook (10 of its 30 s):
``tests/test_notebooks.py`` runs every notebook, and a release's docs build does.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import xlikert as xl

pytest.importorskip("sphinx")  # the docs extra, which the test extra installs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)

pytestmark = pytest.mark.xdist_group("docs")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site: (the sphinx-build run, the HTML folder)."""
    out = tmp_path_factory.mktemp("docs")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         "-D", "nb_execution_mode=off",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    return run, out / "html"


def test_the_site_builds_without_warnings(site):
    run, html = site
    assert run.returncode == 0, run.stderr[-6000:]
    assert (html / "index.html").is_file()


def documented(html: Path) -> set[str]:
    """Every object the site documents, from its inventory (``objects.inv``)."""
    from sphinx.util.inventory import InventoryFile

    with open(html / "objects.inv", "rb") as fh:
        inv = InventoryFile.load(fh, "", lambda base, uri: uri)
    data = getattr(inv, "data", inv)  # an Inventory (Sphinx >= 8.2) or a plain dict
    return {name for kind, entries in data.items() if kind.startswith("py:") for name in entries}


def test_the_api_reference_lists_every_public_name_and_accessor_method(site):
    run, html = site
    assert run.returncode == 0, run.stderr[-3000:]
    names = documented(html)
    public = {name for name in xl.__all__ if name != "__version__"}
    missing = {name for name in public if f"xlikert.{name}" not in names}
    assert not missing, f"xl.* names missing from the API reference (docs/api.rst): {missing}"

    import xarray as xr

    for obj, owner in ((xr.DataArray([0.5, 0.5], dims="score"), "DataArray"),
                       (xr.Dataset(), "Dataset")):  # fmt: skip
        methods = {name for name in dir(obj.likert) if not name.startswith("_")}
        missing = {m for m in methods if f"xarray.{owner}.likert.{m}" not in names}
        assert not missing, f"{owner}.likert methods missing from docs/api.rst: {missing}"


#: The stages' public modules: every function and class of their ``__all__`` is in the
#: API reference (as ``module.name``, or as ``xlikert.name`` where ``xl`` exports it).
STAGES = ("xlikert.design", "xlikert.collect", "xlikert.report", "xlikert.report.tables",
          "xlikert.core.schema", "xlikert.core.errors")  # fmt: skip
#: Classes whose public methods and properties the reference lists one by one.
CLASSES = ("xlikert.design.Experiment", "xlikert.design.Instrument",
           "xlikert.design.ResponseFormat", "xlikert.design.Template",
           "xlikert.collect.CollectOptions")  # fmt: skip


def entry_points() -> dict[str, set[str]]:
    """Each public function, class, method and property of the stages -> the names the
    site may document it under."""
    import importlib
    import inspect

    out = {}
    for modname in STAGES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                aliases = {f"{modname}.{name}"}
                if getattr(xl, name, None) is obj:
                    aliases.add(f"xlikert.{name}")
                out[f"{modname}.{name}"] = aliases
    for dotted in CLASSES:
        modname, _, clsname = dotted.rpartition(".")
        cls = getattr(importlib.import_module(modname), clsname)
        for name, obj in vars(cls).items():
            if not name.startswith("_") and (inspect.isfunction(obj) or isinstance(obj, property)):
                out[f"{dotted}.{name}"] = {f"{dotted}.{name}"}
    return out


def test_the_entry_points_include_what_a_user_calls():
    points = entry_points()
    for name in ("xlikert.collect.collect", "xlikert.collect.merge_shards",
                 "xlikert.design.load_experiment", "xlikert.design.Experiment.build_prompts",
                 "xlikert.report.write_report", "xlikert.core.errors.AnswerLabelError",
                 "xlikert.core.errors.XlikertError"):  # fmt: skip
        assert name in points, name


def test_the_api_reference_documents_the_entry_points_of_every_stage(site):
    run, html = site
    assert run.returncode == 0, run.stderr[-3000:]
    names = documented(html)
    missing = sorted(name for name, aliases in entry_points().items() if not aliases & names)
    assert not missing, f"missing from the API reference (docs/api.rst): {missing}"
    for name in ("xlikert.analysis.sampling.standard_error", "xlikert.collect.run.lock.LockHeld",
                 "xlikert.collect.run.interrupt.RunInterrupted"):  # fmt: skip
        assert name in names, name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_examples_of_each_page_run(page, tmp_path, monkeypatch):
    """Every ``>>>`` example of a page (its ``pycon`` blocks) runs and prints what the
    page shows."""
    text = page.read_text("utf-8")
    pycon = re.compile(r"^```pycon\n(.*?)^```", flags=re.S | re.M)
    source = "\n".join(pycon.findall(text))
    stray = re.findall(r"^ *>>> .*", pycon.sub("", text), flags=re.M)
    assert not stray, f"{page.name}: examples outside a pycon block are not run: {stray}"
    monkeypatch.chdir(tmp_path)
    test = doctest.DocTestParser().get_doctest(source, {"__name__": "__docs__"}, page.name,
                                               str(page), 0)  # fmt: skip
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "".join(out)


def test_the_readme_example_runs(tmp_path, monkeypatch):
    """The README's Python example, as a user would paste it."""
    text = (ROOT / "README.md").read_text("utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})


def test_the_readmes_two_commands_are_what_ci_and_getting_started_run():
    """The README's test command is the one ``.ci/run`` runs, word for word; its demo
    command is the install of the getting-started page followed by ``xlikert demo``."""
    readme = (ROOT / "README.md").read_text("utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, flags=re.S).group(1)
    demo, test = [line for line in block.splitlines() if line and not line.startswith("#")]
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert test in ci.splitlines(), f".ci/run does not run the README's test command {test!r}"
    page = (DOCS / "getting-started.md").read_text("utf-8")
    install = re.search(r"## Install\n.*?```bash\n(.*?)```", page, flags=re.S).group(1)
    steps = [line.split("#")[0].strip() for line in install.splitlines() if line.strip()]
    assert demo == " && ".join([*steps, "xlikert demo -o xlikert-demo"])


def test_the_readme_fits_on_a_screen():
    assert len((ROOT / "README.md").read_bytes()) <= 6 * 1024
