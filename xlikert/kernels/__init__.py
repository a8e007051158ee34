"""Numba kernels and their plain-numpy twins.

Each ``kernels/<topic>.py`` holds a ``@guvectorize`` kernel on numpy arrays and
its plain-numpy twin (same name, suffix ``_numpy``) with the same signature
and broadcasting rules. The xarray layer (:mod:`xlikert.analysis.construct`) picks one
of them through :func:`get_kernel`, so tests and benchmarks can run both side
by side:

Beside them, the pure maths the collection shares with the analysis, plain numpy on
arrays (no kernel, no twin): :mod:`xlikert.kernels.readout` (a next-token
distribution to the stored numbers: the scale sum, the decoding grid with its tie
rule, the top-k bounds) and :mod:`xlikert.kernels.history_tree` (the answer-history
tree of sequential administration: exact or certified PMFs and joints).

>>> from xlikert import kernels
>>> kernels.get_kernels()
'numba'
>>> with kernels.use_kernels("numpy"):
...     kernels.get_kernels()
'numpy'
>>> kernels.get_kernels()
'numba'

Which of the two a call runs, ``"numba"`` (the compiled kernels) or ``"numpy"``
(their twins), is its *kernels* (``kernels=`` of every analysis function that runs
one; "engine" is reserved for what runs a model: vLLM, llama.cpp, transformers).
The default is a :class:`contextvars.ContextVar`: :func:`use_kernels` sets it
for the ``with`` block of the current thread or asyncio task and restores it on
leaving (an exception included), so no call leaks its choice into another.
Threads start with the default (``"numba"``); the kernels of a call are fixed when
its kernel handle is made (:func:`get_kernel`), so Dask workers run what the
caller chose.

Kernels
-------
convolve_items
    ``(k, n), (m) -> (m)``: exact convolution of ``k`` item PMFs on a common
    integer grid of ``n`` scores; ``m = k (n - 1) + 1``.
blocked_comonotone_contrast
    ``(b, r, n), (n), (r), (m) -> (m)``: the comonotone (shared-quantile)
    linear contrast of ``r`` PMFs (:ref:`eq-comonotone-contrast-pmf`), computed
    in each of ``b`` blocks and mixed uniformly over the blocks.
consensus_bounds
    ``(k, n), (n), (), () -> (), (), ()``: Multivariate Consensus of ``k``
    independent items with certified lower and upper bounds (see
    :mod:`xlikert.kernels.consensus`).
alignment_metrics
    ``(n), (n), (n), (8) -> (8)``: Wasserstein-1, total variation, Jensen-Shannon
    (bits) and mean difference of an exact PMF and a sampled (human) PMF, then
    the delta-method variance of each for one respondent (see
    :mod:`xlikert.kernels.alignment`).
noise_ceiling
    ``(n), (n), (), (4) -> (4)``: the expected W1, TV, JS and |mean difference|
    of two independent samples of ``N`` respondents from one PMF.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BREAKPOINT_TOL",
    "DEFAULT_MAX_CELLS",
    "KERNELS",
    "KernelHandle",
    "alignment_metrics",
    "alignment_metrics_numpy",
    "blocked_comonotone_contrast",
    "blocked_comonotone_contrast_numpy",
    "consensus_bounds",
    "consensus_bounds_numpy",
    "convolve_items",
    "convolve_items_numpy",
    "get_kernel",
    "get_kernels",
    "noise_ceiling",
    "noise_ceiling_numpy",
    "use_kernels",
]

#: Breakpoints of merged CDFs closer than this are one (comonotone contrasts).
BREAKPOINT_TOL = 1e-12
#: Default cap on the grid cells of one Multivariate Consensus refinement pass.
DEFAULT_MAX_CELLS = 1 << 22

Kernels = Literal["numba", "numpy"]
KERNELS: tuple[str, ...] = ("numba", "numpy")
#: kernel name -> the module of ``xlikert.kernels`` that defines it and its ``_numpy`` twin.
_MODULES = {
    "convolve_items": "convolution",
    "blocked_comonotone_contrast": "comonotone",
    "consensus_bounds": "consensus",
    "alignment_metrics": "alignment",
    "noise_ceiling": "alignment",
}
#: The default kernels ("numba" or "numpy") of the current context (thread, asyncio task); see :func:`use_kernels`.
_KERNELS: contextvars.ContextVar[str] = contextvars.ContextVar(
    "xlikert_kernel_engine", default="numba"
)


def _resolve(name: str, kernels: str) -> Callable[..., Any]:
    # numba loads with the first kernel, not with ``import xlikert``: a process that only
    # collects (or a vLLM worker re-importing the user's script) never loads llvmlite
    module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
    kernel: Callable[..., Any] = getattr(module, name if kernels == "numba" else f"{name}_numpy")
    return kernel


def __getattr__(name: str) -> Any:
    base = name.removesuffix("_numpy")
    if base in _MODULES:
        return _resolve(base, "numpy" if name.endswith("_numpy") else "numba")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check(kernels: str) -> str:
    if kernels not in KERNELS:
        from ..core.errors import ConfigError

        raise ConfigError(f"unknown kernels {kernels!r}; choose one of {KERNELS}")
    return kernels


def get_kernels() -> str:
    """The kernels used when a function gets ``kernels=None`` (default ``"numba"``).

    Returns
    -------
    str
        ``"numba"`` or ``"numpy"``: the current thread's or task's default.

    Examples
    --------
    >>> get_kernels()
    'numba'
    """
    return _KERNELS.get()


@contextlib.contextmanager
def use_kernels(kernels: Kernels) -> Iterator[None]:
    """Use ``kernels`` as the default inside the ``with`` block (this thread or task only).

    ``"numba"``: the compiled kernels; ``"numpy"``: their plain-numpy twins. The
    previous default comes back on leaving the block, an exception included.

    Parameters
    ----------
    kernels : {"numba", "numpy"}
        The default inside the block.

    Yields
    ------
    None
        Control, inside the ``with`` block.

    Raises
    ------
    ConfigError
        Unknown kernels (neither "numba" nor "numpy").

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2}, n_items=3)
    >>> with use_kernels("numpy"):
    ...     twin = xl.composite(pmf)
    >>> bool(abs(twin - xl.composite(pmf)).max() < 1e-12)
    True
    """
    token = _KERNELS.set(_check(kernels))
    try:
        yield
    finally:
        _KERNELS.reset(token)


@dataclass(frozen=True)
class KernelHandle:
    """A kernel named by ``(name, kernels)``, looked up when called.

    Dask ships the function of ``apply_ufunc`` to its workers by pickling it. A
    numba gufunc pickles by value, and the rebuilt gufunc crashes when called in
    a fresh worker process (numba 0.68, numba/numba#4314). This handle pickles as
    two strings, and each process resolves it to its own (cached) compiled kernel.
    """

    name: str
    kernels: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _resolve(self.name, self.kernels)(*args, **kwargs)


def get_kernel(name: str, kernels: str | None = None) -> KernelHandle:
    """Return kernel ``name`` for ``kernels`` (``None``: the current default).

    Parameters
    ----------
    name : str
        A kernel of the list above (``"convolve_items"``, ...).
    kernels : {"numba", "numpy"}, optional
        The kernels; default :func:`get_kernels`.

    Returns
    -------
    KernelHandle
        A picklable handle that calls the kernel (or its twin).

    Raises
    ------
    ConfigError
        Unknown kernels (neither "numba" nor "numpy").
    UnknownNameError
        An unknown kernel (also a :class:`KeyError`), naming it and the kernels.

    Examples
    --------
    >>> import numpy as np, pickle
    >>> k = pickle.loads(pickle.dumps(get_kernel("convolve_items", "numba")))
    >>> k(np.full((2, 2), 0.5), np.zeros(3))
    array([0.25, 0.5 , 0.25])
    """
    kernels = _check(kernels or _KERNELS.get())
    if name not in _MODULES:
        from ..core.errors import UnknownNameError

        raise UnknownNameError(f"unknown kernel {name!r}; kernels: {', '.join(sorted(_MODULES))}")
    return KernelHandle(name, kernels)
