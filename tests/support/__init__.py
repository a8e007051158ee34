"""Helpers the tests share: small PMF designs (:mod:`.pmfs`), tiny random-weight models
and their prompts (:mod:`.tiny`), a fake OpenAI-compatible server (:mod:`.fake_server`),
the child process of the resume tests (:mod:`.resume_child`), a questionnaire
(:mod:`.survey`), an independent forward pass (:mod:`.forward`) and the in-process vLLM
engine the integration tests share (:mod:`.vllm_jobs`).

``tests/`` is on ``sys.path`` (the root ``conftest.py`` is not in a package), so a test
imports them as ``from support.tiny import save_tiny``.
"""
