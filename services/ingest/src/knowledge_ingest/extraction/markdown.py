"""Writing the chunker's markers: headings, page and sheet lines, markdown tables; and the
bounded text sink every format writes into."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from knowledge_ingest.domain.extraction import ExtractionLimits

_WHITESPACE = re.compile(r"[ \t\r\f\v\u00a0]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PAGE_MARKER = re.compile(r"\[Page \d+\]\Z")
_MARKER_ONLY = re.compile(r"\[(Page \d+|Sheet: [^\n]*)\]\Z")
_MARKER_LIKE = re.compile(r"^(\s*)(#{1,6}[ \t]|\[Page[ \t]+\d+\][ \t]*$|\[Sheet:.*\][ \t]*$|\|)")


class LimitReached(Exception):
    """Raised by the sink when a bound is hit; the extractor keeps what it has and warns."""

    def __init__(self, warning: str) -> None:
        super().__init__(warning)
        self.warning = warning


@dataclass(slots=True)
class OcrTally:
    """What OCR read for one file, shared by the sinks of its parts (an email's attachments), so
    its page budget and its mean confidence count over the whole file."""

    pages: int = 0
    words: int = 0
    confidence_sum: float = 0.0  # Tesseract's word confidences (0-100), summed
    engine: str = ""

    def mean_confidence(self) -> float:
        return round(self.confidence_sum / self.words, 1) if self.words else 0.0


class TextSink:
    """Blocks of text joined by blank lines, cut at ``max_chars`` and ``max_seconds``."""

    def __init__(
        self, limits: ExtractionLimits, *, deadline: float | None = None, ocr: OcrTally | None = None, used: int = 0
    ) -> None:
        self._limits = limits
        self._blocks: list[str] = []
        self._chars = used
        self._deadline = deadline if deadline is not None else time.monotonic() + limits.max_seconds
        self.warnings: list[str] = []
        self.ocr_pages: list[int] = []  # this sink's pages OCR read
        self.ocr = ocr if ocr is not None else OcrTally()
        self.reader = ""  # what read the file, where a format has more than one reader
        self.metadata: dict[str, str] = {}  # what the file says of itself (Extracted.metadata)

    @property
    def limits(self) -> ExtractionLimits:
        return self._limits

    @property
    def ocr_engine(self) -> str:
        return self.ocr.engine

    def part(self) -> TextSink:
        """A sink for a part of this file (an attachment) read on its own: what is left of the
        characters, the same deadline and the same OCR budget; its text is then added here."""
        return TextSink(self._limits, deadline=self._deadline, ocr=self.ocr, used=self._chars)

    def ocr_pages_left(self) -> int:
        return max(self._limits.max_ocr_pages - self.ocr.pages, 0)

    def ocr_read(self, page: int, engine: str, confidences: Sequence[float]) -> None:
        """Page ``page`` was read by OCR (``engine``), its words with these confidences."""
        self.ocr_pages.append(page)
        self.ocr.pages += 1
        self.ocr.engine = engine
        self.ocr.words += len(confidences)
        self.ocr.confidence_sum += sum(confidences)

    def add(self, block: str) -> None:
        block = block.strip("\n")
        if not block.strip():
            return
        room = self._limits.max_chars - self._chars
        if len(block) > room:
            cut = block.rfind("\n", 0, room)
            if cut <= 0:
                cut = block.rfind(" ", 0, room)
            if cut <= 0:
                cut = room
            if block[:cut].strip():
                self._blocks.append(block[:cut])
            raise LimitReached(f"the text was cut at {self._limits.max_chars:,} characters")
        self._blocks.append(block)
        self._chars += len(block) + 2
        self.check_time()

    def remaining(self) -> int:
        return max(self._limits.max_chars - self._chars, 0)

    def seconds_left(self) -> float:
        return self._deadline - time.monotonic()

    def check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise LimitReached(f"extraction stopped after {self._limits.max_seconds:g} seconds")

    def heading(self, level: int, title: str) -> None:
        title = one_line(title)
        if title:
            self.add(f"{'#' * max(1, min(level, 6))} {title}")

    def page(self, number: int) -> None:
        self.add(f"[Page {number}]")

    def sheet(self, name: str) -> None:
        self.add(f"[Sheet: {one_line(name).replace(']', ')')}]")

    def paragraph(self, text: str) -> None:
        self.add(plain(text))

    def table(self, rows: Sequence[Sequence[str]]) -> None:
        rendered = markdown_table(rows)
        if rendered:
            self.add(rendered)

    def text(self) -> str:
        # Lone surrogates (a PDF's broken font map can yield them) cannot be stored as UTF-8.
        return "\n\n".join(self._blocks).encode("utf-8", "replace").decode("utf-8")

    def has_pages(self) -> bool:
        return any(_PAGE_MARKER.match(block) for block in self._blocks)

    def has_content(self) -> bool:
        """True when anything besides markers was written."""
        return any(not _MARKER_ONLY.match(block) for block in self._blocks)


def one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", _CONTROL.sub("", text).replace("\n", " ")).strip()


def plain(text: str) -> str:
    """Body text that cannot be mistaken for a marker: a line that looks like a heading, a
    page or sheet line or a table row gets a leading backslash (as markdown escapes it)."""
    lines = []
    for line in _CONTROL.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = _WHITESPACE.sub(" ", line).strip()
        match = _MARKER_LIKE.match(line)
        if match:
            line = "\\" + line  # `\# not a heading`, `\[Page 3]`, `\| not a table`
        lines.append(line)
    return "\n".join(lines).strip()


def cell_text(value: object) -> str:
    """A cell as markdown: values rendered, pipes escaped, line breaks as ``<br>``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, float):
        text = str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    elif isinstance(value, dt.datetime):
        text = value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    elif isinstance(value, (dt.date, dt.time)):
        text = value.isoformat()
    else:
        text = str(value)
    text = _CONTROL.sub("", text).replace("\r\n", "\n").replace("\r", "\n").strip()
    text = _WHITESPACE.sub(" ", text).replace("|", "\\|")
    return "<br>".join(part.strip() for part in text.split("\n"))


def trim_rows(rows: Iterable[Sequence[object]]) -> list[list[str]]:
    """Rendered rows without empty rows, trailing empty cells, or all-empty leading columns."""
    out: list[list[str]] = []
    for row in rows:
        cells = [cell_text(v) for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            out.append(cells)
    if not out:
        return out
    lead = min(next(i for i, c in enumerate(r) if c) for r in out)
    return [r[lead:] for r in out]


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """Header row, ``| --- |`` separator, data rows; short rows padded to the widest."""
    rows = [list(r) for r in rows if any(c.strip() for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    lines = []
    for index, row in enumerate(rows):
        cells = [*row, *[""] * (width - len(row))]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("|" + " --- |" * width)
    return "\n".join(lines)
