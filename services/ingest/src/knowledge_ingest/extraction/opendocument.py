"""OpenDocument (ODT, ODP, ODS) through odfpy (Apache-2.0, one of its three licences), written as
their Office cousins are: a text's headings by outline level, paragraphs, lists and tables in
document order (no pages: like a Word file, it has none until it is laid out); a presentation's
slides as ``[Page N]`` with the title as a ``##`` heading (``Slide N`` without one), its frames
and tables, then its notes; a spreadsheet's sheets as ``[Sheet: name]`` tables, each cell as it is
shown. The zip was checked for bombs before (``detect``); a cell or row repeated a million times
(how ODF writes empty space) is counted, never written out, past the sheet limits."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator
from typing import Any, BinaryIO
from xml.sax import SAXException

from odf import teletype
from odf.opendocument import load

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import sheets
from knowledge_ingest.extraction.markdown import TextSink, cell_text

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
_MAX_DEPTH = 32  # sections, frames and lists inside one another
_MAX_COLUMNS = 1024  # of one sheet or table row; ODF marks a row's empty rest as repeated 16,384 times
# Kept out of the text: a table of contents and an index repeat the headings; tracked changes
# hold deleted text; forms and declarations hold no text a reader sees.
_SKIPPED = {
    (_TEXT, "table-of-content"),
    (_TEXT, "alphabetical-index"),
    (_TEXT, "illustration-index"),
    (_TEXT, "table-index"),
    (_TEXT, "tracked-changes"),
    (_TEXT, "sequence-decls"),
    (_TEXT, "variable-decls"),
    (_TEXT, "user-field-decls"),
    (_TABLE, "named-expressions"),
    ("urn:oasis:names:tc:opendocument:xmlns:office:1.0", "forms"),
}


def extract_odt(stream: BinaryIO, sink: TextSink) -> None:
    document = _load(stream, "odt")
    _blocks(sink, document.text, 0)


def extract_odp(stream: BinaryIO, sink: TextSink) -> int:
    """Write the slides into ``sink``; returns the slide count."""
    document = _load(stream, "odp")
    slides = [child for child in _children(document.presentation) if child.qname == (_DRAW, "page")]
    if len(slides) > sink.limits.max_pages:
        sink.warnings.append(f"only the first {sink.limits.max_pages:,} of {len(slides):,} slides were read")
    for number, slide in enumerate(slides[: sink.limits.max_pages], start=1):
        sink.check_time()
        sink.page(number)
        frames = [child for child in _children(slide) if child.qname == (_DRAW, "frame")]
        titles = [frame for frame in frames if _attribute(frame, _PRESENTATION, "class") == "title"]
        title = " ".join(_paragraphs(titles[0], 0)) if titles else ""
        sink.heading(2, title or f"Slide {number}")
        for frame in frames:
            if frame not in titles[:1]:
                _blocks(sink, frame, 0)
        for notes in (child for child in _children(slide) if child.qname == (_PRESENTATION, "notes")):
            text = "\n".join(_paragraphs(notes, 0))
            if text:
                sink.paragraph(f"Notes: {text}")
    return len(slides)


def extract_ods(stream: BinaryIO, sink: TextSink) -> None:
    document = _load(stream, "ods")
    for table in _children(document.spreadsheet):
        if table.qname == (_TABLE, "table"):
            sink.check_time()
            name = _attribute(table, _TABLE, "name") or "Sheet"
            sheets.write_sheet(sink, name, _rows(table, sink.limits.max_rows_per_sheet + 1), "ods")


def _load(stream: BinaryIO, file_format: str) -> Any:
    """The parsed document. odfpy prints a part that fails to parse (document text) to stdout and
    goes on without it: what it prints is discarded, and its saying so fails the file."""
    printed = _Discard()
    try:
        with contextlib.redirect_stdout(printed):
            document = load(stream)
    except (zipfile.BadZipFile, KeyError, ValueError, SAXException, AttributeError, TypeError, UnicodeError):
        document = None
    if document is None or printed.parse_failed:
        raise ExtractionFailed(
            "the OpenDocument file is damaged and cannot be read",
            reason=ExtractionFailed.FILE_CORRUPT,
            file_format=file_format,
        )
    return document


class _Discard(io.TextIOBase):
    """Standard output while odfpy loads: nothing kept but whether it reported a failed parse."""

    parse_failed = False

    def write(self, text: str) -> int:
        self.parse_failed = self.parse_failed or "FAILED TO PARSE" in text
        return len(text)


def _blocks(sink: TextSink, element: Any, depth: int) -> None:
    """Headings, paragraphs, lists and tables in document order, also inside sections and frames."""
    if depth > _MAX_DEPTH:
        return
    for child in _children(element):
        qname = child.qname
        if qname in _SKIPPED:
            continue
        if qname == (_TEXT, "h"):
            sink.heading(_level(child), _text(child))
        elif qname == (_TEXT, "p"):
            sink.check_time()
            sink.paragraph(_text(child))
        elif qname == (_TEXT, "list"):
            items = list(_list_items(child, depth))
            if items:
                sink.paragraph("\n".join(f"- {item}" for item in items))
        elif qname == (_TABLE, "table"):
            rows = list(_rows(child, sink.limits.max_rows_per_sheet))
            sink.table([[*row] for row in rows])
        else:  # sections, frames, text boxes, groups: what is inside them
            _blocks(sink, child, depth + 1)


def _list_items(element: Any, depth: int) -> Iterator[str]:
    for item in _children(element):
        for child in _children(item):
            if child.qname == (_TEXT, "list") and depth < _MAX_DEPTH:
                yield from _list_items(child, depth + 1)
            elif child.qname in ((_TEXT, "p"), (_TEXT, "h")):
                text = " ".join(_text(child).split())
                if text:
                    yield text


def _paragraphs(element: Any, depth: int) -> Iterator[str]:
    """The text of every paragraph and heading inside ``element``, one each."""
    for child in _children(element):
        if child.qname in ((_TEXT, "p"), (_TEXT, "h")):
            text = _text(child).strip()
            if text:
                yield text
        elif depth < _MAX_DEPTH:
            yield from _paragraphs(child, depth + 1)


def _rows(table: Any, limit: int) -> Iterator[list[str]]:
    """The table's rows as shown, repeated rows and cells written out only where they hold text,
    at most ``limit`` rows and ``_MAX_COLUMNS`` cells a row."""
    written = 0
    for row in _table_rows(table, 0):
        cells = _cells(row)
        if not any(cells):
            continue  # empty rows go, however often repeated
        for _ in range(min(_repeat(row, "number-rows-repeated"), limit - written)):
            yield cells
            written += 1
        if written >= limit:
            return


def _table_rows(element: Any, depth: int) -> Iterator[Any]:
    for child in _children(element):
        if child.qname == (_TABLE, "table-row"):
            yield child
        elif child.qname[0] == _TABLE and child.qname[1] in ("table-header-rows", "table-rows", "table-row-group"):
            if depth < _MAX_DEPTH:
                yield from _table_rows(child, depth + 1)


def _cells(row: Any) -> list[str]:
    cells: list[str] = []
    empty = 0  # empty cells not yet written: only those before a cell with text are
    for cell in _children(row):
        if cell.qname not in ((_TABLE, "table-cell"), (_TABLE, "covered-table-cell")):
            continue
        repeat = _repeat(cell, "number-columns-repeated")
        text = cell_text("\n".join(_text(p) for p in _children(cell) if p.qname in ((_TEXT, "p"), (_TEXT, "h"))))
        if not text:
            empty += repeat
            continue
        room = _MAX_COLUMNS - len(cells)
        cells.extend([""] * min(empty, room))
        empty = 0
        cells.extend([text] * min(repeat, max(_MAX_COLUMNS - len(cells), 0)))
        if len(cells) >= _MAX_COLUMNS:
            break
    return cells


def _repeat(element: Any, name: str) -> int:
    try:
        return max(1, int(_attribute(element, _TABLE, name) or 1))
    except ValueError:
        return 1


def _level(heading: Any) -> int:
    try:
        return max(1, min(int(_attribute(heading, _TEXT, "outline-level") or 1), 6))
    except ValueError:
        return 1


def _text(element: Any) -> str:
    return str(teletype.extractText(element))


def _attribute(element: Any, namespace: str, name: str) -> str | None:
    value = element.attributes.get((namespace, name))
    return str(value) if value is not None else None


def _children(element: Any) -> list[Any]:
    return [child for child in getattr(element, "childNodes", ()) if getattr(child, "qname", None)]
