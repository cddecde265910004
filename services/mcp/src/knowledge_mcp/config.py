"""The MCP adapter's settings, read once from ``KNOWLEDGE_*`` at start."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.settings import CommonSettings, Env, service_address

SERVICE = "mcp"
DEFAULT_CALL_TIMEOUT_S = 60.0
DEFAULT_INDEX_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class McpSettings:
    common: CommonSettings
    ingest_address: str
    search_address: str
    documents_ai_address: str
    embedder_address: str  # anchors only: the embedder admits a service token's `embed`, never a user's
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S  # each gRPC call a tool makes
    index_wait_s: float = DEFAULT_INDEX_WAIT_S  # how long index_content waits for its job to end

    @classmethod
    def from_env(cls, env: Env | None = None) -> McpSettings:
        env = env or Env()
        return cls(
            common=CommonSettings.from_env(SERVICE, env),
            ingest_address=service_address("ingest", env),
            search_address=service_address("search", env),
            documents_ai_address=service_address("documents-ai", env),
            embedder_address=service_address("embedder", env),
            call_timeout_s=env.float("MCP_CALL_TIMEOUT_S", DEFAULT_CALL_TIMEOUT_S, minimum=1.0, maximum=600.0),
            index_wait_s=env.float("MCP_INDEX_WAIT_S", DEFAULT_INDEX_WAIT_S, minimum=0.0, maximum=110.0),
        )
