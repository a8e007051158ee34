"""Personas from a respondent table: one level of a ``respondent`` factor per person.

Silicon sampling one respondent at a time (Argyle et al. 2023) conditions the model
on each person's background. :func:`respondent_personas` fills a persona template
from each row of a survey table::

    "You are a {age}-year-old {sex}[ from {region}][ who left school at {school}]."

* ``{column}`` is the row's value in that column (the project's template syntax, with
  its modifiers, e.g. ``{sex:cap}``); a value map renders codes as words
  (``values={"sex": {1: "man", 2: "woman"}}``); a code the map lacks is an error.
* A column that is also an item asked is refused by name: the person's answer would
  leak into the persona.
* Missing background values follow a stated rule: ``"drop-row"`` (the person is left
  out, and named in ``dropped``) or ``"omit-phrase"`` (each optional phrase in
  ``[...]`` with a missing value is left out; a missing value outside a bracket is an
  error naming the column and the rows).
* A sample of rows is drawn with a seed; the draw (the seed, the size, the rows drawn)
  is stored with the personas.

The result gives the experiment its factor, ``{"kind": "respondent", "levels": {row id:
persona}}``, whose text fills the ``{respondent}`` placeholder (or the factor's own
name). A ``respondent`` factor differs from a free factor in one rule only: two people
may share a persona (their levels are people, not conditions).

Examples
--------
>>> import pandas as pd
>>> from xlikert.design.respondents import respondent_personas
>>> t = pd.DataFrame({"age": [43, 61, None], "sex": [2, 1, 2], "region": ["Yorkshire", None, "Kent"]},
...                  index=["p1", "p2", "p3"])
>>> p = respondent_personas(t, "You are a {age}-year-old {sex}[ from {region}].",
...                         values={"sex": {1: "man", 2: "woman"}})
>>> p.personas
{'p1': 'You are a 43-year-old woman from Yorkshire.'}
>>> p.dropped
('p2', 'p3')
>>> q = respondent_personas(t.iloc[:2], "You are a {age}-year-old {sex}[ from {region}].",
...                         values={"sex": {1: "man", 2: "woman"}}, rule="omit-phrase")
>>> q.personas["p2"], q.omitted
('You are a 61-year-old man.', 1)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..core.errors import DesignError, InputTypeError, TemplateSyntaxError
from .template import Template

__all__ = ["RULES", "RespondentPersonas", "respondent_personas"]

#: The rules for a missing background value.
RULES: tuple[str, ...] = ("drop-row", "omit-phrase")
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")


@dataclass(frozen=True)
class RespondentPersonas:
    """The personas of the respondents drawn from a table, and how they were made.

    Attributes
    ----------
    name : str
        The factor's name (and the placeholder its text fills).
    personas : dict of str to str
        Row id -> persona text, one per person drawn, in the table's order.
    columns : tuple of str
        The columns the template uses (the only background the model sees).
    template : str
        The persona template.
    rule : str
        The rule for missing values (:data:`RULES`).
    dropped : tuple of str
        The rows left out by ``"drop-row"`` (before the draw).
    omitted : int
        The optional phrases left out by ``"omit-phrase"`` (over the rows drawn).
    draw : dict
        ``{"seed", "size", "population", "rows"}`` when a sample was drawn, else ``{}``.
    """

    name: str
    personas: dict[str, str]
    columns: tuple[str, ...]
    template: str
    rule: str
    dropped: tuple[str, ...] = ()
    omitted: int = 0
    draw: dict[str, Any] = field(default_factory=dict)

    @property
    def levels(self) -> list[str]:
        """The factor's levels: the row ids of the people drawn.

        Returns
        -------
        list of str
            One level per person.
        """
        return list(self.personas)

    def factor_spec(self) -> dict[str, Any]:
        """The factor as an experiment file gives it (``[factors.<name>]``).

        Returns
        -------
        dict
            ``{"kind": "respondent", "levels": {row id: persona}, "description": ...}``,
            for :func:`xlikert.design.experiment_from_dict`.

        Examples
        --------
        >>> import pandas as pd
        >>> p = respondent_personas(pd.DataFrame({"age": [30]}), "You are {age}.")
        >>> p.factor_spec()["levels"]
        {'0': 'You are 30.'}
        """
        cols = ", ".join(self.columns)
        return {
            "kind": "respondent",
            "levels": dict(self.personas),
            "description": f"one persona per respondent, from the columns {cols}",
        }

    def record(self) -> dict[str, Any]:
        """What made the personas, as JSON-ready data (store it beside the results).

        Returns
        -------
        dict
            ``name``, ``template``, ``columns``, ``rule``, ``dropped``, ``omitted``,
            ``draw`` and ``n_respondents``.

        Examples
        --------
        >>> import pandas as pd
        >>> p = respondent_personas(pd.DataFrame({"age": [30, 40]}), "You are {age}.",
        ...                         sample=1, seed=3)
        >>> p.record()["draw"]["rows"], p.record()["columns"]
        (['1'], ['age'])
        """
        return {
            "name": self.name,
            "template": self.template,
            "columns": list(self.columns),
            "rule": self.rule,
            "dropped": list(self.dropped),
            "omitted": self.omitted,
            "draw": dict(self.draw),
            "n_respondents": len(self.personas),
        }


def _segments(template: str) -> list[tuple[Template, bool]]:
    """The template's phrases: ``(phrase, optional)`` in order."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in _SEGMENT.finditer(template):
        out.append((template[pos : m.start()], False))
        out.append((m.group(1), True))
        pos = m.end()
    out.append((template[pos:], False))
    rest = _SEGMENT.sub("", template)
    if "[" in rest or "]" in rest:
        raise DesignError(
            f"persona template {template!r} has an unbalanced or nested bracket: optional "
            "phrases are '[...]', one level deep"
        )
    try:
        return [(Template.parse(text), opt) for text, opt in out if text]
    except TemplateSyntaxError as exc:
        raise DesignError(f"persona template {template!r}: {exc}") from None


