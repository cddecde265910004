"""The embedder's settings, read once from ``KNOWLEDGE_*`` at start.

The model always comes from configuration (a local path or a name that resolves offline),
never from a literal in the code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knowledge_runtime.settings import PREFIX, CommonSettings, Env, SettingsError

from knowledge_embedder.domain.backend import BACKENDS, REMOTE
from knowledge_embedder.domain.model import Prompts

CPU_BULK_BATCH_TOKENS = 512
# A remote server's batch of passages: one request of a few chunks would spend more on the round
# trip than on the chunks, and a query waits behind at most one such request per lane.
REMOTE_BULK_BATCH_TOKENS = 2048


def _display_id(model: str) -> str:
    """A hub-style name as given; for a local path, its last two folders (no server layout leaks)."""
    path = Path(model)
    if not path.is_absolute() and not model.startswith((".", "~")):
        return model
    return "/".join(path.expanduser().parts[-2:])


@dataclass(frozen=True, slots=True)
class EmbedderSettings:
    common: CommonSettings
    model: str
    model_id: str  # what Info, cost records and answers name: never a server path
    device: str  # "auto" picks cuda > mps > cpu
    backend: str  # "auto": torch on cuda or mps, else onnx-int8 when ONNX Runtime is installed
    max_seq_length: int
    max_batch_tokens: int
    bulk_batch_tokens: int  # the cap of a batch of passages (what a query may wait behind); 0 = by device
    interactive_burst: int  # query batches in a row before waiting passages get a batch
    max_queue: int
    batch_size: int  # inputs per forward pass; 0 = by device (cuda 32, mps 8, cpu 16; onnx-int8 8)
    price_per_1k_tokens: float
    currency: str
    database_pool_size: int
    rerank_model: str | None = None  # a local cross-encoder directory; None: Rerank is refused
    rerank_model_id: str = ""
    rerank_max_length: int = 512
    rerank_price_per_1k_tokens: float = 0.0
    inference_lanes: int = 0  # ONNX forward passes at once; 0 = one per usable core (torch: always one)
    prompts: Prompts | None = None  # None: the model's own (its config_sentence_transformers.json)
    remote: RemoteSettings | None = None  # backend "remote" only
    # The second model a model change embeds with, held beside this one; None when unset.
    next: EmbedderSettings | None = None

    def bulk_batch_tokens_on(self, device: str) -> int:
        """The configured cap, else by device: on a CPU (or mps) a forward pass costs about the same
        per token at any batch size, so a small batch (512 tokens) costs ingestion little and keeps a
        query's wait short; on cuda a large batch costs little more than a small one (the full
        ``max_batch_tokens``)."""
        if device.startswith("cuda"):
            by_device = self.max_batch_tokens
        elif device == REMOTE:
            by_device = REMOTE_BULK_BATCH_TOKENS
        else:
            by_device = CPU_BULK_BATCH_TOKENS
        chosen = self.bulk_batch_tokens or by_device
        return min(chosen, self.max_batch_tokens)

    @classmethod
    def from_env(cls, env: Env | None = None, environ: Mapping[str, str] | None = None) -> EmbedderSettings:
        """``environ``: the variables (``os.environ`` by default); the next model's settings are
        read from the same variables with its own names put in place of the model's."""
        if environ is None:
            environ = env.environ if env is not None else os.environ
        env = env or Env(environ)
        model = env.str("EMBEDDING_MODEL", required=True)
        assert model is not None
        rerank_model = env.str("RERANK_MODEL") or None
        backend = env.choice("EMBEDDING_BACKEND", "torch", BACKENDS)
        remote = RemoteSettings.from_env(env) if backend == REMOTE else None
        return cls(
            common=CommonSettings.from_env("embedder", env),
            model=model,
            model_id=env.str("EMBEDDING_MODEL_ID") or (remote.model if remote else _display_id(model)),
            device=env.choice("EMBEDDING_DEVICE", "auto", ("auto", "cuda", "mps", "cpu")),
            backend=backend,
            max_seq_length=env.int("MAX_SEQ_LENGTH", 1024, minimum=16),
            max_batch_tokens=env.int("MAX_BATCH_TOKENS", 16384, minimum=64),
            bulk_batch_tokens=env.int("BULK_BATCH_TOKENS", 0, minimum=0),
            interactive_burst=env.int("INTERACTIVE_BURST", 1, minimum=1),
            max_queue=env.int("MAX_QUEUE", 4096, minimum=1),
            batch_size=env.int("EMBEDDING_BATCH_SIZE", 0, minimum=0, maximum=4096),
            price_per_1k_tokens=env.float("EMBEDDING_PRICE_PER_1K", 0.0, minimum=0.0),
            currency=env.str("EMBEDDING_CURRENCY", "USD") or "USD",
            database_pool_size=env.int("EMBEDDER_DATABASE_POOL_SIZE", 10, minimum=1, maximum=200),
            rerank_model=rerank_model,
            rerank_model_id=(env.str("RERANK_MODEL_ID") or _display_id(rerank_model)) if rerank_model else "",
            rerank_max_length=env.int("RERANK_MAX_LENGTH", 512, minimum=16),
            rerank_price_per_1k_tokens=env.float("RERANK_PRICE_PER_1K", 0.0, minimum=0.0),
            inference_lanes=env.int("INFERENCE_LANES", 0, minimum=0, maximum=64),
            prompts=prompts_setting(env),
            remote=remote,
            next=cls.from_env(environ=next_environ(environ)) if env.str("EMBEDDING_NEXT_MODEL") else None,
        )


