"""PPTX through python-pptx: ``[Page N]`` per slide, its title as a ``##`` heading (``Slide N``
when it has none, so a slide never inherits the previous one's section), then its text frames
and tables top to bottom, then its speaker notes."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import pptx
from lxml.etree import LxmlError
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.exc import PackageNotFoundError

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction.markdown import TextSink, cell_text

_MAX_GROUP_DEPTH = 8


def extract_pptx(stream: BinaryIO, sink: TextSink) -> int:
    """Write the slides into ``sink``; returns the slide count."""
    try:
        presentation = pptx.Presentation(stream)
        slides = list(presentation.slides)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, LxmlError):
        raise ExtractionFailed(
            "the PowerPoint file is damaged and cannot be read",
            reason=ExtractionFailed.FILE_CORRUPT,
            file_format="pptx",
        ) from None
    if len(slides) > sink.limits.max_pages:
        sink.warnings.append(f"only the first {sink.limits.max_pages:,} of {len(slides):,} slides were read")
    for number, slide in enumerate(slides[: sink.limits.max_pages], start=1):
        sink.check_time()
        sink.page(number)
        title_shape = _title_shape(slide)
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        sink.heading(2, title or f"Slide {number}")
        for shape in _in_reading_order(slide.shapes):
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            _shape(sink, shape)
        _notes(sink, slide)
    return len(slides)


def _title_shape(slide: Any) -> Any:
    try:
        shape = slide.shapes.title
    except (KeyError, AttributeError, ValueError):
        return None
    return shape if shape is not None and shape.has_text_frame else None


def _in_reading_order(shapes: Iterable[Any], depth: int = 0) -> Iterator[Any]:
    """Top to bottom, then left to right; groups opened in place."""

    def position(shape: Any) -> tuple[int, int]:
        return (shape.top or 0, shape.left or 0)

    for shape in sorted(shapes, key=position):
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            if depth < _MAX_GROUP_DEPTH:
                yield from _in_reading_order(shape.shapes, depth + 1)
        else:
            yield shape


def _shape(sink: TextSink, shape: Any) -> None:
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[cell_text(cell.text) for cell in row.cells] for row in shape.table.rows]
        sink.table(rows[: sink.limits.max_rows_per_sheet])
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = []
        for paragraph in shape.text_frame.paragraphs:
            text = paragraph.text.replace("\v", "\n").strip()  # \v is a soft line break
            if text:
                lines.append(text)
        sink.paragraph("\n".join(lines))


def _notes(sink: TextSink, slide: Any) -> None:
    if not slide.has_notes_slide:
        return
    frame = slide.notes_slide.notes_text_frame
    text = frame.text.strip() if frame is not None else ""
    if text:
        sink.paragraph(f"Notes: {text}")