def _words(column: pd.Series, name: str, value_map: Mapping[Any, str] | None) -> pd.Series:
    """The column's values as text (NaN where missing); a code the map lacks raises."""
    present = column.notna()
    if value_map is not None:
        words = column.map(lambda v: value_map.get(v, value_map.get(_plain(v))))
        bad = present & words.isna()
        if bad.any():
            codes = pd.unique(column[bad].astype(object)).tolist()[:5]
            raise DesignError(
                f"column {name!r} holds {codes} (first at row {str(column.index[bad][0])!r}), "
                f"which its value map does not render; the map's codes: {list(value_map)[:10]}"
            )
        return words.astype(object).where(present)
    return column.map(lambda v: str(_plain(v))).astype(object).where(present)


def _plain(v: Any) -> Any:
    """A whole float as an int (43.0 -> 43): survey codes are read as floats with NaN."""
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return int(v)
    return v.item() if isinstance(v, np.generic) else v


def respondent_personas(
    table: pd.DataFrame,
    template: str,
    *,
    values: Mapping[str, Mapping[Any, str]] | None = None,
    items: Sequence[str] = (),
    rule: str = "drop-row",
    missing: Sequence[Any] = (),
    sample: int | None = None,
    seed: int | None = None,
    name: str = "respondent",
) -> RespondentPersonas:
    """One persona per row of a respondent table, from a template and value maps.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per respondent; its index gives the row ids (the factor's levels).
    template : str
        The persona template: ``{column}`` placeholders (with the template modifiers),
        optional phrases in ``[...]``.
    values : mapping of str to mapping, keyword-only
        Column -> code -> words (``{"sex": {1: "man", 2: "woman"}}``); a column without
        a map is rendered as it is (a whole number without ``.0``).
    items : sequence of str, keyword-only
        The items asked: a template column among them is refused (leakage).
    rule : {"drop-row", "omit-phrase"}, keyword-only
        What a missing background value does (:data:`RULES`).
    missing : sequence, keyword-only
        Codes that mean a missing value in every used column (besides NaN).
    sample : int, keyword-only
        Draw this many rows (without replacement, from the rows the rule keeps); needs
        ``seed``.
    seed : int, keyword-only
        The seed of the draw (``numpy.random.default_rng``).
    name : str, keyword-only
        The factor's name and placeholder.

    Returns
    -------
    RespondentPersonas
        The personas, the columns used, the rule's effect and the draw.

    Raises
    ------
    DesignError
        A template column not in the table or also an item asked, a value map of a
        column the template does not use or lacking a code, a missing value outside an
        optional phrase under ``"omit-phrase"``, repeated row ids, an unknown rule, a
        sample without a seed or larger than the rows kept, no rows left.
    InputTypeError
        ``table`` not a DataFrame.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"age": [43, 61], "vote": [1, 0]})
    >>> respondent_personas(t, "You are {age}, and you voted {vote}.", items=["vote"])
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: the persona template uses column(s) ['vote'] that are also items asked: each person's answer would leak into their persona; leave them out of the template
    """
    segments, columns, value_maps, ids = _checked(table, template, values, items, rule)
    words: dict[str, npt.NDArray[Any]] = {}
    for c in columns:
        col = table[c]
        if missing:
            col = col.where(~col.isin(list(missing)))
        words[c] = _words(col, c, value_maps.get(c)).to_numpy()
    gone = {c: np.asarray(pd.isna(w), dtype=bool) for c, w in words.items()}
    required = [c for c in columns if c in {f for t, opt in segments if not opt for f in t.fields}]
    keep = _kept_rows(gone, required if rule == "omit-phrase" else None, ids)
    dropped = tuple(ids[~keep]) if rule == "drop-row" else ()
    kept, draw = _draw(keep, ids, sample, seed, rule, columns)
    personas: dict[str, str] = {}
    omitted = 0
    for r in kept:
        parts = []
        for t, opt in segments:
            row = {f: words[f][r] for f in t.fields}
            if opt and any(pd.isna(v) for v in row.values()):
                omitted += 1
                continue
            parts.append(t.render(row))
        personas[str(ids[r])] = "".join(parts)
    return RespondentPersonas(
        name=name, personas=personas, columns=columns, template=template, rule=rule,
        dropped=dropped, omitted=omitted, draw=draw,
    )  # fmt: skip


