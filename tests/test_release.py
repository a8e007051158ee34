"""The release files: the changelog's public names, the one version, the citation.

``CHANGELOG.md`` lists the public API of its top release between two markers, generated
from ``xl.__all__`` and the commands of ``xlikert``: when a name changes, regenerate it
with ``python tests/test_release.py`` (this file) and say what changed in the changelog.
The version is written once, in ``xlikert/_version.py``: the package metadata (pyproject's
dynamic version), ``xlikert --version``, the results files' ``history`` and
``CITATION.cff`` read it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import click
import pandas as pd
import yaml
from click.testing import CliRunner

import xlikert as xl
from xlikert.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"
START = re.compile(r"<!-- public-names:start[^>]*-->\n")
END = "<!-- public-names:end -->"


def public_names_block() -> str:
    """The generated lines between the changelog's markers: ``xl.__all__`` and the commands."""
    names = sorted(xl.__all__, key=str.lower)
    commands = cli.list_commands(click.Context(cli))
    return "\n".join(
        [
            f"- `import xlikert as xl` (`xl.__all__`, {len(names)} names): "
            + ", ".join(f"`{n}`" for n in names),
            f"- the commands of `xlikert` ({len(commands)}): "
            + ", ".join(f"`{c}`" for c in commands),
        ]
    )


def _split(text: str) -> tuple[str, str, str]:
    start = START.search(text)
    assert start and END in text, "CHANGELOG.md lost its public-names markers"
    end = text.index(END)
    return text[: start.end()], text[start.end() : end], text[end:]


def write_changelog() -> None:
    """Regenerate the public names of ``CHANGELOG.md`` (the block between its markers)."""
    head, _, tail = _split(CHANGELOG.read_text("utf-8"))
    CHANGELOG.write_text(f"{head}{public_names_block()}\n{tail}", "utf-8")


def test_the_changelog_lists_the_public_names_as_they_stand():
    _, block, _ = _split(CHANGELOG.read_text("utf-8"))
    assert block.strip() == public_names_block(), (
        "CHANGELOG.md's public names differ from xl.__all__ and the CLI: run "
        "`python tests/test_release.py` and say in the changelog what changed"
    )


def test_the_changelog_keeps_a_changelog_and_its_top_release_is_the_version():
    text = CHANGELOG.read_text("utf-8")
    assert text.startswith("# Changelog\n") and "\n## [Unreleased]\n" in text
    releases = re.findall(r"^## \[(\d[^\]]*)\] - (\S+)$", text, flags=re.M)
    assert releases, "no release section (## [X.Y.Z] - YYYY-MM-DD)"
    version, date = releases[0]
    assert version == xl.__version__, f"top release {version}, package {xl.__version__}"
    assert date == "unreleased" or re.fullmatch(r"\d{4}-\d{2}-\d{2}", date), date


def test_the_version_is_written_once():
    """``xlikert/_version.py`` holds it; the metadata and every module read it from there."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "xlikert._version.__version__"}
    literal = re.compile(rf"[\"']{re.escape(xl.__version__)}[\"']")
    for path in sorted((ROOT / "xlikert").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "xlikert/_version.py":
            continue
        text = path.read_text("utf-8")
        assert not literal.search(text), f"{rel} writes the version {xl.__version__} itself"
        tree = ast.parse(text)
        if any(isinstance(n, ast.Name) and n.id == "__version__" for n in ast.walk(tree)):
            sources = {
                node.module
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)
                and any(a.name == "__version__" for a in node.names)
            }
            assert sources == {"_version"}, f"{rel} takes __version__ from {sources}"


def test_every_reader_of_the_version_agrees():
    """The CLI, the installed metadata, a written ``history`` and CITATION.cff."""
    version = xl.__version__
    res = CliRunner().invoke(cli, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"xlikert, version {version}"
    assert importlib.metadata.version("xlikert") == version, (
        "the installed metadata is of another version: reinstall (pip install -e .)"
    )
    ds = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3]}), ["q"], scale=(1, 3))
    assert ds.attrs["history"].startswith(f"xlikert {version}: ")
    assert xl.datasets.synthetic_results().attrs["history"].startswith(f"xlikert {version}: ")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text("utf-8"))
    assert cff["version"] == version and cff["cff-version"] == "1.2.0"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert cff["license"] == pyproject["project"]["license"] == "Apache-2.0"
    assert (ROOT / "LICENSE").read_text("utf-8").split()[:3] == ["Apache", "License", "Version"]


def test_the_citation_names_the_software_and_prefers_the_paper():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text("utf-8"))
    assert cff["type"] == "software" and cff["title"].startswith("xlikert")
    paper = cff["preferred-citation"]
    assert paper["title"].startswith("Every Token Counts")
    assert [a["family-names"] for a in paper["authors"]] == ["Wadi", "Ghodrat", "Philp"]
    assert "doi" not in cff and "doi" not in paper  # none has been assigned


if __name__ == "__main__":
    write_changelog()
    print(f"{CHANGELOG.relative_to(ROOT)}: public names regenerated", file=sys.stderr)
