"""The documents-ai service's settings, read once from ``KNOWLEDGE_*`` at start."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.llm import LlmSettings, llm_settings
from knowledge_runtime.settings import PREFIX, CommonSettings, Env, SettingsError, service_address

from knowledge_documents_ai.domain.classification import DEFAULT_FLOOR, DEFAULT_TEMPERATURE, Calibration
from knowledge_documents_ai.domain.processing import (
    CLASSIFY_CHUNKS,
    DEFAULT_PROMPT_CHARS,
    DEFAULT_PROPOSAL_THRESHOLD,
    Tuning,
)


@dataclass(frozen=True, slots=True)
class DocumentsAiSettings:
    common: CommonSettings
    embedder_address: str
    database_pool_size: int = 10
    llm: LlmSettings | None = None
    tuning: Tuning = Tuning()

    @property
    def sign_internal_calls(self) -> bool:
        return self.common.service_key is not None

    @classmethod
    def from_env(cls, env: Env | None = None) -> DocumentsAiSettings:
        env = env or Env()
        threshold = env.float("DOCAI_PROPOSAL_THRESHOLD", DEFAULT_PROPOSAL_THRESHOLD, minimum=0.0, maximum=1.0)
        temperature = env.float("DOCAI_TEMPERATURE", DEFAULT_TEMPERATURE, minimum=0.0)
        if temperature <= 0:
            raise SettingsError(f"{PREFIX}DOCAI_TEMPERATURE must be > 0")
        return cls(
            common=CommonSettings.from_env("documents-ai", env),
            embedder_address=service_address("embedder", env),
            database_pool_size=env.int("DOCAI_DATABASE_POOL_SIZE", 10, minimum=1, maximum=200),
            llm=llm_settings(env),
            tuning=Tuning(
                calibration=Calibration(
                    temperature=temperature, floor=env.float("DOCAI_FLOOR", DEFAULT_FLOOR, minimum=0.0)
                ),
                proposal_threshold=threshold,
                prompt_chars=env.int("DOCAI_PROMPT_CHARS", DEFAULT_PROMPT_CHARS, minimum=500, maximum=200_000),
                classify_chunks=env.int("DOCAI_CLASSIFY_CHUNKS", CLASSIFY_CHUNKS, minimum=1, maximum=100),
            ),
        )