# The settings that are a model's own: the next model reads each from its NEXT name and never
# inherits the current model's (its server, its credential, its prompts, its price).
NEXT_NAMES = {
    "EMBEDDING_MODEL": "EMBEDDING_NEXT_MODEL",
    "EMBEDDING_MODEL_ID": "EMBEDDING_NEXT_MODEL_ID",
    "EMBEDDING_BACKEND": "EMBEDDING_NEXT_BACKEND",
    "EMBEDDING_PROMPTS": "EMBEDDING_NEXT_PROMPTS",
    "EMBEDDING_PRICE_PER_1K": "EMBEDDING_NEXT_PRICE_PER_1K",
    "EMBEDDER_REMOTE_URL": "EMBEDDER_NEXT_REMOTE_URL",
    "EMBEDDER_REMOTE_MODEL": "EMBEDDER_NEXT_REMOTE_MODEL",
    "EMBEDDER_REMOTE_API_KEY": "EMBEDDER_NEXT_REMOTE_API_KEY",
    "EMBEDDER_REMOTE_INPUT_TYPE": "EMBEDDER_NEXT_REMOTE_INPUT_TYPE",
}


def next_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables as the next model reads them: its own names in place of the model's, and no
    NEXT model of its own (a deployment holds two models, not a chain)."""
    view = {k: v for k, v in environ.items() if k.removeprefix(PREFIX) not in NEXT_NAMES}
    for name, next_name in NEXT_NAMES.items():
        value = environ.get(PREFIX + next_name)
        if value is not None:
            view[PREFIX + name] = value
    view.pop(PREFIX + "EMBEDDING_NEXT_MODEL", None)
    return view


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """An OpenAI-compatible ``/v1/embeddings`` server the embedder calls instead of a local model
    (text-embeddings-inference, vLLM, Infinity, a hosted API). Only the embedder knows it."""

    url: str  # the API base, e.g. http://tei:8080/v1: requests go to <url>/embeddings
    model: str  # the model name the server is asked for
    api_key: str | None  # sent as a bearer token; from a secret, never logged
    timeout_s: float
    input_type: bool  # send "input_type": "query"/"passage" (servers that prompt by it themselves)
    concurrency: int  # requests in flight at once (the runner's lanes)
    attempts: int  # tries of one request before its batch fails and the breaker opens
    cool_off_s: float  # how long an open breaker refuses before one request probes the server

    @classmethod
    def from_env(cls, env: Env) -> RemoteSettings:
        url = env.str("EMBEDDER_REMOTE_URL", required=True)
        model = env.str("EMBEDDER_REMOTE_MODEL", required=True)
        assert url is not None and model is not None
        if not url.startswith(("http://", "https://")):
            raise SettingsError(f"{PREFIX}EMBEDDER_REMOTE_URL must be an http(s) URL, got {url!r}")
        return cls(
            url=url.rstrip("/"),
            model=model,
            api_key=env.str("EMBEDDER_REMOTE_API_KEY"),
            timeout_s=env.float("EMBEDDER_REMOTE_TIMEOUT_S", 60.0, minimum=0.1),
            input_type=env.bool("EMBEDDER_REMOTE_INPUT_TYPE", False),
            concurrency=env.int("EMBEDDER_REMOTE_CONCURRENCY", 4, minimum=1, maximum=64),
            attempts=env.int("EMBEDDER_REMOTE_ATTEMPTS", 3, minimum=1, maximum=10),
            cool_off_s=env.float("EMBEDDER_REMOTE_COOL_OFF_S", 5.0, minimum=0.0),
        )


def prompts_setting(env: Env) -> Prompts | None:
    """``KNOWLEDGE_EMBEDDING_PROMPTS``: a JSON object as sentence-transformers' own ``prompts``
    (``{"query": "query: ", "passage": "passage: "}``; JSON keeps the trailing spaces an
    environment variable would lose); None when unset (the model's configuration decides)."""
    raw = env.str("EMBEDDING_PROMPTS")
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SettingsError(
            f'{PREFIX}EMBEDDING_PROMPTS must be a JSON object of strings, e.g. {{"query": "query: ", "passage": "passage: "}}'
        )
    return prompts_of(value)


def prompts_of(prompts: dict[str, str]) -> Prompts:
    """The query and passage prompts of a sentence-transformers ``prompts`` mapping (the passage
    one may be named ``document``)."""
    return Prompts(query=prompts.get("query", ""), passage=prompts.get("passage", prompts.get("document", "")))
