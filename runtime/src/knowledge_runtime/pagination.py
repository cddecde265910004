"""Opaque keyset page tokens shared by every list RPC."""

from __future__ import annotations

import base64
import re

from knowledge_runtime import ids
from knowledge_runtime.errors import InvalidArgument, InvalidField

_PREFIX = "k1:"
MAX_ID_DIGITS = 18  # a page token's id: below 10**18, inside ids.MAX_ID
# Every token this module accepts, and nothing else: "k1:" and an id as ids.parse_id spells it (1
# to 18 ASCII digits, no leading zero), URL-safe base64 without padding. "k1:" is "azE6"; three
# digits are four characters (_DIGITS3), a tail of one or two digits two or three (_DIGITS1,
# _DIGITS2); the first digit is not 0 ("MD", "MA"). The OpenAPI description states it as the
# page_token parameter's pattern, so a client (or a fuzzer) knows the format the server checks.
_LEAD = "(?:M[DTjz]|N[DTjz]|O[DT])"  # the first two characters of a digit followed by another
_LEAD_NONZERO = "(?:M[Tjz]|N[DTjz]|O[DT])"
_DIGITS3 = _LEAD + "[AEIMQUYcgk][w-z0-5]"
_DIGITS2 = _LEAD + "[AEIMQUYcgk]"
_DIGITS1 = "(?:M[AQgw]|N[AQgw]|O[AQ])"
_FIRST3 = _LEAD_NONZERO + "[AEIMQUYcgk][w-z0-5]"
_ONLY2 = _LEAD_NONZERO + "[AEIMQUYcgk]"
_ONLY1 = "(?:M[Qgw]|N[AQgw]|O[AQ])"
PAGE_TOKEN_PATTERN = (
    f"^(?:azE6(?:{_FIRST3}(?:{_DIGITS3}){{0,{MAX_ID_DIGITS // 3 - 2}}}(?:{_DIGITS3}|{_DIGITS2}|{_DIGITS1})?"
    f"|{_ONLY2}|{_ONLY1}))?$"
)
_TOKEN = re.compile(PAGE_TOKEN_PATTERN)


class InvalidPageToken(InvalidArgument):
    reason = "PAGE_TOKEN_INVALID"

    def __init__(self) -> None:
        super().__init__("page_token is not one this service issued", metadata={"field": "page_token"})


class InvalidPageSize(InvalidField):
    def __init__(self) -> None:
        super().__init__("page_size", "page_size must be >= 0 (0 means the default)")


def check_page_size(page_size: int) -> int:
    """A list request's page_size as given: negative is refused, 0 means the service's default."""
    if page_size < 0:
        raise InvalidPageSize()
    return page_size


def bounded_page_size(page_size: int, default: int, maximum: int) -> int:
    """The size of the page to answer: negative is refused, 0 means ``default``, at most ``maximum``."""
    return min(check_page_size(page_size) or default, maximum)


def encode_page_token(after_id: int | None) -> str:
    if after_id is None:
        return ""
    return base64.urlsafe_b64encode(f"{_PREFIX}{after_id}".encode()).decode().rstrip("=")


def decode_page_token(token: str) -> int:
    """The id to continue after; 0 for an empty token."""
    if not token:
        return 0
    if not _TOKEN.fullmatch(token):  # also what base64 would decode leniently, or to non-ASCII digits
        raise InvalidPageToken()
    after = ids.parse_id(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")[len(_PREFIX) :])
    if after is None:  # the pattern spells ids of ids.parse_id only; kept as that rule's check
        raise InvalidPageToken()
    return after
