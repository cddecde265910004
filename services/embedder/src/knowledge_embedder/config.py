"""The embedder's settings, read once from ``KNOWLEDGE_*`` at start.

The model always comes from configuration (a local path or a name that resolves offline),
never from a literal in the code.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.settings import CommonSettings, Env


@dataclass(frozen=True, slots=True)
class EmbedderSettings:
    common: CommonSettings
    model: str
    device: str
    max_seq_length: int
    max_batch_tokens: int
    max_queue: int

    @classmethod
    def from_env(cls, env: Env | None = None) -> EmbedderSettings:
        env = env or Env()
        model = env.str("EMBEDDING_MODEL", required=True)
        assert model is not None
        return cls(
            common=CommonSettings.from_env("embedder", env),
            model=model,
            device=env.choice("EMBEDDING_DEVICE", "auto", ("auto", "cuda", "mps", "cpu")),
            max_seq_length=env.int("MAX_SEQ_LENGTH", 1024, minimum=16),
            max_batch_tokens=env.int("MAX_BATCH_TOKENS", 16384, minimum=64),
            max_queue=env.int("MAX_QUEUE", 4096, minimum=1),
        )
