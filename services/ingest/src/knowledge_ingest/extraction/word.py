"""DOCX through python-docx: headings from paragraph styles, paragraphs, and tables as
markdown, in document order. Word has no pages until it is laid out, so there are no
``[Page N]`` markers (``page_count`` is None)."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml.etree import LxmlError

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction.markdown import TextSink, cell_text

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_MAX_STYLE_DEPTH = 8
_P, _TBL, _SDT = qn("w:p"), qn("w:tbl"), qn("w:sdt")
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


def extract_docx(stream: BinaryIO, sink: TextSink) -> None:
    try:
        document = docx.Document(stream)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, LxmlError):
        raise ExtractionFailed(
            "the Word document is damaged and cannot be read",
            reason=ExtractionFailed.FILE_CORRUPT,
            file_format="docx",
        ) from None
    styles = _Styles(document)
    skipped = 0
    for block in _blocks(document.element.body, document._body):
        sink.check_time()
        if isinstance(block, Paragraph):
            _paragraph(sink, block, styles)
        elif isinstance(block, Table):
            try:
                rows = _table_rows(block, sink)
            except (IndexError, KeyError, ValueError, AttributeError):  # malformed grid
                skipped += 1
                continue
            sink.table(rows)
    if skipped:
        sink.warnings.append(f"{skipped} table(s) could not be read")


def _blocks(element: Any, parent: Any, depth: int = 0) -> Iterator[Paragraph | Table]:
    """Paragraphs and tables in document order, also inside content controls (``w:sdt``), which
    python-docx skips; a table of contents is skipped: it repeats the headings."""
    for child in element.iterchildren():
        if child.tag == _P:
            yield Paragraph(child, parent)
        elif child.tag == _TBL:
            yield Table(child, parent)
        elif child.tag == _SDT and depth < _MAX_STYLE_DEPTH and not _is_table_of_contents(child):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _blocks(content, parent, depth + 1)


def _is_table_of_contents(sdt: Any) -> bool:
    gallery = sdt.find(f"{qn('w:sdtPr')}/{qn('w:docPartObj')}/{qn('w:docPartGallery')}")
    return gallery is not None and "contents" in (gallery.get(qn("w:val")) or "").lower()


@dataclass(frozen=True, slots=True)
class _Kind:
    heading: int | None = None
    listed: bool = False


class _Styles:
    """Paragraph style id → heading level or list, resolved once per document: python-docx's
    ``paragraph.style`` scans every style for each paragraph, seconds on a long document."""

    def __init__(self, document: Any) -> None:
        self._kinds: dict[str | None, _Kind] = {}
        default = _Kind()
        try:
            for style in document.styles:
                if style.type == WD_STYLE_TYPE.PARAGRAPH:
                    kind = _Kind(_heading_level(style), _style_name(style).lower().startswith("list"))
                    self._kinds[style.style_id] = kind
                    if getattr(style.element, "default", False):
                        default = kind
        except (AttributeError, KeyError, ValueError):
            pass
        self._default = default

    def of(self, paragraph: Paragraph) -> _Kind:
        style_id = paragraph._p.style
        return self._kinds.get(style_id, self._default) if style_id else self._default


def _paragraph(sink: TextSink, paragraph: Paragraph, styles: _Styles) -> None:
    text = paragraph.text
    if text.strip():
        kind = styles.of(paragraph)
        if kind.heading:
            sink.heading(kind.heading, text)
        elif kind.listed:
            sink.paragraph("- " + text.strip())
        else:
            sink.paragraph(text)
    for box in _text_boxes(paragraph):
        sink.paragraph(box)


def _text_boxes(paragraph: Paragraph) -> list[str]:
    """Text in text boxes anchored in the paragraph, which ``paragraph.text`` leaves out. A box
    is stored twice (DrawingML and a VML fallback): the fallback copy is skipped."""
    boxes = paragraph._p.xpath(
        f".//w:txbxContent[not(ancestor::*[local-name()='Fallback' and namespace-uri()='{_MC}'])]"
    )
    texts = []
    for box in boxes:
        lines = ["".join(t.text or "" for t in p.iter(qn("w:t"))) for p in box.iterchildren(_P)]
        text = "\n".join(line for line in lines if line.strip())
        if text:
            texts.append(text)
    return texts


def _heading_level(style: Any) -> int | None:
    """``Title`` → 1, ``Heading N`` → N (at most 6), also through a style's base styles."""
    for _ in range(_MAX_STYLE_DEPTH):
        if style is None:
            return None
        name = _style_name(style)
        if name.lower() == "title":
            return 1
        match = _HEADING_STYLE.match(name)
        if match:
            return max(1, min(int(match.group(1)), 6))
        style = getattr(style, "base_style", None)
    return None


def _style_name(style: Any) -> str:
    try:
        return str(style.name or "") if style is not None else ""
    except (AttributeError, KeyError):
        return ""


def _table_rows(table: Table, sink: TextSink) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            # A horizontally merged cell is repeated once per grid column: keep its text once.
            cells.append("" if cell._tc is previous else cell_text(_cell_content(cell)))
            previous = cell._tc
        rows.append(cells)
        if len(rows) >= sink.limits.max_rows_per_sheet:
            sink.warnings.append("a table was cut at the row limit")
            break
    return rows


def _cell_content(cell: Any, depth: int = 0) -> str:
    """A cell's paragraphs, one per line; a nested table's cells joined into its text."""
    parts: list[str] = []
    for block in cell.iter_inner_content():
        if isinstance(block, Paragraph):
            if block.text.strip():
                parts.append(block.text)
        elif isinstance(block, Table) and depth < 3:
            for row in block.rows:
                texts = [_cell_content(c, depth + 1) for c in row.cells]
                parts.append(" ".join(t for t in texts if t.strip()))
    return "\n".join(parts)
