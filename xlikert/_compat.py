"""Old import paths, kept working for a deprecation period.

xlikert's modules moved into the pipeline's packages (``xlikert.analysis``,
``xlikert.collect.backends``, ...). Every old path in :data:`MOVED` still imports:
it gives a module that finds each name in the new modules, and importing it
warns (:class:`DeprecationWarning`) with the new path. No file is left behind
for the old paths: one finder on ``sys.meta_path`` answers for exactly these
names (installed by ``import xlikert``).

Names that moved out of a module that still exists (``CollectOptions`` from
``xlikert.collect.protocol`` to ``xlikert.collect.options``) are served by that
module's ``__getattr__`` through :func:`moved_attribute`; keyword arguments that
were renamed are served by the decorator :func:`renamed_keywords` (the function's
signature shows only the new names; an old name still works and warns), keywords
that were retired by :func:`retired_keyword`, arguments that became keyword-only
by :func:`keyword_only`, and module-level functions that were replaced by
:func:`deprecated_function`.

Examples
--------
>>> import sys, warnings
>>> _ = sys.modules.pop("xlikert.construct", None)  # imported before: warns again
>>> with warnings.catch_warnings(record=True) as seen:
...     warnings.simplefilter("always")
...     from xlikert.construct import composite
>>> import xlikert as xl
>>> composite is xl.composite, seen[0].category.__name__
(True, 'DeprecationWarning')
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import types
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = [
    "MOVED",
    "REMOVAL",
    "deprecated_function",
    "install",
    "keyword_only",
    "moved_attribute",
    "renamed_keyword",
    "renamed_keywords",
    "retired_keyword",
]

F = TypeVar("F", bound=Callable[..., Any])

#: When the old paths and keywords go away.
REMOVAL = "xlikert 1.0"

#: Old module path -> the modules that now hold its names, searched in order.
MOVED: Mapping[str, tuple[str, ...]] = {
    "xlikert.constraint": ("xlikert.analysis.constraint", "xlikert.collect.readout"),
    "xlikert.consensus_layer": ("xlikert.analysis.consensus",),
    "xlikert.construct": ("xlikert.analysis.construct", "xlikert.analysis.keying"),
    "xlikert.reliability_layer": ("xlikert.analysis.reliability",),
    "xlikert.align": ("xlikert.analysis.alignment",),
    "xlikert.human": ("xlikert.analysis.human",),
    "xlikert.sampling": ("xlikert.analysis.sampling",),
    "xlikert.traces": ("xlikert.analysis.traces",),
    "xlikert.data": ("xlikert.datasets",),
    "xlikert.design.scoring": ("xlikert.analysis.keying", "xlikert.analysis.construct"),
    "xlikert.collect.schema": ("xlikert.collect.record", "xlikert.schema"),
    "xlikert.collect.local": (
        "xlikert.collect.backends.transformers",
        "xlikert.collect.backends.transformers.loading",
        "xlikert.collect.backends.transformers.scorer",
    ),
    "xlikert.collect.inprocess": ("xlikert.collect.backends.inprocess", "xlikert.collect.options"),
    "xlikert.collect.device_readout": ("xlikert.collect.backends.transformers.device_readout",),
    "xlikert.collect.vllm": (
        "xlikert.collect.backends.vllm",
        "xlikert.collect.backends.vllm.model",
    ),
    "xlikert.collect.vllm_readout": ("xlikert.collect.backends.vllm.readout",),
    "xlikert.collect.server": ("xlikert.collect.backends.openai",),
    "xlikert.collect.server.spec": ("xlikert.collect.backends.openai.spec",),
    "xlikert.collect.server.transport": ("xlikert.collect.backends.openai.transport",),
    "xlikert.collect.server.plan": ("xlikert.collect.backends.openai.plan",),
    "xlikert.collect.server.readout": ("xlikert.collect.backends.openai.readout",),
    "xlikert.collect.server.model": ("xlikert.collect.backends.openai.model",),
    "xlikert.design.cli": ("xlikert.cli.design",),
    "xlikert.collect.cli": ("xlikert.cli.collect",),
    "xlikert.report.cli": ("xlikert.cli.report",),
    "xlikert.report.human": ("xlikert.report.sections.alignment",),
    "xlikert.report.reliability": ("xlikert.report.sections.reliability",),
}


def _internal(frame: types.FrameType) -> bool:
    """A frame of the import system's bootstrap, which ``warnings.warn`` does not count."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def _ours(frame: types.FrameType) -> bool:
    """A frame between a deprecated use and :func:`_warn`: this module, the import system
    (``importlib.import_module`` included) or a module's ``__getattr__`` serving a moved name."""
    code = frame.f_code
    return (
        code.co_filename == __file__
        or _internal(frame)
        or code.co_filename == importlib.__file__
        or code.co_name == "__getattr__"
    )


