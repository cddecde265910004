"""The Extractor adapter: detect the format from the bytes, refuse archive bombs, then read
the file with unstructured when it is installed and usable (PDF, DOCX, PPTX), else, and on
any failure of it, with the native libraries."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import time
import zipfile
from collections.abc import Callable, Iterator
from typing import BinaryIO

import structlog

from knowledge_ingest.domain.extraction import Extracted, ExtractionFailed, ExtractionLimits, Source
from knowledge_ingest.extraction import (
    images,
    legacy,
    mail,
    opendocument,
    pdf,
    rtf,
    sheets,
    slides,
    text,
    unstructured_path,
    web,
    word,
)
from knowledge_ingest.extraction.detect import IMAGE_FORMATS, detect_format
from knowledge_ingest.extraction.markdown import LimitReached, TextSink
from knowledge_ingest.extraction.ocr import page_ranges

log = structlog.get_logger("knowledge.ingest.extraction")

_NATIVE: dict[str, Callable[[BinaryIO, TextSink], int | None]] = {
    "pdf": pdf.extract_pdf,
    "docx": word.extract_docx,
    "pptx": slides.extract_pptx,
    "xlsx": sheets.extract_xlsx,
    "xls": sheets.extract_xls,
    "xlsb": sheets.extract_xlsb,
    "text": text.extract_text,
    "html": web.extract_html,
    **dict.fromkeys(IMAGE_FORMATS, images.extract_image),
    "odt": opendocument.extract_odt,
    "odp": opendocument.extract_odp,
    "ods": opendocument.extract_ods,
    "rtf": rtf.extract_rtf,
    "doc": legacy.extract_doc,
    "ppt": legacy.extract_ppt,
}
_READERS = {
    "pdf": "pdfium, pypdf",
    "docx": "python-docx",
    "pptx": "python-pptx",
    "xlsx": "openpyxl",
    "xls": "xlrd",
    "xlsb": "pyxlsb",
    "text": "text",
    "html": web.TRAFILATURA,
    **dict.fromkeys(IMAGE_FORMATS, "pillow"),
    "eml": "email",
    "odt": "odfpy",
    "odp": "odfpy",
    "ods": "odfpy",
    "rtf": "striprtf",
    "doc": "LibreOffice, python-docx",
    "ppt": "LibreOffice, python-pptx",
}
_NOTHING_FOUND = {
    "pdf": "no text was found in the PDF, also not by OCR",
    "pptx": "no text was found in the presentation",
    "odp": "no text was found in the presentation",
    "ppt": "no text was found in the presentation",
    **dict.fromkeys(IMAGE_FORMATS, images.NO_TEXT),
    "eml": "no text was found in the email or its attachments",
}


class DocumentExtractor:
    """``use_unstructured``: None uses it when usable, False never, True insists (tests)."""

    def __init__(self, limits: ExtractionLimits | None = None, *, use_unstructured: bool | None = None) -> None:
        self._limits = limits or ExtractionLimits()
        self._use_unstructured = use_unstructured

    def extract(self, data: Source, filename: str, mime_type: str) -> Extracted:
        started = time.monotonic()
        result = self.extract_quietly(data, filename, mime_type)
        log_result(result, time.monotonic() - started)
        return result

    def extract_quietly(self, data: Source, filename: str, mime_type: str) -> Extracted:
        """``extract`` without the log line (a child process has no logging set up)."""
        with _opened(data) as stream:
            if not stream.read(1):
                return Extracted("", None, False, "text", ("the file is empty",))
            stream.seek(0)
            file_format = detect_format(stream, filename, mime_type, self._limits)
            sink = TextSink(self._limits)
            page_count: int | None = None
            reader = _READERS.get(file_format, file_format)
            try:
                page_count, reader = self._read(file_format, stream, sink)
            except LimitReached as stop:
                sink.warnings.append(stop.warning)
        extractable = sink.has_content()
        body = sink.text() if extractable else ""
        warnings = list(dict.fromkeys(sink.warnings))  # in order, each once
        nothing_found = _NOTHING_FOUND.get(file_format, "no text was found in the file")
        if not extractable and nothing_found not in warnings:
            warnings.append(nothing_found)
        return Extracted(
            text=body,
            page_count=page_count,
            extractable=extractable,
            format=file_format,
            warnings=tuple(warnings),
            extractor=_extractor(reader, sink, page_count),
            ocr_page_count=sink.ocr.pages,
            ocr_confidence=sink.ocr.mean_confidence(),
            metadata=dict(sink.metadata),
        )

    def _read(self, file_format: str, stream: BinaryIO, sink: TextSink) -> tuple[int | None, str]:
        """The page count, and the name of what read the file."""
        partition = self._partitioner(file_format)
        if partition is not None:
            pages = None
            if file_format == "pdf":  # encrypted or damaged: the same clear error as natively
                pages = len(pdf.open_pdf(stream).pages)
                stream.seek(0)
            try:
                elements = partition(stream)
            except Exception as error:  # noqa: BLE001 - any failure of the optional path: go native
                log.warning("unstructured_failed", format=file_format, error=type(error).__name__)
                stream.seek(0)
            else:
                last_page = unstructured_path.write_elements(elements, sink)
                return pages or (last_page if file_format == "pptx" else None), "unstructured"
        pages = self._native(file_format, stream, sink, depth=0)
        return pages, sink.reader or _READERS.get(file_format, file_format)

    def _native(self, file_format: str, stream: BinaryIO, sink: TextSink, depth: int) -> int | None:
        """The format's own reader; an email's attachments come back here, one level deeper."""
        try:
            if file_format == "eml":
                if depth >= mail.MAX_MESSAGE_DEPTH:
                    raise ExtractionFailed(
                        f"messages nested deeper than {mail.MAX_MESSAGE_DEPTH} are not read",
                        reason=ExtractionFailed.FILE_TOO_COMPLEX,
                    )
                mail.extract_eml(stream, sink, functools.partial(self._attachment, depth=depth + 1))
                return None
            return _NATIVE[file_format](stream, sink)
        except ExtractionFailed as error:
            if error.file_format:
                raise
            raise ExtractionFailed(error.message, reason=error.reason, file_format=file_format) from None
        except (LimitReached, MemoryError):
            raise
        except (
            zipfile.BadZipFile,
            EOFError,
            ValueError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
            AssertionError,
            RecursionError,
            UnicodeError,
            OSError,
        ) as error:
            # A parser tripping over a malformed file fails the same way every time: permanent.
            log.warning("extraction_parser_error", format=file_format, error=type(error).__name__)
            raise ExtractionFailed(
                "the file is damaged and cannot be read",
                reason=ExtractionFailed.FILE_CORRUPT,
                file_format=file_format,
            ) from None

    def _attachment(self, data: bytes, filename: str, mime_type: str, sink: TextSink, depth: int) -> None:
        """A part of a file (an email's attachment) read as a file of its own, into ``sink``."""
        stream = io.BytesIO(data)
        if not data.strip():
            return
        self._native(detect_format(stream, filename, mime_type, self._limits), stream, sink, depth)

    def _partitioner(self, file_format: str) -> unstructured_path.Partition | None:
        if self._use_unstructured is False:
            return None
        found = unstructured_path.partitioners().get(file_format)
        if found is None and self._use_unstructured:
            raise RuntimeError(f"unstructured cannot read {file_format} here")
        return found


def _extractor(reader: str, sink: TextSink, page_count: int | None) -> str:
    """The reader, and OCR's engine with the pages it read: "pdfium, pypdf; OCR (tesseract 5.3.0) on pages 2, 4-6"."""
    if not sink.ocr_pages:
        if sink.ocr.pages:  # read in an email's attachments, each with its own page numbers
            return f"{reader}; OCR ({sink.ocr_engine}) on {sink.ocr.pages} page(s) of its attachments"
        return reader
    if page_count is not None and len(sink.ocr_pages) == page_count:
        return f"OCR ({sink.ocr_engine}) on every page"
    pages = "page" if len(sink.ocr_pages) == 1 else "pages"
    return f"{reader}; OCR ({sink.ocr_engine}) on {pages} {page_ranges(sink.ocr_pages)}"


def log_result(result: Extracted, seconds: float) -> None:
    log.info(
        "extraction_done",
        format=result.format,
        chars=len(result.text),
        pages=result.page_count,
        extractor=result.extractor,
        extractable=result.extractable,
        warnings=len(result.warnings),
        seconds=round(seconds, 3),
    )


@contextlib.contextmanager
def _opened(data: Source) -> Iterator[BinaryIO]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield io.BytesIO(bytes(data))
        return
    with open(os.fspath(data), "rb") as handle:
        yield handle
