"""The contracts every floor reads, each once, at the bottom of the package.

* :mod:`xlikert.core.errors` -- the exception classes (every one a subclass of
  :class:`~xlikert.core.errors.XlikertError`, a ``ValueError``);
* :mod:`xlikert.core.schema` -- the results schema: every variable, its dims, fill
  value and codec;
* :mod:`xlikert.core.codecs` -- the codecs of the text variables (token ids, trace
  texts);
* :mod:`xlikert.core.dims` -- the one registry of dimension roles (core, auxiliary,
  reserved) and the calling convention of dimension arguments;
* :mod:`xlikert.core.validate` -- the shared input checks;
* :mod:`xlikert.core.io` -- the netCDF round trip (atomic writes, attrs as JSON text).

Nothing here imports another floor of xlikert (``[tool.importlinter]`` in
``pyproject.toml``); the top level re-exports what users call (``xl.open_results``,
``xl.XlikertError``, ...).
"""
