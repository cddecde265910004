"""PDF through pdfium and pypdf: ``[Page N]`` per page, headings from the outline (pypdf's) or,
without one, from font size. pdfium reads a page's text and its lines' sizes (``pdf_text``);
pypdf reads the pages pdfium leaves to it, with the same sizes. Ruled tables arrive as markdown
tables where they stand on their page: a page whose content draws enough rules (``re``/``l``
operators, counted while pypdf reads it) is read again by pdfplumber, whose lattice finder gives
each table's cells and box; the lines pypdf read inside a box are left out, so a table's words
are written once. Tables without rules stay lines of text. Finding and placing the tables is
``pdf_tables``'s; this module reads, marks pages and headings."""

from __future__ import annotations

import functools
import io
import itertools
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from knowledge_runtime.process import usable_cores
from pypdf import PdfReader
from pypdf.errors import PdfReadError, PyPdfError

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import pdf_text
from knowledge_ingest.extraction.forked import Helper
from knowledge_ingest.extraction.markdown import LimitReached, TextSink, one_line, plain
from knowledge_ingest.extraction.ocr import ocr_pages
from knowledge_ingest.extraction.pdf_tables import RuleCounter, Run, find_tables, join_continued_tables
from knowledge_ingest.extraction.pdf_tables import Table as _Table
from knowledge_ingest.extraction.pdf_tables import lines_around_tables as _lines_around_tables

_SPACES = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")
HEADING_MIN_RATIO = 1.15  # a line this much larger than the body text is a heading
HEADING_MAX_CHARS = 150
_MAX_HEADING_LEVELS = 3
_TABLE = -1  # the level an output line has when it is a rendered table
# From this many pages for pypdf on, forked helpers read parts of them on other cores while this
# process reads the first part: pypdf's text extraction is most of such a PDF's reading, and the
# embedder waits for it. Fewer pages are not worth a fork (nor are pdfium's, at a fifth the cost).
PARALLEL_MIN_PAGES = 16
MAX_PAGE_READERS = 4
HELPER_GRACE_S = 5.0  # past the time limit, before the helper's half is read here instead
_PAGE_NUMBER = re.compile(r"^\s*(page\s*)?\d{1,5}(\s*(of|/)\s*\d{1,5})?\s*$", re.IGNORECASE)


@dataclass
class _Page:
    text: str = ""
    sizes: dict[str, float] = field(default_factory=dict)  # line key → its font size
    weights: Counter[float] = field(default_factory=Counter)  # font size → characters
    runs: list[Run] = field(default_factory=list)  # pypdf's text pieces, each where it starts (ruled pages only)
    tables: list[_Table] = field(default_factory=list)
    extractor: str = ""  # the OCR engine where OCR read the page
    has_image: bool = False  # the page draws an image (a scan): a near-empty text layer is read by OCR


def open_pdf(stream: BinaryIO) -> PdfReader:
    """The reader, decrypted when an empty user password opens it; else PDF_ENCRYPTED."""
    try:
        reader = PdfReader(stream, strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except (PyPdfError, NotImplementedError, ValueError, KeyError):
                opened = None
            if not opened:
                raise ExtractionFailed(
                    "the PDF is password-protected; remove the password and upload it again",
                    reason=ExtractionFailed.PDF_ENCRYPTED,
                    file_format="pdf",
                )
        _ = len(reader.pages)
    except ExtractionFailed:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError, OSError):
        raise ExtractionFailed(
            "the PDF is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format="pdf"
        ) from None
    return reader


def extract_pdf(stream: BinaryIO, sink: TextSink) -> int:
    """Write the PDF into ``sink``; returns its page count."""
    reader = open_pdf(stream)
    page_count = len(reader.pages)
    outline = _outline_by_page(reader, sink)
    pages: list[_Page] = []
    try:
        for page in _read_pages(reader, stream, sink):
            pages.append(page)  # noqa: PERF402 - one by one: the pages read before a LimitReached are kept
    except LimitReached as stop:  # what was read before the limit is still written
        sink.warnings.append(stop.warning)
    else:
        _read_by_ocr(stream, pages, sink)
        find_tables(stream, pages, sink)
    body = _body_size(pages) if not outline else None
    levels = _size_levels(pages, body) if body else {}
    running = _running_lines(pages) if levels else set()
    lines: list[list[str | _Table]] = [
        _lines_around_tables(page) if page.tables else list[str | _Table](_lines(page.text)) for page in pages
    ]
    if any(page.tables for page in pages):
        between = _running_lines(pages)
        join_continued_tables(
            lines,
            lambda line: _key(line) in between or bool(_PAGE_NUMBER.match(line)),
            lambda index: bool(outline.get(index)),
        )
    try:
        for number, page in enumerate(pages, start=1):
            _write_page(sink, number, page, lines[number - 1], outline.get(number - 1, []), levels, running)
    except LimitReached as stop:
        sink.warnings.append(stop.warning)
    return page_count


