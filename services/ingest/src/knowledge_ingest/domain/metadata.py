"""A document's (or a passage's) metadata: what it may hold, decided in one place.

Values are strings, numbers, booleans, timestamps (RFC 3339 strings: a filter compares them as
times) or lists of strings. The limits keep one chunk's merged metadata small enough to sit in
every chunk row and to be indexed: at most ``MAX_KEYS`` keys, each a plain name of at most
``MAX_KEY_CHARS`` characters, each value at most ``MAX_VALUE_BYTES`` of JSON, the whole at most
``MAX_TOTAL_BYTES``. A nested object, a null, or a list holding anything but strings is refused.
So are the keys the service writes into every chunk's metadata itself (``RESERVED_KEYS``): a
caller's value there would change what the service reads back.

Past any rule: ``MetadataInvalid`` (INVALID_ARGUMENT, reason METADATA_INVALID), naming the key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from knowledge_runtime.errors import InvalidField

MAX_KEYS = 64
MAX_KEY_CHARS = 64
MAX_VALUE_BYTES = 1024
MAX_TOTAL_BYTES = 16 * 1024
KEY_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_KEY = re.compile(KEY_PATTERN)
# What ingest writes into every chunk's metadata and reads back (the text pages read
# overlap_chars; hits name their document and fragment): never the caller's.
RESERVED_KEYS = frozenset({"document_id", "chunk_index", "overlap_chars", "fragment"})
_EXACT_FLOAT = 2**53  # an integral number below this is stored as an integer, exactly

Metadata = dict[str, Any]


class MetadataInvalid(InvalidField):
    reason = "METADATA_INVALID"

    def __init__(self, field: str, message: str, key: str = "") -> None:
        extra = {"key": key[:80]} if key else {}
        super().__init__(field, message, **extra)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _value(field: str, key: str, value: object) -> object:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise MetadataInvalid(field, f"{field}.{key} must be a finite number", key)
        if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_FLOAT:
            return int(value)  # a Struct carries every number as a double: 3.0 is the page 3
        return value
    if isinstance(value, list | tuple):
        if not all(isinstance(item, str) for item in value):
            raise MetadataInvalid(field, f"{field}.{key} is a list: it may hold strings only", key)
        return list(value)
    if value is None:
        raise MetadataInvalid(field, f"{field}.{key} is null: leave the key out instead", key)
    if isinstance(value, Mapping):
        raise MetadataInvalid(field, f"{field}.{key} is an object: metadata values are not nested", key)
    raise MetadataInvalid(field, f"{field}.{key} must be a string, number, boolean or list of strings", key)


def check_metadata(values: Mapping[str, object], field: str = "metadata") -> Metadata:
    """The metadata as stored (integral numbers as integers), or ``MetadataInvalid`` naming the
    first key that breaks a rule. ``field``: where the request carried it (``passages[3].metadata``)."""
    if len(values) > MAX_KEYS:
        raise MetadataInvalid(field, f"{field} holds {len(values)} keys; at most {MAX_KEYS}")
    checked: Metadata = {}
    for key in sorted(values):
        if not isinstance(key, str) or not _KEY.match(key):
            raise MetadataInvalid(
                field,
                f"{field} key {str(key)[:80]!r} must be a letter or '_' then letters, digits or '_', "
                f"at most {MAX_KEY_CHARS} characters",
                str(key),
            )
        if key in RESERVED_KEYS:
            raise MetadataInvalid(
                field, f"{field}.{key} is reserved: the service writes it ({', '.join(sorted(RESERVED_KEYS))})", key
            )
        value = _value(field, key, values[key])
        if len(_json(value).encode("utf-8")) > MAX_VALUE_BYTES:
            raise MetadataInvalid(field, f"{field}.{key} is over {MAX_VALUE_BYTES} bytes of JSON", key)
        checked[key] = value
    if len(_json(checked).encode("utf-8")) > MAX_TOTAL_BYTES:
        raise MetadataInvalid(field, f"{field} is over {MAX_TOTAL_BYTES} bytes of JSON in all")
    return checked


def parse_metadata_json(text: str, field: str = "metadata") -> Metadata:
    """Metadata sent as a JSON object (an upload form's ``metadata`` field), checked."""
    try:
        values = json.loads(text) if text.strip() else {}
    except ValueError:
        raise MetadataInvalid(field, f"{field} must be a JSON object") from None
    if not isinstance(values, dict):
        raise MetadataInvalid(field, f"{field} must be a JSON object")
    return check_metadata(values, field)


def fitted_value(text: str) -> str:
    """``text`` cut, at a character, to at most ``MAX_VALUE_BYTES`` of JSON: what a file says of
    itself (a long To line) is kept shortened rather than refused, since nobody sent it."""
    while len(_json(text).encode("utf-8")) > MAX_VALUE_BYTES:
        excess = len(_json(text).encode("utf-8")) - MAX_VALUE_BYTES
        text = text[: len(text) - max(1, excess // 6)]  # at most 6 bytes of JSON a character
    return text


def fits(values: Mapping[str, object]) -> bool:
    """Whether metadata stays within the whole's limits (keys and bytes)."""
    return len(values) <= MAX_KEYS and len(_json(values).encode("utf-8")) <= MAX_TOTAL_BYTES


def with_extracted(document: Mapping[str, object], extracted: Mapping[str, str]) -> Metadata:
    """The document's metadata with what its file says of itself (``Extracted.metadata``) added:
    the caller's value wins on a shared key (it was chosen; the file's was not), and where the
    sum would pass ``MAX_KEYS`` or ``MAX_TOTAL_BYTES`` nothing is added (the caller's metadata is
    never cut for the file's). The storing statement writes this same rule in SQL."""
    merged = {**extracted, **document}
    return merged if fits(merged) else dict(document)
