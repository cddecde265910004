"""Text splitting shared by ingest (structural chunks) and the embedder (anchors, fallback).

``split_structural`` understands the extracted text's markers: markdown headings start a
section, ``[Page N]`` starts a page, ``[Sheet: name]`` starts a sheet. Pages and sections
never share a chunk, so every chunk cites exactly one section and one page. An oversize
section splits on paragraph boundaries with one paragraph of overlap; an oversize paragraph
first splits on lines, then on sentences. A markdown table stays whole when it fits, and
every piece of a split table repeats its header row and separator. A short paragraph right
before a table (its caption) stays with the table.

``split_plain`` is the sentence-ish splitter with a character overlap.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_MAX_CHARS = 1500  # the one chunk size: KNOWLEDGE_CHUNK_MAX_CHARS's default (ingest)
DEFAULT_OVERLAP_CHARS = 200
CAPTION_MAX_CHARS = 200
_SEPARATOR = "\n\n"

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_PAGE = re.compile(r"^\[Page[ \t]+(\d+)\][ \t]*$")
_SHEET = re.compile(r"^\[Sheet:[ \t]*(.*?)\][ \t]*$")
_TABLE_SEPARATOR = re.compile(r"^\|?[ \t]*:?-{3,}:?[ \t]*(\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk: its text, the section and page it belongs to, its position.

    ``overlap_chars`` is the length of the prefix repeated from the previous chunk (the
    overlap paragraph and its separator), so ``content[overlap_chars:]`` of consecutive
    chunks joined by blank lines gives the text back without repetition.
    """

    content: str
    section: str
    page: int | None
    chunk_index: int
    overlap_chars: int = 0


@dataclass(frozen=True, slots=True)
class _Unit:
    text: str
    is_table: bool = False


@dataclass
class _Segment:
    section: str
    page: int | None
    lines: list[str]


def split_structural(text: str, *, source: str = "", max_chars: int = DEFAULT_MAX_CHARS) -> list[TextChunk]:
    """Chunks of at most ``max_chars`` characters in document order (``source`` is informational)."""
    if max_chars < 200:
        raise ValueError("max_chars must be at least 200")
    chunks: list[TextChunk] = []
    carried: list[str] = []  # headings of sections that had no body yet
    for segment in _segments(text):
        units = list(_units(segment.lines))
        if units and all(_is_heading_only(u) for u in units):
            carried += [u.text for u in units]
            continue
        if carried:
            units = [_Unit(_SEPARATOR.join(carried))] + units
            carried = []
        for content, overlap in _pack(units, max_chars):
            chunks.append(TextChunk(content, segment.section, segment.page, len(chunks), overlap))
    if carried:  # a document that ends with headings only
        chunks.append(TextChunk(_SEPARATOR.join(carried)[:max_chars], "", None, len(chunks)))
    return chunks


def _is_heading_only(unit: _Unit) -> bool:
    return not unit.is_table and all(_HEADING.match(line) for line in unit.text.splitlines())


def _segments(text: str) -> Iterator[_Segment]:
    """Runs of lines with one section and one page; markers themselves are not content."""
    current = _Segment(section="", page=None, lines=[])
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.rstrip()
        page, sheet, heading = _PAGE.match(line), _SHEET.match(line), _HEADING.match(line)
        if page or sheet or heading:
            if any(part.strip() for part in current.lines):
                yield current
            section = current.section
            if sheet:
                section = sheet.group(1).strip()
            elif heading:
                section = heading.group(2).strip()
            current = _Segment(
                section=section,
                page=int(page.group(1)) if page else current.page,
                lines=[line] if heading else [],
            )
            continue
        current.lines.append(line)
    if any(part.strip() for part in current.lines):
        yield current


def _units(lines: list[str]) -> Iterator[_Unit]:
    """Paragraphs (blank-line separated) and markdown tables (consecutive ``|`` lines)."""
    paragraph: list[str] = []
    table: list[str] = []

    def flush_paragraph() -> Iterator[_Unit]:
        if any(line.strip() for line in paragraph):
            yield _Unit("\n".join(paragraph).strip("\n"))
        paragraph.clear()

    def flush_table() -> Iterator[_Unit]:
        if table:
            yield _Unit("\n".join(table), is_table=True)
        table.clear()

    for line in lines:
        if line.lstrip().startswith("|"):
            yield from flush_paragraph()
            table.append(line.strip())
        elif not line.strip():
            yield from flush_table()
            yield from flush_paragraph()
        elif _HEADING.match(line):
            yield from flush_table()
            yield from flush_paragraph()
            yield _Unit(line.strip())
        else:
            yield from flush_table()
            paragraph.append(line)
    yield from flush_table()
    yield from flush_paragraph()


