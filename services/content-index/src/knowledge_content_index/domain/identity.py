"""A blob's identity: SHA-256 of its bytes, or HMAC-SHA256 under its tenant's key.

Content hashes are strings in one of two visibly different forms, so they never collide:

- ``<hex>``: lowercase hex SHA-256 of the bytes (64 characters), shared by every tenant that
  does not isolate content: the same bytes are stored once for all of them.
- ``hmac-sha256:<hex>``: lowercase hex HMAC-SHA256 of the bytes under the writing tenant's key,
  for a tenant with ``tenants.isolate_content``; nobody else can produce (or dedup against) it.

Tenant keys are derived from one master secret of at least 32 bytes (``KNOWLEDGE_CONTENT_KEY``,
or the key file of the embedded stack) with HKDF-SHA256 (RFC 5869)::

    prk        = HMAC-SHA256(key=SALT, msg=master)                       # HKDF-Extract
    tenant_key = HMAC-SHA256(key=prk, msg=b"tenant:" + utf8(tenant) + b"\\x01")  # HKDF-Expand, L=32
    hash       = "hmac-sha256:" + hex(HMAC-SHA256(key=tenant_key, msg=bytes))

with ``SALT = b"knowledge.v1 content-index tenant keys"``. Keys live only in memory, are never
logged, returned or stored, and no ``repr`` shows them. Changing the master secret changes every
isolated tenant's future hashes (old blobs stay readable; new writes no longer dedup with them).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass

HMAC_PREFIX = "hmac-sha256:"
MIN_MASTER_KEY_BYTES = 32
SALT = b"knowledge.v1 content-index tenant keys"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


@dataclass(frozen=True, slots=True)
class ContentHash:
    """A parsed content hash: its 64-character hex digest and whether it is a tenant's HMAC."""

    digest: str
    keyed: bool

    def __str__(self) -> str:
        return f"{HMAC_PREFIX}{self.digest}" if self.keyed else self.digest

    @classmethod
    def parse(cls, text: str) -> ContentHash | None:
        """The hash written as ``text`` (either form, any letter case), or None when malformed."""
        value = text.strip().lower()
        keyed = value.startswith(HMAC_PREFIX)
        digest = value[len(HMAC_PREFIX) :] if keyed else value
        return cls(digest, keyed) if _HEX64.fullmatch(digest) else None


class ContentHasher:
    """Accumulates bytes; ``finish()`` gives their :class:`ContentHash`. Never exposes its key."""

    __slots__ = ("_keyed", "_state")

    def __init__(self, key: bytes | None) -> None:
        self._keyed = key is not None
        self._state = hmac.new(key, digestmod=hashlib.sha256) if key is not None else hashlib.sha256()

    @property
    def keyed(self) -> bool:
        return self._keyed

    def update(self, data: bytes | memoryview) -> None:
        self._state.update(data)

    def finish(self) -> ContentHash:
        return ContentHash(self._state.hexdigest(), self._keyed)

    def __repr__(self) -> str:
        return f"ContentHasher(keyed={self._keyed})"


class ContentKeyring:
    """Derives each tenant's HMAC key from the master secret (see the module docstring)."""

    __slots__ = ("_prk",)

    def __init__(self, master: bytes) -> None:
        if len(master) < MIN_MASTER_KEY_BYTES:
            raise ValueError(f"the content master key must be at least {MIN_MASTER_KEY_BYTES} bytes")
        self._prk = hmac.digest(SALT, master, "sha256")

    def tenant_key(self, tenant: str) -> bytes:
        return hmac.digest(self._prk, b"tenant:" + tenant.encode("utf-8") + b"\x01", "sha256")

    def hasher(self, tenant: str, *, isolated: bool) -> ContentHasher:
        """Plain SHA-256 for a tenant that shares content, its own HMAC for one that isolates it."""
        return ContentHasher(self.tenant_key(tenant) if isolated else None)

    def __repr__(self) -> str:
        return "ContentKeyring(<redacted>)"


def decode_master_key(text: str) -> bytes | None:
    """The key written as hex (tried first) or base64 (standard or URL-safe); None when unusable."""
    value = text.strip()
    if _HEX.fullmatch(value):
        key = bytes.fromhex(value)
    else:
        try:
            padded = value + "=" * (-len(value) % 4)
            key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            return None
    return key if len(key) >= MIN_MASTER_KEY_BYTES else None
