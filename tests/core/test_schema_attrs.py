"""The attrs the report and the command line read back are named once, in
:mod:`xlikert.core.schema`, and the modules that write and read them use those names."""

from __future__ import annotations

import ast
from pathlib import Path

from xlikert.collect.options import ELICITATION_OPTIONS, CollectOptions
from xlikert.core import schema

ROOT = Path(__file__).resolve().parents[2]

#: The attr names of the schema (each ``*_ATTR``, and the values of each ``*_ATTRS``),
#: less those spelled as the option of the same name (``own_words_tol``: a key of
#: ``[collect]`` too).
ATTRS = {
    value: name
    for name in schema.__all__
    if name.endswith(("_ATTR", "_ATTRS"))
    for key, value in (
        [(None, getattr(schema, name))]
        if isinstance(getattr(schema, name), str)
        else getattr(schema, name).items()
    )
    if key != value
}


def _literals(path: Path) -> set[str]:
    """The string constants of a module, less those of its ``__all__``."""
    tree = ast.parse(path.read_text("utf-8"))
    listed = {
        id(const)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for const in ast.walk(node.value)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in listed
    }


def test_the_schema_names_the_attrs_read_back():
    assert {"language_factor", "scale_labels_by_language", "instrument_languages"} <= set(ATTRS)
    assert {"elicitation_answer_prefix", "elicitation_reply_tokens"} <= set(ATTRS)
    assert {"respondent_dims", "n_conditions", "sequential_tol"} <= set(ATTRS)


def test_no_module_spells_an_attr_of_the_schema():
    spelled = {
        f"{rel}: {value!r} (xlikert.core.schema.{ATTRS[value]})"
        for path in sorted((ROOT / "xlikert").rglob("*.py"))
        if (rel := path.relative_to(ROOT).as_posix()) != "xlikert/core/schema.py"
        for value in _literals(path) & set(ATTRS)
    }
    assert not spelled, "attr names spelled out instead of the schema's:\n" + "\n".join(
        sorted(spelled)
    )


def test_every_elicitation_setting_has_its_attr():
    assert set(schema.ELICITATION_SETTING_ATTRS) == set(ELICITATION_OPTIONS)
    options = CollectOptions()
    for level in ("prefix", "greedy", "own_words"):
        assert set(options.elicitation_settings(level)) <= set(schema.ELICITATION_SETTING_ATTRS)
