"""Text extraction as the domain sees it: the result, the limits, the port and its errors.

The extracted text carries the markers the structural chunker understands: markdown
headings (``#`` .. ``######``), ``[Page N]`` lines, ``[Sheet: name]`` lines, and markdown
tables (consecutive ``|`` lines with a ``| --- |`` separator after the header row).
Nothing extracted is not an error: it is ``extractable=False`` and the document simply has
no chunks. A permanent failure (encrypted, corrupt, refused archive) is ``ExtractionFailed``
with a reason a person can act on; its message never quotes document text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from knowledge_runtime.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class Extracted:
    text: str
    page_count: int | None
    extractable: bool
    format: str  # pdf, docx, pptx, xlsx, xls, xlsb, html, text, or an image's (png, jpeg, tiff, webp, bmp, gif)
    warnings: tuple[str, ...] = ()
    # What read the text: the reader, and OCR's engine with the pages it read where it read some
    # ("pdfium, pypdf; OCR (tesseract 5.3.0) on pages 2, 5-7").
    extractor: str = ""
    ocr_page_count: int = 0  # pages whose text OCR read
    ocr_confidence: float = 0.0  # the mean confidence (0-100) of the words OCR read; 0 when it read none
    # What the file says of itself (an email's headers: email_subject, email_from, ...), for the
    # document's metadata; the caller's own keys win over these when the document is stored.
    metadata: dict[str, str] = field(default_factory=dict)


DEFAULT_OCR_MAX_PAGES = 100  # about 2.5 s a page: within the 300 s bound
DEFAULT_OCR_PAGE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class ExtractionLimits:
    """Bounds on the work one file may cost; past a bound the text is cut and a warning says so.

    The archive bounds are checked before an OOXML file (a zip) is parsed at all, from the
    sizes its directory declares, and then against what each entry really inflates to.
    """

    max_chars: int = 5_000_000  # about 1,500 chunks of 3,500 characters
    max_pages: int = 5_000  # PDF pages and slides
    max_rows_per_sheet: int = 200_000
    max_seconds: float = 300.0  # checked between pages, slides, paragraphs and rows
    max_ocr_pages: int = DEFAULT_OCR_MAX_PAGES  # pages read by OCR (scanned PDF pages, images) per file
    ocr_page_seconds: float = DEFAULT_OCR_PAGE_SECONDS  # one page's OCR; past it the page is warned about
    max_archive_entries: int = 10_000
    max_archive_uncompressed_bytes: int = 512 * 1024 * 1024
    max_archive_ratio: int = 200  # uncompressed / compressed, once past ratio_floor_bytes
    archive_ratio_floor_bytes: int = 32 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in (
            "max_chars",
            "max_pages",
            "max_rows_per_sheet",
            "max_archive_entries",
            "max_archive_uncompressed_bytes",
            "max_archive_ratio",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.max_ocr_pages < 0:
            raise ValueError("max_ocr_pages must not be negative")
        if self.max_seconds <= 0 or self.ocr_page_seconds <= 0:
            raise ValueError("max_seconds and ocr_page_seconds must be positive")


class ExtractionFailed(InvalidArgument):
    """The file cannot be read as a document; retrying will not help. ``reason`` says why."""

    reason = "FILE_CORRUPT"

    PDF_ENCRYPTED = "PDF_ENCRYPTED"
    FILE_ENCRYPTED = "FILE_ENCRYPTED"
    FILE_CORRUPT = "FILE_CORRUPT"
    ARCHIVE_TOO_LARGE = "ARCHIVE_TOO_LARGE"
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    EXTRACTION_TIMEOUT = "EXTRACTION_TIMEOUT"  # only where extraction runs in a child process
    FILE_TOO_COMPLEX = "FILE_TOO_COMPLEX"  # the child ran out of its memory allowance

    def __init__(self, message: str, *, reason: str, file_format: str = "") -> None:
        super().__init__(message, reason=reason, metadata={"format": file_format} if file_format else None)
        self.file_format = file_format


Source = bytes | str | os.PathLike[str]

GIB = 1024**3
DEFAULT_EXTRACTION_MEMORY_BUDGET = 6 * GIB  # every extraction child's address space together
MAX_CHILD_MEMORY = 3 * GIB  # one child's cap however large the budget
MIN_CHILD_MEMORY = 1 * GIB  # below it a child cannot read a large file (its imports alone ~250 MB)


@dataclass(frozen=True, slots=True)
class ChildAllowance:
    """How many extraction children may run at once, and each one's address-space cap."""

    children: int
    memory_bytes: int


def child_allowance(budget_bytes: int, workers: int) -> ChildAllowance:
    """A share of ``budget_bytes`` per worker, between ``MIN_CHILD_MEMORY`` and
    ``MAX_CHILD_MEMORY``, and as many children at once as the budget holds of those shares (at
    most one per worker): together the children never pass the budget. A budget below the
    minimum is one child with all of it. Why: each child was capped alone, so concurrent uploads
    could take the process tree to the cap times the workers."""
    if budget_bytes < 1:
        raise ValueError("the extraction memory budget must be positive")
    workers = max(1, workers)
    share = min(MAX_CHILD_MEMORY, max(MIN_CHILD_MEMORY, budget_bytes // workers), budget_bytes)
    return ChildAllowance(children=max(1, min(workers, budget_bytes // share)), memory_bytes=share)


class Extractor(Protocol):
    def extract(self, data: Source, filename: str, mime_type: str) -> Extracted:
        """Synchronous and CPU-bound: the caller runs it off the event loop.

        ``data`` is the file's bytes or a path to it. Raises ``ExtractionFailed`` for a
        permanent failure; any other exception is a bug or an exhausted resource.
        """
