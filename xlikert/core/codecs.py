"""The codecs of the results file's text variables: token ids and trace texts,
compressed so a netCDF file stays small and plain ``xr.open_dataset`` reads it.

Examples
--------
>>> from xlikert.core.codecs import decode_text, encode_text
>>> decode_text(encode_text("I think 5."))
'I think 5.'
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Sequence

import numpy as np

from .errors import CodecError

__all__ = ["decode_text", "decode_token_ids", "encode_text", "encode_token_ids"]


_IDS_CODEC = "int32+zlib+base64:"
_TEXT_CODEC = "zlib+base64:"


def encode_token_ids(ids: Sequence[int] | np.ndarray) -> str:
    """Token ids as text for the results file: ``int32+zlib+base64:...``.

    Parameters
    ----------
    ids : sequence of int or numpy.ndarray
        The token ids (each fits in an int32).

    Returns
    -------
    str
        The ids as little-endian int32, zlib-compressed and base64-encoded, after the
        ``int32+zlib+base64:`` prefix; :func:`decode_token_ids` reads it back.

    Examples
    --------
    >>> decode_token_ids(encode_token_ids([1, 151643, 7])).tolist()
    [1, 151643, 7]
    """
    raw = np.asarray(ids, dtype="<i4").tobytes()
    return _IDS_CODEC + base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def decode_token_ids(text: str) -> np.ndarray:
    """The token ids :func:`encode_token_ids` wrote (int64).

    Parameters
    ----------
    text : str
        A text :func:`encode_token_ids` wrote (``int32+zlib+base64:...``).

    Returns
    -------
    numpy.ndarray
        The token ids, one-dimensional, int64.

    Raises
    ------
    CodecError
        ``text`` was not written by :func:`encode_token_ids` or is corrupt (also a
        :class:`ValueError`).

    Examples
    --------
    >>> decode_token_ids("int32+zlib+base64:eNpjZGBgAAAACAAC")
    array([1])
    """
    text = str(text)
    if not text.startswith(_IDS_CODEC):
        raise CodecError(
            f"not token ids written by xlikert (no {_IDS_CODEC!r} prefix): {text[:40]!r}"
        )
    try:
        raw = zlib.decompress(base64.b64decode(text[len(_IDS_CODEC) :], validate=True))
        return np.frombuffer(raw, dtype="<i4").astype(np.int64)
    except (ValueError, zlib.error) as exc:
        raise CodecError(f"corrupt token ids ({exc}): {text[:40]!r}") from exc


def encode_text(text: str) -> str:
    """Compress a text for the results file (``zlib+base64:...``), e.g. a reasoning trace.

    Parameters
    ----------
    text : str
        Any text (encoded as UTF-8).

    Returns
    -------
    str
        The text zlib-compressed and base64-encoded after the ``zlib+base64:`` prefix;
        :func:`decode_text` reads it back.

    Examples
    --------
    >>> decode_text(encode_text("I think 5.")) == "I think 5."
    True
    """
    return _TEXT_CODEC + base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def decode_text(blob: str) -> str:
    """The text :func:`encode_text` wrote (empty where ``blob`` is empty).

    Parameters
    ----------
    blob : str
        A text :func:`encode_text` wrote, or ``""`` (a cell without a trace).

    Returns
    -------
    str
        The decoded text; ``""`` for an empty ``blob``.

    Raises
    ------
    CodecError
        A non-empty ``blob`` that :func:`encode_text` did not write, or a corrupt
        one (also a :class:`ValueError`).

    Examples
    --------
    >>> decode_text(encode_text("Strongly agree."))
    'Strongly agree.'
    >>> decode_text("")
    ''
    """
    blob = str(blob)
    if not blob:
        return ""
    if not blob.startswith(_TEXT_CODEC):
        raise CodecError(
            f"not a text written by xlikert (no {_TEXT_CODEC!r} prefix): {blob[:40]!r}"
        )
    try:
        raw = zlib.decompress(base64.b64decode(blob[len(_TEXT_CODEC) :], validate=True))
        return raw.decode("utf-8")
    except (ValueError, zlib.error) as exc:
        raise CodecError(f"corrupt text ({exc}): {blob[:40]!r}") from exc