def _read_by_ocr(stream: BinaryIO, pages: list[_Page], sink: TextSink) -> None:
    """Pages without a usable text layer get OCR's text; what pypdf saw there (no text, or
    garbage) no longer counts for fonts or tables."""
    try:
        ocr_pages(stream, pages, sink)
    except LimitReached as stop:  # the pages read so far keep their text
        sink.warnings.append(stop.warning)
    for page in pages:
        if page.extractor:
            page.sizes, page.weights, page.runs = {}, Counter(), []


def _read_pages(reader: PdfReader, stream: BinaryIO, sink: TextSink) -> Iterator[_Page]:
    total = len(reader.pages)
    if total > sink.limits.max_pages:
        sink.warnings.append(f"only the first {sink.limits.max_pages:,} of {total:,} pages were read")
    failed = 0
    read_chars = 0
    for page, read in _pages(reader, stream, sink, min(total, sink.limits.max_pages)):
        failed += not read
        read_chars += len(page.text)
        yield page
        if read_chars > sink.limits.max_chars:
            break
    if failed:
        sink.warnings.append(f"{failed} page(s) could not be read")


def _pages(reader: PdfReader, stream: BinaryIO, sink: TextSink, count: int) -> Iterator[tuple[_Page, bool]]:
    """Each page as read, in order, with whether it could be. pdfium reads the pages first
    (``pdf_text``); those it leaves (a ruled table's, whose text pieces pypdf places, or one it
    cannot read) are read by pypdf. From ``PARALLEL_MIN_PAGES`` of those on, forked helpers read
    the later parts of them meanwhile (one part per usable core, up to ``MAX_PAGE_READERS``);
    their pages are the same as these would be, and a helper that fails has its part read here
    after all. A caller that stops early (enough text) stops the helpers."""
    quick, count, stopped = _read_by_pdfium(reader, stream, sink, count)
    parts = _parts([index for index in range(count) if index not in quick], stream)
    helpers = [Helper(functools.partial(_read_part, reader, stream, sink, part)) for part in parts[1:]]
    try:
        owner = {index: number for number, part in enumerate(parts) for index in part}
        read: dict[int, Iterator[tuple[_Page, bool]]] = {0: _each_page(reader, sink, parts[0])}
        for index in range(count):
            if index in quick:
                yield quick.pop(index), True
                continue
            number = owner[index]
            if number not in read:
                read[number] = _from_helper(reader, sink, parts[number], helpers[number - 1])
            page = next(read[number], None)
            if page is None:  # the helper stopped at the character limit: so does the caller
                return
            yield page
        if stopped is not None:
            raise LimitReached(stopped)
    finally:
        for helper in helpers:
            helper.close()


def _read_by_pdfium(
    reader: PdfReader, stream: BinaryIO, sink: TextSink, count: int
) -> tuple[dict[int, _Page], int, str | None]:
    """The pages pdfium reads, by index (whether one draws an image is pypdf's look at its
    resources, as for the pages pypdf reads); how many pages are to be read at all (none after
    those whose text alone passes ``max_chars``); and the time limit's warning where it stopped
    them."""
    stream.seek(0)
    document = pdf_text.open_document(stream)
    if document is None:
        return {}, count, None
    read: dict[int, _Page] = {}
    chars = 0
    try:
        for index in range(count):
            try:
                sink.check_time()
            except LimitReached as limit:
                return read, index, limit.warning
            page = pdf_text.read_page(document, index)
            if page is not None:
                read[index] = _Page(page.text, page.sizes, page.weights, has_image=_page_draws_image(reader, index))
                chars += len(page.text)
                if chars > sink.limits.max_chars:
                    return read, index + 1, None
    finally:
        document.close()
    return read, count, None


def _from_helper(reader: PdfReader, sink: TextSink, part: list[int], helper: Helper) -> Iterator[tuple[_Page, bool]]:
    """A helper's pages as it read them, or read here where it failed."""
    rest = helper.result(max(sink.seconds_left(), 0.0) + HELPER_GRACE_S)
    if rest is None:
        yield from _each_page(reader, sink, part)
        return
    pages, stopped = rest
    yield from pages
    if stopped is not None:
        raise LimitReached(stopped)


