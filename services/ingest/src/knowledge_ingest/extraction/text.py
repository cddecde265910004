"""Anything that is not a known document format: text, UTF-8 unless a BOM says otherwise
(or unless it is not UTF-8 at all and reads as Windows-1252), invalid bytes replaced, NUL
and other control characters dropped. Markdown in a text file
stays markdown (its headings are headings). Bytes that are clearly not text are refused."""

from __future__ import annotations

import codecs
import re
from typing import BinaryIO

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.domain.formats import accepted_summary
from knowledge_ingest.extraction.markdown import TextSink

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_SAMPLE_CHARS = 65_536
MAX_NON_TEXT_SHARE = 0.10  # replaced bytes and control characters in the first 64 KiB
MAX_LEGACY_SHARE = 0.25  # bytes above 0x7F in text read as Windows-1252


def extract_text(stream: BinaryIO, sink: TextSink) -> None:
    budget = sink.limits.max_chars * 4 + 4  # UTF-8 needs at most 4 bytes a character
    data = stream.read(budget + 1)
    if len(data) > budget:
        data = data[:budget]
        sink.warnings.append(f"the text was cut at {sink.limits.max_chars:,} characters")
    text = decode(data)
    legacy = _windows_1252(data) if "\ufffd" in text else None
    if legacy is not None:
        text = legacy
    sample = text[:_SAMPLE_CHARS]
    non_text = sample.count("\ufffd") + len(_CONTROL.findall(sample))
    if non_text > max(len(sample) * MAX_NON_TEXT_SHARE, 2):  # a stray bad byte or two is still text
        raise ExtractionFailed(
            f"the file is neither text nor a supported format ({accepted_summary()})",
            reason=ExtractionFailed.UNSUPPORTED_FORMAT,
        )
    if legacy is not None:
        sink.warnings.append("the text is not UTF-8; it was read as Windows-1252")
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).replace("\x0c", "\n\n")
    sink.add(text)


def decode(data: bytes) -> str:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def _windows_1252(data: bytes) -> str | None:
    """Spreadsheet exports are often Windows-1252: read them so when every byte is defined
    there and no UTF-8 multi-byte sequence is present, else keep the UTF-8 reading."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF8)):
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start > 0 and _has_utf8_sequence(data[: error.start]):
            return None
    sample = data[:_SAMPLE_CHARS]
    if sum(byte >= 0x80 for byte in sample) > len(sample) * MAX_LEGACY_SHARE:
        return None  # text has a few accented letters; random bytes are half high bytes
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return None


def _has_utf8_sequence(valid: bytes) -> bool:
    return any(byte >= 0x80 for byte in valid)
