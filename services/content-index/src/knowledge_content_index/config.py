"""The content-index service's settings, read once from ``KNOWLEDGE_*`` at start.

- ``KNOWLEDGE_BLOB_ROOT`` (``<data dir>/blobs``): where blob files live (local filesystem).
- ``KNOWLEDGE_MAX_UPLOAD_BYTES`` (100 MiB, ``CommonSettings.max_upload_bytes``): the size cap of
  one blob, enforced while streaming.
- ``KNOWLEDGE_CONTENT_KEY`` (a key file under ``<data dir>/keys``): master secret of isolated
  tenants' HMAC keys, hex or base64 of at least 32 bytes; set it, the same everywhere, when more
  than one replica runs.
- ``KNOWLEDGE_BLOB_GC_GRACE_S`` (86400): GC removes unreferenced blobs last written longer ago
  than this, and orphan files last modified longer ago, unless a call asks otherwise.
- ``KNOWLEDGE_BLOB_GC_MIN_AGE_S`` (3600): the least grace period a GC call may ask for; it must
  outlast the time between a write and the reference its caller then inserts.
- ``KNOWLEDGE_CONTENT_INDEX_DATABASE_POOL_SIZE`` (10): connections to PostgreSQL.
- ``KNOWLEDGE_IMPORT_ROOTS`` / ``KNOWLEDGE_IMPORT_ROOTS_FILE``: the operator's import roots, which
  ``ImportFile`` checks every path against itself (``knowledge_runtime.imports``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from knowledge_runtime.imports import ImportRoots
from knowledge_runtime.settings import CommonSettings, Env, SettingsError

from knowledge_content_index.domain.identity import MIN_MASTER_KEY_BYTES, decode_master_key


@dataclass(frozen=True, slots=True)
class ContentIndexSettings:
    common: CommonSettings
    blob_root: Path
    gc_grace: timedelta
    gc_min_age: timedelta
    database_pool_size: int
    # None: the embedded stack's key file. Never shown by repr.
    content_key: bytes | None = field(default=None, repr=False)
    import_roots: ImportRoots = field(default_factory=ImportRoots)

    @property
    def key_file(self) -> Path:
        return self.common.data_dir / "keys" / "content-key"

    @classmethod
    def from_env(cls, env: Env | None = None) -> ContentIndexSettings:
        env = env or Env()
        common = CommonSettings.from_env("content-index", env)
        blob_root = env.path("BLOB_ROOT", common.data_dir / "blobs")
        assert blob_root is not None
        grace = env.int("BLOB_GC_GRACE_S", 86400, minimum=0)
        min_age = env.int("BLOB_GC_MIN_AGE_S", 3600, minimum=0)
        if min_age > grace:
            raise SettingsError(
                f"KNOWLEDGE_BLOB_GC_MIN_AGE_S ({min_age}) must not exceed KNOWLEDGE_BLOB_GC_GRACE_S ({grace})"
            )
        return cls(
            common=common,
            blob_root=blob_root,
            gc_grace=timedelta(seconds=grace),
            gc_min_age=timedelta(seconds=min_age),
            database_pool_size=env.int("CONTENT_INDEX_DATABASE_POOL_SIZE", 10, minimum=1, maximum=200),
            content_key=_content_key(env),
            import_roots=ImportRoots.from_env(env),
        )


def _content_key(env: Env) -> bytes | None:
    text = env.str("CONTENT_KEY")
    if text is None:
        return None
    key = decode_master_key(text)
    if key is None:  # the value itself is never echoed
        raise SettingsError(f"KNOWLEDGE_CONTENT_KEY must be hex or base64 of at least {MIN_MASTER_KEY_BYTES} bytes")
    return key
