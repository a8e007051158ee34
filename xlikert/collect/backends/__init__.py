"""The collection backends, side by side; each is a :class:`~xlikert.collect.protocol.Backend`.

Each ``<name>/__init__.py`` defines the backend's ``check``, ``inputs`` and ``open``;
the backends import the contracts of :mod:`xlikert.collect`, never one another
(an import-linter contract).

========================  ===================================================
``transformers``          a transformers model in this process (default)
``vllm``                  an in-process ``vllm.LLM`` engine
``openai``                a model behind an OpenAI-compatible server
========================  ===================================================

The two in-process backends share :mod:`.inprocess`. Importing this package
imports no backend (nor torch, transformers or vLLM):
:func:`xlikert.collect.protocol.backend_module` loads the one a model entry names.
"""
