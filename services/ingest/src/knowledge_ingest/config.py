"""The ingest service's settings, read once from ``KNOWLEDGE_*`` at start."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.metrics import metrics_port
from knowledge_runtime.service_tokens import ServiceKey
from knowledge_runtime.settings import CommonSettings, Env, service_address


@dataclass(frozen=True, slots=True)
class IngestSettings:
    common: CommonSettings
    service_key: ServiceKey | None  # None only where no internal call is made (tests of the corpus RPCs)
    database_pool_size: int
    content_index_address: str
    embedder_address: str
    max_upload_bytes: int
    workers: int
    lease_s: float
    max_attempts: int
    retry_base_s: float
    chunk_max_chars: int
    embed_batch: int
    metrics_port: int

    @classmethod
    def from_env(cls, env: Env | None = None) -> IngestSettings:
        env = env or Env()
        return cls(
            common=CommonSettings.from_env("ingest", env),
            service_key=ServiceKey.from_env(env) if env.str("SERVICE_KEY_PATH") else None,
            database_pool_size=env.int("INGEST_DATABASE_POOL_SIZE", 10, minimum=2, maximum=200),
            content_index_address=service_address("content-index", env),
            embedder_address=service_address("embedder", env),
            max_upload_bytes=env.int("MAX_UPLOAD_BYTES", 100 * 1024 * 1024, minimum=1),
            workers=env.int("INGEST_WORKERS", 2, minimum=0, maximum=64),
            lease_s=env.float("INGEST_LEASE_S", 30.0, minimum=1.0),
            max_attempts=env.int("INGEST_MAX_ATTEMPTS", 5, minimum=1, maximum=100),
            retry_base_s=env.float("INGEST_RETRY_BASE_S", 2.0, minimum=0.0),
            chunk_max_chars=env.int("CHUNK_MAX_CHARS", 1500, minimum=200, maximum=20000),
            embed_batch=env.int("INGEST_EMBED_BATCH", 32, minimum=1, maximum=1024),
            metrics_port=metrics_port(env),
        )
