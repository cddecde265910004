"""RTF through striprtf (BSD-3-Clause): paragraphs, headings, and table rows (``\\cell`` …
``\\row``) as markdown tables, the first row as the header. A heading is a paragraph in a style
the style sheet names "heading N" (or "Title"), as Word and LibreOffice write them; striprtf does
not read styles, so such a paragraph is marked before it reads the file. No pages: RTF is not laid
out. Text in the code page the file declares (``\\ansicpgN``), Windows-1252 otherwise; pictures
are dropped."""

from __future__ import annotations

import codecs
import re
from typing import BinaryIO

from striprtf.striprtf import rtf_to_text

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction.markdown import TextSink, cell_text

_CODE_PAGE = re.compile(rb"\\ansicpg(\d{3,5})")
_STYLE_SHEET = re.compile(rb"\{\\stylesheet")
_HEADING_STYLE = re.compile(rb"\\s(\d+)\b[^;{}]*?\s(heading\s*([1-6])|title)\s*;", re.IGNORECASE)
_STYLE_USE = re.compile(rb"\\s(\d+)(?![0-9a-z])")
_HEADING_MARK = re.compile(r"^\x01H([1-6])\x01(.*)$")  # the mark put before a heading's text
_ROW = re.compile(r"^(.*)\|[ \t]*$")  # striprtf ends each cell with "|" and each row with a line break


def extract_rtf(stream: BinaryIO, sink: TextSink) -> None:
    data = _mark_headings(stream.read())
    try:
        text = rtf_to_text(data.decode("latin-1"), encoding=_encoding(data), errors="replace")
    except (IndexError, ValueError, LookupError):
        raise ExtractionFailed(
            "the RTF file is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format="rtf"
        ) from None
    rows: list[list[str]] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):  # a line per \par
        sink.check_time()
        row = _ROW.match(line)
        if row is not None:
            rows.append([cell_text(cell) for cell in row.group(1).split("|")])
            continue
        if rows:
            sink.table(rows[: sink.limits.max_rows_per_sheet])
            rows = []
        heading = _HEADING_MARK.match(line)
        if heading is not None:
            sink.heading(int(heading.group(1)), heading.group(2))
        else:
            sink.paragraph(line.replace("\x01", ""))
    if rows:
        sink.table(rows[: sink.limits.max_rows_per_sheet])


def _mark_headings(data: bytes) -> bytes:
    """The file with ``\\x01H<level>\\x01`` as text after each use of a heading style outside the
    style sheet, so the heading's line comes out of striprtf marked."""
    sheet = _STYLE_SHEET.search(data)
    if sheet is None:
        return data
    end = _group_end(data, sheet.start())
    levels = {match.group(1): int(match.group(3) or 1) for match in _HEADING_STYLE.finditer(data, sheet.start(), end)}
    if not levels:
        return data

    def mark(use: re.Match[bytes]) -> bytes:
        level = levels.get(use.group(1))
        return use.group(0) + b" \x01H%d\x01" % level if level else use.group(0)

    return data[:end] + _STYLE_USE.sub(mark, data[end:])


def _group_end(data: bytes, start: int) -> int:
    """Where the ``{`` group at ``start`` closes (escaped braces skipped); the end when it does not."""
    depth = 0
    index = start
    while index < len(data):
        byte = data[index]
        if byte == 0x5C:  # a backslash: the next byte is escaped or starts a control word
            index += 2
            continue
        if byte == 0x7B:
            depth += 1
        elif byte == 0x7D:
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return len(data)


def _encoding(data: bytes) -> str:
    """The declared ANSI code page, where Python knows it; else Windows-1252 (RTF's default)."""
    declared = _CODE_PAGE.search(data[:4096])
    if declared is not None:
        name = f"cp{int(declared.group(1))}"
        try:
            codecs.lookup(name)
        except LookupError:
            return "cp1252"
        return name
    return "cp1252"
