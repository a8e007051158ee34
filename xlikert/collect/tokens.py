"""The valid-token set: every vocabulary token that decodes to a scale value.

A token is valid for scale value ``y`` when its surface form is ``str(y)``,
optionally preceded by ONE word-boundary marker: a space, SentencePiece's ``▁``
or byte-level BPE's ``Ġ``. Words ("seven"), punctuation ("7.") and longer
numbers ("17") are never valid: they are constraint failures (paper §3,
"Constraint"). Byte-fallback tokens such as ``<0x37>`` count when they decode
to the digit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import CollectionError

__all__ = ["ValidTokens", "find_valid_tokens"]

_MARKERS = ("", " ", "▁", "Ġ")


@dataclass(frozen=True)
class ValidTokens:
    """Valid token ids, their surface forms (raw vocabulary strings) and scale values."""

    ids: tuple[int, ...]
    surfaces: tuple[str, ...]
    scores: tuple[int, ...]
    scale: tuple[int, ...]

    def as_records(self) -> list[dict[str, Any]]:
        """``[{"id": ..., "token": ..., "score": ...}, ...]`` for provenance."""
        return [
            {"id": i, "token": s, "score": y}
            for i, s, y in zip(self.ids, self.surfaces, self.scores, strict=True)
        ]


def find_valid_tokens(tokenizer: Any, scale: range | list[int]) -> ValidTokens:
    """Find every vocabulary token that decodes to a value of ``scale``.

    Parameters
    ----------
    tokenizer
        A transformers tokenizer (anything with ``get_vocab`` and ``decode``).
    scale
        The scale values, e.g. ``range(1, 8)``.

    Returns
    -------
    ValidTokens
        Sorted by score, then token id.

    Raises
    ------
    CollectionError
        When a scale value has no single-token surface form (multi-token answers
        are not supported), naming the values and the tokenizer.

    Examples
    --------
    >>> vt = find_valid_tokens(tok, range(1, 8))  # doctest: +SKIP
    >>> vt.surfaces[:2]  # doctest: +SKIP
    ('1', 'Ġ1')
    """
    scale = [int(v) for v in scale]
    targets = {str(v): v for v in scale}
    forms = {m + s: v for s, v in targets.items() for m in _MARKERS}
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    maxlen = max(len(f) for f in forms)
    byte_re = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
    found: dict[int, tuple[str, int]] = {}
    for token, idx in tokenizer.get_vocab().items():
        if idx in special:
            continue
        if token in forms:
            found[idx] = (token, forms[token])
            continue
        if len(token) <= maxlen + 2 or byte_re.match(token):
            # Decode short tokens too: catches byte-fallback and normaliser quirks.
            try:
                text = tokenizer.decode([idx])
            except Exception:  # pragma: no cover - exotic tokenizers
                continue
            if text in forms:
                found[idx] = (token, forms[text])
    present = {v for _, v in found.values()}
    missing = [v for v in scale if v not in present]
    if missing:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise CollectionError(
            f"tokenizer {name!r} has no single-token surface form for scale value(s) "
            f"{missing} (looked for {sorted({repr(str(v)) for v in missing})} with optional "
            "leading ' ', '▁' or 'Ġ'); multi-token answers are not supported"
        )
    order = sorted(found, key=lambda i: (found[i][1], i))
    return ValidTokens(
        ids=tuple(order),
        surfaces=tuple(found[i][0] for i in order),
        scores=tuple(found[i][1] for i in order),
        scale=tuple(scale),
    )
