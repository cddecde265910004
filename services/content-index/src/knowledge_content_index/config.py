"""The content-index service's settings, read once from ``KNOWLEDGE_*`` at start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from knowledge_runtime.settings import CommonSettings, Env


@dataclass(frozen=True, slots=True)
class ContentIndexSettings:
    common: CommonSettings
    blob_root: Path
    max_upload_bytes: int

    @classmethod
    def from_env(cls, env: Env | None = None) -> ContentIndexSettings:
        env = env or Env()
        common = CommonSettings.from_env("content-index", env)
        blob_root = env.path("BLOB_ROOT", common.data_dir / "blobs")
        assert blob_root is not None
        return cls(
            common=common,
            blob_root=blob_root,
            max_upload_bytes=env.int("MAX_UPLOAD_BYTES", 100 * 1024 * 1024, minimum=1),
        )