def _stacklevel(outside: int = 0) -> int:
    """The ``stacklevel`` (counted from :func:`_warn` as ``warnings.warn`` counts it: the
    import system's bootstrap frames are not counted) of the first frame that is not
    :func:`_ours`, then ``outside`` frames further out."""
    frame, level = sys._getframe(1), 1  # the frame of _warn: level 1
    while frame.f_back is not None and (_ours(frame) or outside):
        if not _ours(frame):
            outside -= 1
        frame = frame.f_back
        level += not _internal(frame)
    return level


def _warn(message: str, outside: int = 0) -> None:
    """Warn (``DeprecationWarning``) at the caller's line; ``outside``: the caller is that
    many frames out from the first frame outside the deprecation machinery."""
    warnings.warn(message, DeprecationWarning, stacklevel=_stacklevel(outside))


class _MovedModule(types.ModuleType):
    """An old module path: each name is looked up in the modules that hold it now."""

    def __init__(self, name: str, targets: tuple[str, ...]) -> None:
        super().__init__(name, f"Deprecated: moved to {', '.join(targets)}.")
        self.__path__: list[str] = []  # old sub-modules (xlikert.collect.server.spec) import too
        self._targets = targets

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        for target in self._targets:
            module = importlib.import_module(target)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(
            f"module {self.__name__!r} (moved to {', '.join(self._targets)}) has no "
            f"attribute {attr!r}"
        )

    def __dir__(self) -> list[str]:
        names: set[str] = set()
        for target in self._targets:
            names.update(getattr(importlib.import_module(target), "__all__", ()))
        return sorted(names)


