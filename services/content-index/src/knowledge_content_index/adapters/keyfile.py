"""The embedded stack's content master key: random, generated once, kept in a 0600 file.

Used only when ``KNOWLEDGE_CONTENT_KEY`` is unset (like ``knowledge_runtime.devkeys`` for the
signing key). A deployment with more than one replica sets ``KNOWLEDGE_CONTENT_KEY`` instead, so
every replica derives the same tenant keys. The key's value is never logged or echoed.
"""

from __future__ import annotations

import os
import secrets
from contextlib import suppress
from pathlib import Path

from knowledge_content_index.domain.identity import decode_master_key

KEY_FILE = "content-key"
KEY_BYTES = 32


class KeyFileError(ValueError):
    """The key file cannot be created or holds no usable key; the message names the file only."""


def load_or_create_key(path: Path) -> bytes:
    """The key in ``path``, created first when missing. Concurrent starters all get the same key:
    the file is published with ``os.link``, which never replaces one that another process made."""
    if not path.exists():
        try:
            _create(path)
        except OSError as error:
            raise KeyFileError(f"cannot create the content key {path} ({error.strerror})") from None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        raise KeyFileError(f"cannot read the content key {path}") from None
    key = decode_master_key(text)
    if key is None:
        raise KeyFileError(f"{path} holds no usable content key (hex or base64 of at least {KEY_BYTES} bytes)")
    return key


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(KEY_BYTES) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
