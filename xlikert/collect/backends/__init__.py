"""The collection backends, side by side; each implements :mod:`xlikert.collect.protocol`.

========================  ===================================================
``transformers``          a transformers model in this process (default)
``vllm``                  an in-process ``vllm.LLM`` engine
``openai``                a model behind an OpenAI-compatible server
========================  ===================================================

The two in-process backends share :mod:`.inprocess`. Importing this package
imports no backend (nor torch, transformers or vLLM):
:func:`xlikert.collect.protocol.backend_module` loads the one a model entry names.
"""