class _MovedLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _MovedModule(spec.name, MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        _warn(
            f"{module.__name__} is deprecated and will be removed in {REMOVAL}; import from "
            f"{' or '.join(MOVED[module.__name__])} (or the top level: import xlikert as xl)"
        )


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Answers for the old paths of :data:`MOVED` only."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(), is_package=True)


def install() -> None:
    """Put the finder of the old paths first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


def moved_attribute(module: str, attr: str, moved: Mapping[str, str]) -> Any:
    """A module ``__getattr__`` body for names that moved to another module.

    ``moved`` maps each old name to the module that holds it now; other names
    raise ``AttributeError`` as usual.
    """
    if attr not in moved:
        raise AttributeError(f"module {module!r} has no attribute {attr!r}")
    _warn(
        f"{module}.{attr} is deprecated and will be removed in {REMOVAL}; use {moved[attr]}.{attr}"
    )
    return getattr(importlib.import_module(moved[attr]), attr)


def renamed_keyword(
    func: str, kwargs: dict[str, Any], old: str, new: str, value: Any, default: Any = None
) -> Any:
    """The value of keyword ``new``, taking it from the deprecated ``old`` in ``kwargs``.

    Pops ``old`` from ``kwargs``; warns when it was given (at the line that called the
    function taking ``**kwargs``, which calls this); refuses both at once; and refuses
    any other leftover keyword (as Python would), naming it.

    Examples
    --------
    >>> import warnings
    >>> kw = {"dims": "target"}
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     renamed_keyword("f", kw, "dims", "dim", None)
    'target'
    """
    if old in kwargs:
        given = kwargs.pop(old)
        if value is not default:
            raise TypeError(f"{func}() got both {new}= and its deprecated name {old}=")
        _warn(
            f"{func}({old}=...) is deprecated and will be removed in {REMOVAL}; "
            f"use {func}({new}=...)",
            outside=1,  # the caller of the function that took **kwargs
        )
        value = given
    if kwargs:
        raise TypeError(f"{func}() got an unexpected keyword argument {next(iter(kwargs))!r}")
    return value


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Decorator: each old keyword (``old="new"``) still works for its new name, with a warning.

    The decorated function's signature (``inspect.signature``, ``help``) shows only
    the new names. Giving both the old and the new name is a ``TypeError``, as
    Python's own duplicate-argument error. Positional calls are untouched.

    Examples
    --------
    >>> import warnings
    >>> @renamed_keywords(dims="by")
    ... def keep(x, by=None):
    ...     return by
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     keep(1, dims="target")
    'target'
    >>> str(seen[0].message)
    'keep(dims=...) is deprecated and will be removed in xlikert 1.0; use keep(by=...)'
    """

    def decorate(func: F) -> F:
        name = func.__name__

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{name}() got both {new}= and its deprecated name {old}=")
                    _warn(
                        f"{name}({old}=...) is deprecated and will be removed in {REMOVAL}; "
                        f"use {name}({new}=...)"
                    )
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def keyword_only(*names: str) -> Callable[[F], F]:
    """Decorator: the arguments ``names`` (in their old positional order) became keyword-only.

    The decorated function's signature shows them keyword-only; a call that still
    passes them by position works and warns, naming them. Too many positional
    arguments, or one given both ways, is a ``TypeError`` as Python's own.

    Examples
    --------
    >>> import warnings
    >>> @keyword_only("by", "ax")
    ... def draw(data, *, by=None, ax=None):
    ...     return by, ax
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     draw(1, "model")
    ('model', None)
    >>> str(seen[0].message)
    "draw(): passing 'by' by position is deprecated and will be removed in xlikert 1.0; use draw(by=...)"
    """

    def decorate(func: F) -> F:
        name = func.__name__
        params = inspect.signature(func).parameters.values()
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        n = sum(p.kind in kinds for p in params)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if len(args) > n:
                given = names[: len(args) - n]
                if len(args) - n > len(names):
                    raise TypeError(
                        f"{name}() takes at most {n + len(names)} positional arguments but "
                        f"{len(args)} were given"
                    )
                for key in given:
                    if key in kwargs:
                        raise TypeError(f"{name}() got multiple values for argument {key!r}")
                which = ", ".join(map(repr, given))
                _warn(
                    f"{name}(): passing {which} by position is deprecated and will be removed "
                    f"in {REMOVAL}; use {name}({'=..., '.join(given)}=...)"
                )
                kwargs.update(zip(given, args[n:], strict=True))
                args = args[:n]
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def retired_keyword(
    keyword: str, instead: str, redirect: Callable[..., Any] | None = None
) -> Callable[[F], F]:
    """Decorator: the keyword ``keyword`` is gone from the signature but still accepted.

    Giving it warns, naming ``instead`` (what to call now). With ``redirect``, a
    true value calls ``redirect`` with the other arguments instead (e.g.
    ``consensus(pmf, bounds=True)`` -> ``consensus_bounds(pmf)``); a false value,
    or no ``redirect``, drops the keyword and calls the function.

    Examples
    --------
    >>> import warnings
    >>> def both(x):
    ...     return ("both", x)
    >>> @retired_keyword("full", "both(x)", redirect=both)
    ... def one(x):
    ...     return x
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     one(2), one(2, full=True), one(2, full=False)
    (2, ('both', 2), 2)
    """

    def decorate(func: F) -> F:
        name = func.__name__

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if keyword not in kwargs:
                return func(*args, **kwargs)
            value = kwargs.pop(keyword)
            _warn(
                f"{name}({keyword}=...) is deprecated and will be removed in {REMOVAL}; "
                f"use {instead}"
            )
            if value and redirect is not None:
                return redirect(*args, **kwargs)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def deprecated_function(instead: str) -> Callable[[F], F]:
    """Decorator: calling the function warns that it is deprecated, naming ``instead``.

    Examples
    --------
    >>> import warnings
    >>> @deprecated_function("new()")
    ... def old():
    ...     return 1
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     old()
    1
    >>> str(seen[0].message)
    'old() is deprecated and will be removed in xlikert 1.0; use new()'
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _warn(
                f"{func.__name__}() is deprecated and will be removed in {REMOVAL}; use {instead}"
            )
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
