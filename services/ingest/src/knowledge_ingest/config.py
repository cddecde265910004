"""The ingest service's settings, read once from ``KNOWLEDGE_*`` at start."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.settings import CommonSettings, Env


@dataclass(frozen=True, slots=True)
class IngestSettings:
    common: CommonSettings
    database_pool_size: int

    @classmethod
    def from_env(cls, env: Env | None = None) -> IngestSettings:
        env = env or Env()
        return cls(
            common=CommonSettings.from_env("ingest", env),
            database_pool_size=env.int("INGEST_DATABASE_POOL_SIZE", 10, minimum=1, maximum=200),
        )
