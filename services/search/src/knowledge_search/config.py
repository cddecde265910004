"""The search service's settings, read once from ``KNOWLEDGE_*`` at start."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.settings import CommonSettings, Env, service_address


@dataclass(frozen=True, slots=True)
class SearchSettings:
    common: CommonSettings
    embedder_address: str

    @classmethod
    def from_env(cls, env: Env | None = None) -> SearchSettings:
        env = env or Env()
        return cls(common=CommonSettings.from_env("search", env), embedder_address=service_address("embedder", env))
