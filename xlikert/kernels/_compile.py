"""Compile the numba gufuncs with one process at a time writing their on-disk cache.

A ``@guvectorize(..., cache=True)`` kernel is cached in two files: the compiled
kernel (``<module>.<name>-<line>.py311.1.nbc``) and the gufunc wrapper that calls
it by its native symbol name (``guf-<module>.<name>-...``). The symbol name carries
an ABI tag taken from a process-wide counter, so two processes that compile the
same kernels at the same time, one of them having already loaded some functions
from the cache, can write the two files with different names. Every process that
loads that pair afterwards dies with a segmentation fault, until the cache is
deleted (numba/numba#10128, open in numba 0.68). Two pytest-xdist workers and a
notebook kernel on a clean clone are enough, and so are dask worker processes or
cluster jobs that share a package directory.

:func:`guvectorize` here is numba's, with the compilation (and so the cache read
and write) under a cross-process file lock next to numba's cache. Compilation
happens once per process, at import of the kernel module, so the lock costs
nothing after the first import. A cache already broken by an older version is
mended by deleting the ``*.nbi``/``*.nbc`` files in ``xlikert/kernels/__pycache__``
(or in ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
from filelock import FileLock

__all__ = ["LOCK_NAME", "guvectorize"]

#: Name of the lock file beside numba's cache of these kernels.
LOCK_NAME = "xlikert-kernels-compile.lock"


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def _compile_lock_path() -> Path:
    """The lock file: in ``NUMBA_CACHE_DIR`` when set, else where numba caches these
    kernels (``xlikert/kernels/__pycache__``), else in the temporary directory.

    Examples
    --------
    >>> _compile_lock_path().name
    'xlikert-kernels-compile.lock'
    """
    candidates = []
    cache_dir = getattr(numba.config, "CACHE_DIR", "")  # set at run time from NUMBA_CACHE_DIR
    if cache_dir:
        candidates.append(Path(cache_dir))
    candidates.append(Path(__file__).parent / "__pycache__")
    for directory in candidates:
        if _writable_dir(directory):
            return directory / LOCK_NAME
    return Path(tempfile.gettempdir()) / LOCK_NAME


def guvectorize(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """:func:`numba.guvectorize` compiled under the cross-process compile lock.

    Takes numba's arguments. The kernels give their signatures, so numba compiles
    (or loads from its cache) when the decorator is applied; that is when the lock
    is held.

    Examples
    --------
    >>> import numpy as np
    >>> @guvectorize(["void(float64[:], float64[:])"], "(n)->()", cache=False)
    ... def total(x, out):
    ...     out[0] = x.sum()
    >>> total(np.ones((2, 3)))
    array([3., 3.])
    """
    decorate = numba.guvectorize(*args, **kwargs)  # type: ignore[no-untyped-call]  # numba: no types

    def compile_locked(func: Callable[..., Any]) -> Any:
        with FileLock(_compile_lock_path()):
            return decorate(func)

    return compile_locked
