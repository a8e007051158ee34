"""Real models and real engines: the ``integration`` marker, and what a session shares.

Every test in this folder is marked ``integration`` (``pytest -m "not integration"``
leaves them out). The costly things are session fixtures, made once per session:

* the offline models' dequantised folders (``smollm2_folder``, ``qwen_folder``): the zoo
  makes each once, under a file lock, so two workers never dequantise one model twice;
  a test that loads one asks for its fixture, so the cost shows as that fixture's setup;
* the engines (:data:`ENGINES`): a vLLM server, one in-process vLLM engine
  (:mod:`support.vllm_jobs`), and a llama.cpp server per model. Each engine fixture is
  its own pytest-xdist group (the README's command runs ``--dist loadgroup``): every
  test that uses it runs on the worker that started it, so each engine starts once.
  Every other module is a group of its own, so its module fixtures are made once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.vllm_jobs import VLLMJobs

from xlikert.testing import engines

HERE = Path(__file__).parent
#: The fixtures that start an engine; each names the pytest-xdist group of its tests.
ENGINES = ("vllm_server", "vllm_in_process", "llamacpp_smol", "llamacpp_qwen")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups and -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the costly tests first: pytest-xdist hands out its groups (largest first), then single
    # tests in this order, so no real model starts near the end while the other worker idles
    items.sort(key=lambda item: HERE not in item.path.parents)
    for item in items:
        if HERE not in item.path.parents:
            continue
        item.add_marker(pytest.mark.integration)
        used = [name for name in ENGINES if name in item.fixturenames]
        if len(used) > 1:
            raise pytest.UsageError(
                f"{item.nodeid} uses the engines {used}: a test may use one engine fixture "
                "(each is its own xdist group, started once per session)"
            )
        if used:
            item.add_marker(pytest.mark.xdist_group(used[0]))
        elif item.get_closest_marker("xdist_group") is None:
            # a module's tests on one worker: its module fixtures (a model loaded, a run
            # collected) are made once, not once on each worker
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    """The offline SmolLM2-135M-Instruct, dequantised (float32 Hugging Face folder)."""
    return engines.smollm2_folder()


@pytest.fixture(scope="session")
def qwen_folder() -> Path:
    """The offline Qwen2.5-Coder-0.5B-Instruct, dequantised (float32 Hugging Face folder)."""
    return engines.zoo_folder("qwen2.5-coder-0.5b-instruct")


@pytest.fixture(scope="session")
def gemma_folder() -> Path:
    """The offline Gemma 3 270M base, dequantised (float32 Hugging Face folder)."""
    return engines.zoo_folder("gemma-3-270m")


@pytest.fixture(scope="session")
def vllm_server(smollm2_folder, tmp_path_factory):
    """vLLM's OpenAI-compatible server (CPU build) serving SmolLM2 as ``smol``."""
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    srv = engines.vllm_server(smollm2_folder, "smol", log)
    yield srv
    srv.kill()


@pytest.fixture(scope="session")
def vllm_in_process(smollm2_folder, tmp_path_factory):
    """One in-process vLLM engine on SmolLM2, in the vLLM venv, that runs the tests' jobs."""
    jobs = VLLMJobs(tmp_path_factory.mktemp("vllm-in-process") / "engine.log")
    yield jobs
    jobs.close()


@pytest.fixture(scope="session")
def llamacpp_smol(tmp_path_factory):
    """llama-cpp-python's server on SmolLM2's GGUF file, served as ``smol``."""
    log = tmp_path_factory.mktemp("llamacpp-smol") / "server.log"
    srv = engines.llamacpp_server(engines.smollm2_gguf(), "smol", log)
    yield srv
    srv.kill()


@pytest.fixture(scope="session")
def llamacpp_qwen(tmp_path_factory):
    """llama-cpp-python's server on Qwen2.5-Coder's GGUF file, served as ``qwen``."""
    from xlikert.collect.zoo import resolve_gguf

    log = tmp_path_factory.mktemp("llamacpp-qwen") / "server.log"
    srv = engines.llamacpp_server(resolve_gguf("qwen2.5-coder-0.5b-instruct"), "qwen", log)
    yield srv
    srv.kill()
