"""Opaque keyset page tokens shared by every list RPC."""

from __future__ import annotations

import base64
import binascii

from knowledge_runtime import ids
from knowledge_runtime.errors import InvalidArgument

_PREFIX = "k1:"


class InvalidPageToken(InvalidArgument):
    reason = "PAGE_TOKEN_INVALID"

    def __init__(self) -> None:
        super().__init__("page_token is not one this service issued", metadata={"field": "page_token"})


def encode_page_token(after_id: int | None) -> str:
    if after_id is None:
        return ""
    return base64.urlsafe_b64encode(f"{_PREFIX}{after_id}".encode()).decode().rstrip("=")


def decode_page_token(token: str) -> int:
    """The id to continue after; 0 for an empty token."""
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidPageToken() from None
    after = ids.parse_id(text[len(_PREFIX):]) if text.startswith(_PREFIX) else None
    if after is None:
        raise InvalidPageToken()
    return after
