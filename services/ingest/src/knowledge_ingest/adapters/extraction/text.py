"""Anything that is not a known document format: text, UTF-8 unless a BOM says otherwise,
invalid bytes replaced, NUL and other control characters dropped. Markdown in a text file
stays markdown (its headings are headings). Bytes that are clearly not text are refused."""

from __future__ import annotations

import codecs
import re
from typing import BinaryIO

from knowledge_ingest.adapters.extraction.markdown import TextSink
from knowledge_ingest.domain.extraction import ExtractionFailed

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_SAMPLE_CHARS = 65_536
MAX_NON_TEXT_SHARE = 0.10  # replaced bytes and control characters in the first 64 KiB


def extract_text(stream: BinaryIO, sink: TextSink) -> None:
    budget = sink.limits.max_chars * 4 + 4  # UTF-8 needs at most 4 bytes a character
    data = stream.read(budget + 1)
    if len(data) > budget:
        data = data[:budget]
        sink.warnings.append(f"the text was cut at {sink.limits.max_chars:,} characters")
    text = decode(data)
    sample = text[:_SAMPLE_CHARS]
    if sample and (sample.count("\ufffd") + len(_CONTROL.findall(sample))) / len(sample) > MAX_NON_TEXT_SHARE:
        raise ExtractionFailed(
            "the file is neither text nor a supported document format (PDF, Word, PowerPoint, Excel)",
            reason=ExtractionFailed.UNSUPPORTED_FORMAT,
        )
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).replace("\x0c", "\n\n")
    sink.add(text)


def decode(data: bytes) -> str:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")
