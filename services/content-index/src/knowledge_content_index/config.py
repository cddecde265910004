"""The content-index service's settings, read once from ``KNOWLEDGE_*`` at start.

- ``KNOWLEDGE_BLOB_STORE`` (``filesystem``): where blob bytes live: ``filesystem`` (under
  ``KNOWLEDGE_BLOB_ROOT``) or ``s3`` (S3-compatible object storage, :class:`ObjectStoreSettings`).
- ``KNOWLEDGE_BLOB_ROOT`` (``<data dir>/blobs``): where blob files live (local filesystem); with
  ``s3``, only the local spool of uploads being received (``.staging``).
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

import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from knowledge_runtime.imports import ImportRoots
from knowledge_runtime.settings import CommonSettings, Env, SettingsError

from knowledge_content_index.domain.identity import MIN_MASTER_KEY_BYTES, decode_master_key

BLOB_STORES = ("filesystem", "s3")
# S3's rules for bucket names (3-63 lowercase letters, digits, dots and hyphens).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9!_.*'()-]+")


@dataclass(frozen=True, slots=True)
class ObjectStoreSettings:
    """``KNOWLEDGE_BLOB_S3_*``: where the blobs of an S3-compatible store live.

    - ``BUCKET`` (required): the bucket, which must exist.
    - ``PREFIX`` (empty): keys are ``<prefix>/<hex[:2]>/<hex><ext>``; slashes at either end are dropped.
    - ``ENDPOINT`` (AWS): the store's URL for anything but AWS S3 (MinIO, Ceph, GCS's
      ``https://storage.googleapis.com``); buckets are then addressed by path.
    - ``REGION`` (botocore's own resolution, e.g. ``AWS_REGION``): the region requests are signed for.

    Credentials are not settings here: botocore reads ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` (or a profile, or the platform's workload identity) itself.
    """

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None

    @classmethod
    def from_env(cls, env: Env) -> ObjectStoreSettings:
        bucket = env.str("BLOB_S3_BUCKET", required=True)
        assert bucket is not None
        if not _BUCKET.fullmatch(bucket):
            raise SettingsError(f"KNOWLEDGE_BLOB_S3_BUCKET is not a valid bucket name: {bucket!r}")
        prefix = (env.str("BLOB_S3_PREFIX") or "").strip("/")
        if prefix and not all(_PREFIX_SEGMENT.fullmatch(s) and s not in (".", "..") for s in prefix.split("/")):
            raise SettingsError("KNOWLEDGE_BLOB_S3_PREFIX must be path segments of letters, digits and -_.!*'()")
        endpoint = env.str("BLOB_S3_ENDPOINT") or None
        if endpoint is not None:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
                raise SettingsError(
                    "KNOWLEDGE_BLOB_S3_ENDPOINT must be an http(s) URL such as https://minio.example:9000"
                )
        return cls(bucket=bucket, prefix=prefix, endpoint=endpoint, region=env.str("BLOB_S3_REGION") or None)


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
    # None: blobs on the filesystem under blob_root (KNOWLEDGE_BLOB_STORE=filesystem).
    object_store: ObjectStoreSettings | None = None

    @property
    def key_file(self) -> Path:
        return self.common.data_dir / "keys" / "content-key"

    @classmethod
    def from_env(cls, env: Env | None = None) -> ContentIndexSettings:
        env = env or Env()
        common = CommonSettings.from_env("content-index", env)
        blob_root = env.path("BLOB_ROOT", common.data_dir / "blobs")
        assert blob_root is not None
        store = env.choice("BLOB_STORE", "filesystem", BLOB_STORES)
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
            object_store=ObjectStoreSettings.from_env(env) if store == "s3" else None,
        )


def _content_key(env: Env) -> bytes | None:
    text = env.str("CONTENT_KEY")
    if text is None:
        return None
    key = decode_master_key(text)
    if key is None:  # the value itself is never echoed
        raise SettingsError(f"KNOWLEDGE_CONTENT_KEY must be hex or base64 of at least {MIN_MASTER_KEY_BYTES} bytes")
    return key