def _pack(units: list[_Unit], max_chars: int) -> Iterator[tuple[str, int]]:
    """Greedy packing of units into chunks with one paragraph of overlap between chunks."""
    pieces = [piece for unit in units for piece in _fit(unit, max_chars)]
    current: list[_Unit] = []
    overlap = 0

    def size(parts: list[_Unit]) -> int:
        return sum(len(p.text) for p in parts) + len(_SEPARATOR) * max(len(parts) - 1, 0)

    for index, piece in enumerate(pieces):
        following = pieces[index + 1] if index + 1 < len(pieces) else None
        keep_with_table = (
            following is not None
            and following.is_table
            and not piece.is_table
            and len(piece.text) <= CAPTION_MAX_CHARS
            and size([piece, following]) <= max_chars
        )
        needed = [piece, following] if keep_with_table and following is not None else [piece]
        if current and size(current + needed) > max_chars:
            yield _SEPARATOR.join(p.text for p in current), overlap
            previous = current[-1]
            current, overlap = [], 0
            if (
                not previous.is_table
                and size([previous, *needed]) <= max_chars
                and len(previous.text) <= max_chars // 2
            ):
                current, overlap = [previous], len(previous.text) + len(_SEPARATOR)
        current.append(piece)
    if current:
        yield _SEPARATOR.join(p.text for p in current), overlap


def _fit(unit: _Unit, max_chars: int) -> list[_Unit]:
    """The unit itself when it fits; else pieces that do (tables keep their header)."""
    if len(unit.text) <= max_chars:
        return [unit]
    if unit.is_table:
        return [_Unit(text, is_table=True) for text in _split_table(unit.text, max_chars)]
    return [_Unit(text) for text in _split_lines(unit.text, max_chars)]


def _split_table(table: str, max_chars: int) -> list[str]:
    rows = table.split("\n")
    header_rows = 2 if len(rows) > 1 and _TABLE_SEPARATOR.match(rows[1]) else 1
    header = "\n".join(rows[:header_rows])
    if len(header) > max_chars // 2:  # a header that large cannot be repeated: split as text
        return _split_lines(table, max_chars)
    budget = max_chars - len(header) - 1
    pieces: list[str] = []
    body: list[str] = []
    for row in rows[header_rows:]:
        for part in _split_long(row, budget) if len(row) > budget else [row]:
            if body and sum(len(r) + 1 for r in body) + len(part) > budget:
                pieces.append(header + "\n" + "\n".join(body))
                body = []
            body.append(part)
    if body or not pieces:
        pieces.append(header + ("\n" + "\n".join(body) if body else ""))
    return pieces


def _split_lines(text: str, max_chars: int) -> list[str]:
    """Pack lines; a line too long on its own splits on sentences, then on whitespace."""
    pieces: list[str] = []
    current = ""
    for line in text.split("\n"):
        for part in _split_long(line, max_chars) if len(line) > max_chars else [line]:
            candidate = f"{current}\n{part}" if current else part
            if len(candidate) > max_chars and current:
                pieces.append(current)
                candidate = part
            current = candidate
    if current.strip():
        pieces.append(current)
    return pieces


def _split_long(text: str, max_chars: int) -> list[str]:
    pieces = _pack_sentences(_sentences(text), max_chars, overlap=0)
    return [p for piece in pieces for p in (_hard_split(piece, max_chars) if len(piece) > max_chars else [piece])]


def _hard_split(text: str, max_chars: int) -> list[str]:
    pieces = []
    while len(text) > max_chars:
        cut = text.rfind(" ", max_chars // 2, max_chars)
        cut = cut if cut > 0 else max_chars
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _pack_sentences(sentences: list[str], max_chars: int, overlap: int) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    for sentence in sentences:
        candidate = " ".join([*current, sentence])
        if current and len(candidate) > max_chars:
            pieces.append(" ".join(current))
            current = _tail(current, overlap)
            if current and len(" ".join([*current, sentence])) > max_chars:
                current = []
        current.append(sentence)
    if current:
        pieces.append(" ".join(current))
    return pieces


def _tail(sentences: list[str], overlap: int) -> list[str]:
    """The trailing sentences that fit in ``overlap`` characters (at least part of the last)."""
    if overlap <= 0:
        return []
    kept: list[str] = []
    for sentence in reversed(sentences):
        if len(" ".join([sentence, *kept])) > overlap:
            break
        kept.insert(0, sentence)
    if not kept:
        last = sentences[-1][-overlap:]
        space = last.find(" ")
        kept = [last[space + 1 :] if 0 <= space < len(last) - 1 else last]
    return kept


def split_plain(text: str, *, max_chars: int = DEFAULT_MAX_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS) -> list[str]:
    """Pieces of at most ``max_chars`` on sentence-ish boundaries, each repeating about
    ``overlap`` characters of the previous one. Text that fits is returned unchanged."""
    if overlap >= max_chars:
        raise ValueError("overlap must be smaller than max_chars")
    text = text.strip()
    if not text:
        return []
    if len(text) <= max_chars:
        return [text]
    sentences = [
        part
        for s in _sentences(text)
        for part in (_hard_split(s, max_chars - overlap - 1) if len(s) > max_chars - overlap - 1 else [s])
    ]
    return _pack_sentences(sentences, max_chars, overlap)
