"""Webhook signing secrets sealed for storage: AES-256-GCM under a key kept outside the database
(``KNOWLEDGE_WEBHOOK_KEY_PATH``), the tenant and URL as associated data.

A secret must be usable for signing, so it cannot be hashed; sealed, a copy of the database or of
its backups holds nothing that signs, and a sealed secret copied onto another tenant's or another
URL's row does not open. Every ingest replica reads the same key file.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

import structlog
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from knowledge_runtime.settings import SettingsError

log = structlog.get_logger("knowledge.ingest.webhooks")

KEY_BYTES = 32
NONCE_BYTES = 12
_VERSION = "v1:"


def new_key_text() -> str:
    """A fresh key as its file holds it: base64 of 32 random bytes."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")


class AesGcmSealer:
    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"the webhook key is {KEY_BYTES} bytes")
        self._aead = AESGCM(key)

    @classmethod
    def from_file(cls, path: Path, *, create: bool = False) -> AesGcmSealer:
        """The key in ``path`` (base64 of 32 bytes); SettingsError naming the variable otherwise.
        ``create``: a missing file is made first (the default path in the data directory, for a
        single node; replicas that do not share that file cannot open each other's secrets)."""
        if create and not path.exists():
            _create_key(path)
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError as error:
            raise SettingsError(
                f"KNOWLEDGE_WEBHOOK_KEY_PATH: cannot read {path} ({error.strerror}); it holds the key webhook "
                "secrets are sealed with: base64 of 32 random bytes (`head -c 32 /dev/urandom | base64`), the same "
                "file for every ingest replica (`knowledge up` creates one in its data directory)"
            ) from None
        except UnicodeDecodeError:
            text = ""
        try:
            key = base64.b64decode(text, validate=True)
        except binascii.Error:
            key = b""
        if len(key) != KEY_BYTES:
            raise SettingsError(f"KNOWLEDGE_WEBHOOK_KEY_PATH: {path} does not hold base64 of {KEY_BYTES} bytes")
        return cls(key)

    def seal(self, tenant: str, url: str, secret: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), _associated(tenant, url))
        return _VERSION + base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, tenant: str, url: str, sealed: str) -> str:
        try:
            raw = base64.b64decode(sealed.removeprefix(_VERSION), validate=True)
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(tenant, url)).decode()
        except (binascii.Error, InvalidTag, ValueError):
            raise ValueError("the secret was not sealed for this webhook under this key") from None


def _create_key(path: Path) -> None:
    """A new key at ``path``, mode 0600; when another process made one first, that one stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(new_key_text() + "\n")
    try:
        os.link(staged, path)
    except FileExistsError:
        pass
    finally:
        staged.unlink()
    log.warning("webhook_key_created", path=str(path))


def _associated(tenant: str, url: str) -> bytes:
    return f"{len(tenant)}:{tenant}{url}".encode()