def _parts(indices: list[int], stream: BinaryIO) -> list[list[int]]:
    """The pages to read, in consecutive parts: one per reader, each of at least half of
    ``PARALLEL_MIN_PAGES`` pages; one part when helpers cannot (or need not) read."""
    count = len(indices)
    if count < PARALLEL_MIN_PAGES or not _reopenable(stream):
        return [indices]
    readers = min(usable_cores(), MAX_PAGE_READERS, count // (PARALLEL_MIN_PAGES // 2))
    bounds = [count * part // readers for part in range(readers + 1)]
    return [indices[start:stop] for start, stop in itertools.pairwise(bounds)]


def _read_part(
    reader: PdfReader, stream: BinaryIO, sink: TextSink, part: list[int]
) -> tuple[list[tuple[_Page, bool]], str | None]:
    """In the helper: the pages of ``part`` (until the text alone passes ``max_chars``), and the
    time limit's warning if it stopped them."""
    if not isinstance(stream, io.BytesIO):  # a file shares its offset with the parent: its own handle
        reader.stream = open(stream.name, "rb")  # noqa: SIM115 - the helper's, closed when it exits
    pages: list[tuple[_Page, bool]] = []
    chars = 0
    try:
        for page in _each_page(reader, sink, part):
            pages.append(page)
            chars += len(page[0].text)
            if chars > sink.limits.max_chars:
                break
    except LimitReached as limit:
        return pages, limit.warning
    return pages, None


def _each_page(reader: PdfReader, sink: TextSink, part: list[int]) -> Iterator[tuple[_Page, bool]]:
    """The pages of ``part`` as pypdf reads them, the time limit checked before each."""
    for index in part:
        sink.check_time()
        yield _read_page(reader, index)


def _reopenable(stream: BinaryIO) -> bool:
    return isinstance(stream, io.BytesIO) or (
        isinstance(getattr(stream, "name", None), str) and os.path.isfile(stream.name)
    )


def _read_page(reader: PdfReader, index: int) -> tuple[_Page, bool]:
    page = _Page()
    rules = RuleCounter()
    try:
        visitor = _PageRecorder(page)
        source = reader.pages[index]
        page.text = source.extract_text(visitor_text=visitor, visitor_operand_before=rules)
        visitor.flush()
        page.has_image = _draws_image(source)
    except Exception:  # noqa: BLE001 - pypdf raises assorted errors on damaged pages; skip the page
        return _Page(), False
    if not rules.ruled or "".join(run[0] for run in page.runs) != page.text:
        page.runs = []  # no table to look for, or pieces that do not add up to the text: lines as read
    return page, True


def _page_draws_image(reader: PdfReader, index: int) -> bool:
    try:
        page = reader.pages[index]
    except Exception:  # noqa: BLE001 - a damaged page tree: take it as drawing one (OCR decides)
        return True
    return _draws_image(page)


def _draws_image(page: Any) -> bool:
    """Whether the page's resources (or those of a form it draws) hold an image XObject."""
    try:
        resources = page.get("/Resources")
        stack = [resources.get_object()] if resources is not None else []
        for _ in range(50):  # forms inside forms: a bounded look
            if not stack:
                return False
            objects = stack.pop().get("/XObject")
            for item in objects.get_object().values() if objects is not None else ():
                item = item.get_object()
                if item.get("/Subtype") == "/Image":
                    return True
                if item.get("/Subtype") == "/Form" and item.get("/Resources") is not None:
                    stack.append(item["/Resources"].get_object())
    except Exception:  # noqa: BLE001 - damaged resources: take it as drawing one (OCR decides)
        return True
    return False


class _PageRecorder:
    """pypdf's text visitor: records each text run's font size, and each visual line's (the runs
    on one baseline joined) as the size most of its characters have; for finding tables, each run
    with where it starts."""

    def __init__(self, page: _Page) -> None:
        self._page = page
        self._y: float | None = None
        self._keys: list[str] = []
        self._weights: Counter[float] = Counter()

    def __call__(self, text: str, cm: list[float], tm: list[float], _font: Any, font_size: float) -> None:
        if not text.strip():
            if text:
                self._page.runs.append((text, 0.0, 0.0))  # a space or a line break: no table holds it
            return
        _, _, c, d, x, y = _multiply(tm, cm)
        self._page.runs.append((text, x, y))
        if not font_size:
            return
        size = round(float(font_size) * math.hypot(c, d) * 2) / 2
        if not size:
            return
        if self._y is None or abs(y - self._y) > 1.0:
            self.flush()
            self._y = y
        for index, part in enumerate(text.split("\n")):
            if index:
                self.flush()
            key = _key(part)
            if key:
                self._record(key, size)
                self._page.weights[size] += len(key)
                self._keys.append(key)
                self._weights[size] += len(key)

    def flush(self) -> None:
        key = "".join(self._keys)
        if key and self._weights:
            self._record(key, self._weights.most_common(1)[0][0])
        self._keys, self._weights = [], Counter()

    def _record(self, key: str, size: float) -> None:
        self._page.sizes[key] = max(self._page.sizes.get(key, 0.0), size)


def _multiply(m: list[float], n: list[float]) -> tuple[float, float, float, float, float, float]:
    """The 2-D affine product m × n (PDF matrices [a b c d e f])."""
    try:
        a, b, c, d, e, f = (float(x) for x in m[:6])
        a2, b2, c2, d2, e2, f2 = (float(x) for x in n[:6])
    except (TypeError, ValueError):
        return 1.0, 0.0, 0.0, 1.0, 0.0, 0.0
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def _key(text: str) -> str:
    return _SPACES.sub("", text)


def _body_size(pages: list[_Page]) -> float | None:
    weights: Counter[float] = Counter()
    for page in pages:
        weights.update(page.weights)
    return weights.most_common(1)[0][0] if weights else None


def _size_levels(pages: list[_Page], body: float) -> dict[float, int]:
    """Font sizes larger than the body's, the largest first, as heading levels 1..3."""
    sizes = {size for page in pages for size in page.sizes.values() if size >= body * HEADING_MIN_RATIO}
    ordered = sorted(sizes, reverse=True)
    return {size: min(rank + 1, _MAX_HEADING_LEVELS) for rank, size in enumerate(ordered)}


def _running_lines(pages: list[_Page]) -> set[str]:
    """Lines on at least half the pages (three or more): running headers and footers, which
    are never headings even when their font is large."""
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({_key(line) for line in page.text.split("\n")})
    floor = max(3, (len(pages) + 1) // 2)
    return {key for key, count in counts.items() if key and count >= floor}


def _write_page(
    sink: TextSink,
    number: int,
    page: _Page,
    lines: list[str | _Table],
    marks: list[tuple[int, str]],
    levels: dict[float, int],
    running: set[str],
) -> None:
    keys = {_key(line) for line in lines if isinstance(line, str)}
    # An outline entry whose title is a line of the page becomes that line; the others start the page.
    placed = {_key(title): (level, title) for level, title in marks if _key(title) in keys}
    out: list[tuple[int, str]] = [(level, title) for level, title in marks if _key(title) not in placed]
    for line in lines:
        if isinstance(line, _Table):
            out.append((_TABLE, line.markdown))
            continue
        key = _key(line)
        if not key:
            out.append((0, ""))
        elif key in placed:
            out.append(placed.pop(key))
        else:
            level = _font_level(line, key, page, levels) if key not in running else 0
            if level and out and out[-1][0] == level and out[-1][1] and not marks:
                out[-1] = (level, f"{out[-1][1]} {line.strip()}")  # a heading wrapped onto two lines
            else:
                out.append((level, line))
    sink.page(number)
    text = "\n".join(_render(level, line) for level, line in out)
    sink.add(_BLANK_RUNS.sub("\n\n", text).strip("\n"))


def _render(level: int, line: str) -> str:
    if level == _TABLE:
        return f"\n{line}\n"
    return _heading(level, line) if level else plain(line)


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _font_level(line: str, key: str, page: _Page, levels: dict[float, int]) -> int:
    """The heading level of a line set in a heading-sized font, else 0."""
    if levels and len(line) <= HEADING_MAX_CHARS and any(ch.isalpha() for ch in line):
        size = page.sizes.get(key)
        return levels.get(size, 0) if size is not None else 0
    return 0


def _heading(level: int, title: str) -> str:
    return f"\n{'#' * level} {one_line(title)}\n"


def _outline_by_page(reader: PdfReader, sink: TextSink) -> dict[int, list[tuple[int, str]]]:
    """Outline entries by page index: (level, title), level 1 for top-level entries."""
    found: dict[int, list[tuple[int, str]]] = {}
    try:
        outline = reader.outline
    except Exception:  # noqa: BLE001 - a damaged outline is not worth failing the document
        return found

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                if depth < 6:
                    walk(item, depth + 1)
                continue
            title = one_line(str(getattr(item, "title", "") or ""))
            try:
                index = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - an entry pointing nowhere is skipped
                continue
            if title and index is not None and index >= 0:
                found.setdefault(index, []).append((min(depth, 6), title))

    try:
        walk(list(outline or []), 1)
    except RecursionError:
        sink.warnings.append("the PDF outline was too deep to read")
    return found