def _checked(
    table: pd.DataFrame,
    template: str,
    values: Mapping[str, Mapping[Any, str]] | None,
    items: Sequence[str],
    rule: str,
) -> tuple[list[tuple[Template, bool]], tuple[str, ...], dict[str, Mapping[Any, str]], pd.Index]:
    """The template's phrases and columns, the value maps and the row ids, checked."""
    if not isinstance(table, pd.DataFrame):
        raise InputTypeError(
            f"expected the respondents as a pandas DataFrame, got {type(table).__name__}"
        )
    if rule not in RULES:
        raise DesignError(f"rule must be one of {list(RULES)}, got {rule!r}")
    segments = _segments(template)
    columns = tuple(dict.fromkeys(f for t, _ in segments for f in t.fields))
    if not columns:
        raise DesignError(f"persona template {template!r} uses no column")
    absent = [c for c in columns if c not in table.columns]
    if absent:
        raise DesignError(
            f"the persona template uses column(s) {absent} that the table does not have; its "
            f"columns: {list(map(str, table.columns))}"
        )
    leak = [c for c in columns if c in set(map(str, items))]
    if leak:
        raise DesignError(
            f"the persona template uses column(s) {leak} that are also items asked: each "
            "person's answer would leak into their persona; leave them out of the template"
        )
    value_maps = dict(values or {})
    unused = sorted(set(value_maps) - set(columns))
    if unused:
        raise DesignError(f"value maps for column(s) {unused} that the template does not use")
    ids = pd.Index([str(v) for v in table.index])
    if ids.has_duplicates:
        raise DesignError(
            f"the table has repeated row ids {ids[ids.duplicated()].unique().tolist()[:5]}; "
            "one row per respondent"
        )
    return segments, columns, value_maps, ids


def _kept_rows(
    gone: Mapping[str, npt.NDArray[np.bool_]], required: Sequence[str] | None, ids: pd.Index
) -> npt.NDArray[np.bool_]:
    """The rows a missing-value rule keeps.

    Parameters
    ----------
    gone : mapping of str to np.ndarray of bool
        Column -> where its value is missing, one entry per row.
    required : sequence of str or None
        None: ``"drop-row"`` (a row missing any value is dropped). Else ``"omit-phrase"``:
        the columns outside every optional phrase, which may not be missing.
    ids : pandas.Index
        The row ids, for the message.

    Returns
    -------
    np.ndarray of bool
        Where a row is kept.

    Raises
    ------
    DesignError
        A required column missing in some row (naming the rows).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> gone = {"age": np.array([False, True]), "sex": np.array([False, False])}
    >>> _kept_rows(gone, None, pd.Index(["a", "b"])).tolist()
    [True, False]
    >>> _kept_rows(gone, ["sex"], pd.Index(["a", "b"])).tolist()
    [True, True]
    """
    n = len(ids)
    keep = np.ones(n, dtype=bool)
    if required is None:
        for g in gone.values():
            keep &= ~g
        return keep
    for c in required:  # in the template's order
        if gone[c].any():
            rows = ids[gone[c]].tolist()
            raise DesignError(
                f"column {c!r} is missing for rows {rows[:5]}{' ...' if len(rows) > 5 else ''}"
                f" ({len(rows)} rows) and is outside every optional phrase '[...]': put its "
                "phrase in brackets, or use rule='drop-row'"
            )
    return keep


def _draw(
    keep: npt.NDArray[np.bool_],
    ids: pd.Index,
    sample: int | None,
    seed: int | None,
    rule: str,
    columns: tuple[str, ...],
) -> tuple[npt.NDArray[np.intp], dict[str, Any]]:
    """The rows drawn from those kept (all of them without a sample), and the draw."""
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        raise DesignError(f"no row is left: every row misses a value of {list(columns)}")
    if sample is None:
        return kept, {}
    if seed is None:
        raise DesignError("a sample of rows needs a seed, so the draw can be repeated")
    if not 0 < int(sample) <= kept.size:
        raise DesignError(f"sample={sample} rows, but {kept.size} rows are kept (rule {rule!r})")
    rng = np.random.default_rng(seed)
    kept = np.sort(rng.choice(kept, size=int(sample), replace=False))
    draw = {"seed": seed, "size": int(sample), "population": int(keep.sum()),
            "rows": ids[kept].tolist()}  # fmt: skip
    return kept, draw
