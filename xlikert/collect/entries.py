"""What a model entry may set: its keys checked against its backend's and its dtype.

A run-wide option (:data:`RUN_WIDE_OPTIONS`) is the run's
(:class:`~xlikert.collect.options.CollectOptions`), never a model entry's:
:func:`check_entry_keys` says so, naming the key. :func:`check_dtype` names the
dtype a model entry asks for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..core.errors import CollectionError

__all__ = ["DTYPES", "RUN_WIDE_OPTIONS", "check_dtype", "check_entry_keys"]


#: Options every model of a run shares (the results' coordinates, the answer rule,
#: the unit of saved progress): a model entry may not set them.
RUN_WIDE_OPTIONS = (
    "scale", "top_k", "temperatures", "top_ps", "split_space", "prefix_cache", "batch_size",
    "chunk_size", "answer_labels", "nonsubstantive", "tol", "max_passes", "numerals", "answer_prefix",
    "reply_tokens", "answer_parse", "own_words_temperature", "own_words_top_p", "own_words_tol",
    "own_words_max_passes", "executor", "ray_address", "replicas",
)  # fmt: skip


#: Accepted dtype names -> the canonical name ("auto" is resolved by :func:`resolve_dtype`).
DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
}


def check_dtype(dtype: object, where: str) -> str:
    """The canonical name of a requested dtype (``"auto"`` for None or ``"auto"``).

    Raises
    ------
    CollectionError
        An unknown name, naming the known ones.

    Examples
    --------
    >>> check_dtype("bf16", "model 'm'"), check_dtype(None, "model 'm'")
    ('bfloat16', 'auto')
    """
    if dtype in (None, "auto"):
        return "auto"
    if dtype not in DTYPES:
        raise CollectionError(
            f"{where + ': ' if where else ''}unknown dtype {dtype!r}; choose one of "
            f"{sorted(DTYPES)} or 'auto'"
        )
    return DTYPES[dtype]


def check_entry_keys(spec: Mapping[str, Any], known: Iterable[str], backend: str) -> None:
    """Refuse the keys of a model entry that its backend does not know, naming them.

    A run-wide option (:data:`RUN_WIDE_OPTIONS`: the decoding grid, the scale, ...)
    gets its own message: every model of a results file shares it, so it is set for
    the run (an experiment's ``[collect]`` table, ``xlikert run`` flags, or
    :func:`~xlikert.collect.collect`'s keywords), never per model. Every backend
    calls this from its ``check``, so no backend ignores a key silently.

    Raises
    ------
    CollectionError
        Naming the model, the keys and the known keys.

    Examples
    --------
    >>> check_entry_keys({"name": "m", "source": "x", "top_ps": [0.9]}, ["name", "source"], "vllm")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: model 'm': top_ps is a run-wide option (every model of a results file shares the decoding grid, the scale and the answer rule), not a model entry's: set it in the experiment file's [collect] table, with an xlikert run flag (--temperature, --top-p, --top-k, ...) or as a collect() keyword
    """
    known = set(known)
    name = spec.get("name")
    run_wide = [k for k in spec if k in RUN_WIDE_OPTIONS and k not in known]
    if run_wide:
        raise CollectionError(
            f"model {name!r}: {', '.join(run_wide)} {'is a run-wide option' if len(run_wide) == 1 else 'are run-wide options'} "
            "(every model of a results file shares the decoding grid, the scale and the "
            "answer rule), not a model entry's: set it in the experiment file's [collect] "
            "table, with an xlikert run flag (--temperature, --top-p, --top-k, ...) or as a "
            "collect() keyword"
        )
    unknown = sorted(k for k in spec if k not in known)
    if unknown:
        raise CollectionError(
            f"model {name!r}: unknown field(s) {unknown} for the {backend} backend; "
            f"known: {sorted(known)}"
        )
