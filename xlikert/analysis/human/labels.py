"""Answers given as text: an item's labels read as its codes.

Survey extracts often store an answer as its label ("very happy") rather than its code
(1). A label is matched to the item's labels case-insensitively and without surrounding
spaces; a text that is neither a label, a number nor a declared code is named with its
count, never dropped.

Examples
--------
>>> import pandas as pd
>>> col = pd.Series([" Very happy", "pretty HAPPY", 3, "8"])
>>> text_answers(col, "happy", {1: "very happy", 2: "pretty happy"}).tolist()
[1, 2, 3, '8']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...core.errors import DesignError

__all__ = ["resolve_labels", "text_answers"]


def _label_key(text: str) -> str:
    """A label as it is matched: without surrounding spaces, case folded.

    Parameters
    ----------
    text : str
        A label or an answer.

    Returns
    -------
    str
        The key.

    Examples
    --------
    >>> _label_key("  Very Happy ")
    'very happy'
    """
    return text.strip().casefold()


def _lookup(labels: Mapping[Any, str], keep: Sequence[Any]) -> dict[str, Any]:
    """Key -> the value an answer of that text becomes; two meanings of one key raise."""
    out: dict[str, Any] = {}
    pairs = [(_label_key(str(t)), v) for v, t in labels.items() if str(t).strip()]
    pairs += [(_label_key(v), v) for v in keep if isinstance(v, str)]
    for key, value in pairs:
        if key in out and out[key] != value:
            raise DesignError(
                f"the label {key!r} means both {out[key]!r} and {value!r} (labels are matched "
                "case-insensitively, without surrounding spaces); give each answer its own label"
            )
        out[key] = value
    return out


def text_answers(
    column: pd.Series,
    name: str,
    labels: Mapping[Any, str],
    keep: Sequence[Any] = (),
) -> pd.Series:
    """``column`` with each answer given as a label replaced by what it means.

    Parameters
    ----------
    column : pandas.Series
        The answers to one item: codes, labels, or both.
    name : str
        The column or item, for the messages.
    labels : mapping
        What each label means: a code (or an option's name) -> its label.
    keep : sequence, optional
        Text codes that stand for themselves (missing codes, non-substantive codes):
        matched as labels are, replaced by their own spelling.

    Returns
    -------
    pandas.Series
        The column, its labels replaced; numbers and numeric text as they were.

    Raises
    ------
    DesignError
        A text that is not a label, a number nor a code of ``keep``: every such text
        named with its count, and the item's labels; a label with two meanings.

    Examples
    --------
    >>> import pandas as pd
    >>> text_answers(pd.Series(["Yes ", "no", None]), "q", {1: "yes", 0: "No"}).tolist()
    [1, 0, nan]
    >>> text_answers(pd.Series(["yes", "yse", "yse", "maybe"]), "q", {1: "yes", 0: "No"})
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: column 'q' holds 3 answer(s) that are not labels of the item: 'yse' (2), 'maybe' (1); its labels: 'yes', 'No'; declare no-answer texts with missing=[...], or give the labels (labels=... or instrument=...)
    """
    values = column.to_numpy(dtype=object)
    is_text = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=len(values))
    if not is_text.any():
        return column
    uniq, inverse = np.unique(values[is_text].astype(str), return_inverse=True)
    numeric = pd.to_numeric(pd.Series(uniq, dtype=object), errors="coerce").notna().to_numpy()
    lookup = _lookup(labels, keep)
    keys = [_label_key(t) for t in uniq]
    unknown = ~numeric & np.array([k not in lookup for k in keys], dtype=bool)
    if unknown.any():
        counts = np.bincount(inverse, minlength=uniq.size)
        order = sorted(np.flatnonzero(unknown), key=lambda i: (-counts[i], uniq[i]))
        named = ", ".join(f"{str(uniq[i])!r} ({int(counts[i])})" for i in order)
        shown = ", ".join(repr(str(t)) for t in labels.values() if str(t).strip()) or "none"
        raise DesignError(
            f"column {name!r} holds {int(counts[unknown].sum())} answer(s) that are not labels "
            f"of the item: {named}; its labels: {shown}; declare no-answer texts with "
            "missing=[...], or give the labels (labels=... or instrument=...)"
        )
    meant = np.empty(uniq.size, dtype=object)
    for i in np.flatnonzero(~numeric):
        meant[i] = lookup[keys[i]]
    out = values.copy()
    replace = ~numeric[inverse]
    out[np.flatnonzero(is_text)[replace]] = meant[inverse[replace]]
    return pd.Series(out, index=column.index, name=column.name)


def resolve_labels(
    labels: Mapping[Any, Any] | None, instrument: Any, items: Sequence[str]
) -> dict[str, dict[int, str]]:
    """Each item's point labels: ``labels`` (one ``{code: label}`` for every item, or
    ``{item: {code: label}}``), else the instrument's anchors of the item, else none.

    Parameters
    ----------
    labels : mapping or None
        The caller's labels.
    instrument : Instrument or None
        An instrument whose items' anchors are the labels.
    items : sequence of str
        The item ids.

    Returns
    -------
    dict
        Item id -> code -> label.

    Raises
    ------
    DesignError
        Labels per item that name items not among ``items``.

    Examples
    --------
    >>> resolve_labels({1: "yes", 0: "no"}, None, ["a", "b"])["b"]
    {1: 'yes', 0: 'no'}
    >>> resolve_labels({"a": {1: "yes"}}, None, ["a", "b"])
    {'a': {1: 'yes'}, 'b': {}}
    """
    if labels is not None:
        if labels and all(isinstance(v, Mapping) for v in labels.values()):
            unknown = sorted(str(k) for k in labels if str(k) not in set(items))
            if unknown:
                raise DesignError(
                    f"labels for items {unknown} that are not among the items {list(items)}"
                )
            per = {str(k): dict(v) for k, v in labels.items()}
            return {i: {int(c): str(t) for c, t in per.get(i, {}).items()} for i in items}
        return {i: {int(c): str(t) for c, t in labels.items()} for i in items}
    known = set(instrument.item_ids) if instrument is not None else set()
    return {
        i: dict(instrument.scale_of(i).anchors) if i in known else {}
        for i in items  # an item the instrument lacks is named by the scale check
    }
