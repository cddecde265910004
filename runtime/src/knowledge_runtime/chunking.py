"""Text splitting: ingest's structural chunks (documents-ai's too).

``split_structural`` understands the extracted text's markers: markdown headings start a
section, ``[Page N]`` starts a page, ``[Sheet: name]`` starts a sheet. Pages and sections
never share a chunk, so every chunk cites exactly one section and one page. An oversize
section splits on paragraph boundaries with one paragraph of overlap (a paragraph of at most
half the chunk); an oversize paragraph first splits on lines, then on sentences, then between
words. A markdown table stays whole when it fits, and every piece of a split table repeats its
header row and separator. A short paragraph right before a table (its caption) stays with the
table.

Sizes are counted by a :class:`Measure`: characters by default, or the tokens of the model that
embeds the chunks (``knowledge_runtime.tokens.TokenCounter``), so that a chunk fits the
model's window (:func:`window_chunk_size`). Whatever the measure, no chunk is larger than the
limit. A measure whose sizes of joined texts are exact (characters; a tokenizer that splits words
at whitespace) counts every line of the document once, in one batch, and every paragraph, piece
and chunk is the sum of its lines; any other is asked again for each chunk whole before it is
returned, and a chunk over the limit is cut.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

DEFAULT_MAX_CHARS = 1500  # the size of a chunk counted in characters (documents-ai's; ingest's override)
# A chunk in tokens: this share of the embedding model's window. Chosen on the SciFact train claims
# (bench/RESULTS.md, "Chunk size"): HYBRID was best at three quarters, whole-window chunks a point lower.
DEFAULT_WINDOW_SHARE = 0.75
CAPTION_MAX_CHARS = 200  # what a caption looks like: a short paragraph, whatever the measure
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


class Measure(Protocol):
    """How the chunker counts a text's size: :data:`CHARACTERS`, or a model's tokens."""

    smallest: int  # the least limit a chunk may have
    # Whether ``joined`` is the size of the joined text itself, not an estimate: then a text's size
    # is its lines' joined, and nothing is measured twice.
    exact: bool

    def size(self, text: str) -> int: ...

    def sizes(self, texts: Sequence[str]) -> list[int]:
        """``size`` of each text, in one call (a tokenizer encodes a batch in parallel)."""

    def joined(self, sizes: Sequence[int], separator: str) -> int:
        """The size of texts of ``sizes`` joined by ``separator``."""

    def split(self, text: str, limit: int) -> list[str]:
        """``text`` cut into pieces of at most ``limit`` each, between words where possible."""


class Characters:
    """Sizes in characters."""

    smallest = 200
    exact = True

    def size(self, text: str) -> int:
        return len(text)

    def sizes(self, texts: Sequence[str]) -> list[int]:
        return [len(text) for text in texts]

    def joined(self, sizes: Sequence[int], separator: str) -> int:
        return sum(sizes) + len(separator) * max(len(sizes) - 1, 0)

    def split(self, text: str, limit: int) -> list[str]:
        pieces = []
        while len(text) > limit:
            cut = text.rfind(" ", limit // 2, limit)
            cut = cut if cut > 0 else limit
            pieces.append(text[:cut].rstrip())
            text = text[cut:].lstrip()
        if text:
            pieces.append(text)
        return pieces


CHARACTERS = Characters()


@dataclass(frozen=True, slots=True)
class ChunkSize:
    """The largest chunk, counted by ``measure``."""

    limit: int
    measure: Measure = CHARACTERS

    def __post_init__(self) -> None:
        if self.limit < self.measure.smallest:
            raise ValueError(f"a chunk must be allowed at least {self.measure.smallest}, not {self.limit}")


@dataclass(frozen=True, slots=True)
class EmbeddingWindow:
    """What the embedding model reads at once: ``tokens`` of its tokenizer, which ``measure``
    counts in; ``tokenizer_id`` names that tokenizer (the SHA-256 of its JSON)."""

    tokens: int
    measure: Measure
    tokenizer_id: str


def window_chunk_size(
    window: EmbeddingWindow, *, share: float = DEFAULT_WINDOW_SHARE, max_tokens: int = 0
) -> ChunkSize:
    """The chunk size in the model's tokens: ``max_tokens`` when set, else ``share`` of the
    window; never more than the window (a longer text would be embedded as the mean of its
    windows), never less than the measure's smallest."""
    wanted = max_tokens or int(window.tokens * share)
    return ChunkSize(max(min(wanted, window.tokens), window.measure.smallest), window.measure)


@dataclass(frozen=True, slots=True)
class _Unit:
    text: str
    is_table: bool = False
    size: int = 0  # by the chunk size's measure, once known
    lines: tuple[int, ...] = ()  # the sizes of its lines, when the measure is exact


@dataclass
class _Segment:
    section: str
    page: int | None
    lines: list[str]


def split_structural(
    text: str, *, source: str = "", max_chars: int = DEFAULT_MAX_CHARS, size: ChunkSize | None = None
) -> list[TextChunk]:
    """Chunks of at most ``size`` (``max_chars`` characters unless given) in document order
    (``source`` is informational).

    Texts are measured in batches, not one by one (a tokenizer spends most of a lone call on its
    overhead): with an exact measure every line of the document in one call, and nothing again;
    with any other every unit in one call, the lines of those over the limit, then every chunk."""
    size = size or ChunkSize(max_chars)
    sections: list[tuple[_Segment, list[_Unit]]] = []
    carried: list[str] = []  # headings of sections that had no body yet
    for segment in _segments(text):
        units = list(_units(segment.lines))
        if units and all(_is_heading_only(u) for u in units):
            carried += [u.text for u in units]
            continue
        if carried:
            units = [_Unit(_SEPARATOR.join(carried))] + units
            carried = []
        sections.append((segment, units))
    measure = size.measure
    texts = [unit.text for _, units in sections for unit in units]
    if measure.exact:  # every line once; a unit is its lines joined
        lines = [text.split("\n") for text in texts]
        counted = iter(measure.sizes([line for split in lines for line in split]))
        per_unit = [tuple(next(counted) for _ in split) for split in lines]
        measured = iter((measure.joined(sizes, "\n"), sizes) for sizes in per_unit)
    else:
        measured = iter((whole, ()) for whole in measure.sizes(texts))
    packed: list[tuple[str, str, int | None, int, int]] = []  # content, section, page, overlap, size
    for segment, units in sections:
        units = [replace(unit, size=whole, lines=sizes) for unit, (whole, sizes) in zip(units, measured)]
        packed += [
            (content, segment.section, segment.page, overlap, total) for content, overlap, total in _pack(units, size)
        ]
    if carried:  # a document that ends with headings only: kept whole, cut to the limit between words
        ending = _SEPARATOR.join(carried)
        packed.append((ending, "", None, 0, measure.size(ending)))
    # A chunk's size as packed is exact for an exact measure; any other's is measured whole again.
    wholes = [total for *_, total in packed] if measure.exact else measure.sizes([content for content, *_ in packed])
    chunks: list[TextChunk] = []
    for (content, section, page, overlap, _), whole in zip(packed, wholes, strict=True):
        for index, piece in enumerate(_within(content, whole, size)):
            chunks.append(TextChunk(piece, section, page, len(chunks), overlap if index == 0 else 0))
    return chunks


def _within(content: str, measured: int, size: ChunkSize) -> list[str]:
    """The chunk, measured whole (``measured``): itself when it fits (always, where the measure's
    sizes of joined texts are exact), else cut between words into pieces that do."""
    if measured <= size.limit:
        return [content]
    return [piece.strip() for piece in size.measure.split(content, size.limit) if piece.strip()]


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


def _pack(units: list[_Unit], size: ChunkSize) -> Iterator[tuple[str, int, int]]:
    """Greedy packing of measured units into chunks with one paragraph of overlap between chunks:
    each chunk's text, overlap and size (its units' joined)."""
    limit, measure = size.limit, size.measure
    pieces = [piece for unit in units for piece in _fit(unit, limit, measure)]
    current: list[_Unit] = []
    overlap = 0

    def total(parts: list[_Unit]) -> int:
        return measure.joined([p.size for p in parts], _SEPARATOR)

    for index, piece in enumerate(pieces):
        following = pieces[index + 1] if index + 1 < len(pieces) else None
        keep_with_table = (
            following is not None
            and following.is_table
            and not piece.is_table
            and len(piece.text) <= CAPTION_MAX_CHARS
            and total([piece, following]) <= limit
        )
        needed = [piece, following] if keep_with_table and following is not None else [piece]
        if current and total(current + needed) > limit:
            yield _SEPARATOR.join(p.text for p in current), overlap, total(current)
            previous = current[-1]
            current, overlap = [], 0
            if not previous.is_table and total([previous, *needed]) <= limit and previous.size <= limit // 2:
                current, overlap = [previous], len(previous.text) + len(_SEPARATOR)
        current.append(piece)
    if current:
        yield _SEPARATOR.join(p.text for p in current), overlap, total(current)


def _fit(unit: _Unit, limit: int, measure: Measure) -> list[_Unit]:
    """The unit (measured) itself when it fits; else pieces that do (tables keep their header),
    each measured: as packed for an exact measure, whole again for any other."""
    if unit.size <= limit:
        return [unit]
    if unit.is_table:
        pieces = _split_table(unit.text, limit, measure, unit.lines or None)
    else:
        pieces = _split_lines(unit.text, limit, measure, unit.lines or None)
    sizes = [piece for _, piece in pieces] if measure.exact else measure.sizes([text for text, _ in pieces])
    return [_Unit(text, unit.is_table, piece) for (text, _), piece in zip(pieces, sizes, strict=True)]


def _split_table(
    table: str, limit: int, measure: Measure, line_sizes: Sequence[int] | None = None
) -> list[tuple[str, int]]:
    """Pieces of rows under a copy of the header, each with its size as packed; the rows are
    measured in one batch (a spreadsheet's sheet is thousands of them), or given."""
    rows = table.split("\n")
    sizes = list(line_sizes or measure.sizes(rows))
    header_rows = 2 if len(rows) > 1 and _TABLE_SEPARATOR.match(rows[1]) else 1
    header = "\n".join(rows[:header_rows])
    header_size = measure.joined(sizes[:header_rows], "\n") if measure.exact else measure.size(header)
    if header_size > limit // 2:  # a header that large cannot be repeated: split as text
        return _split_lines(table, limit, measure, sizes)
    room = limit - measure.joined([header_size, 0], "\n")  # for rows beside the header
    pieces: list[tuple[str, int]] = []
    body: list[str] = []
    body_size = header_size  # the header and the rows so far, joined
    for row, row_size in zip(rows[header_rows:], sizes[header_rows:], strict=True):
        parts = _split_long(row, room, measure) if row_size > room else [(row, row_size)]
        for part, measured in parts:
            part_size = row_size if len(parts) == 1 else measured
            candidate = measure.joined([body_size, part_size], "\n")
            if body and candidate > limit:
                pieces.append((header + "\n" + "\n".join(body), body_size))
                body, candidate = [], measure.joined([header_size, part_size], "\n")
            body.append(part)
            body_size = candidate
    if body or not pieces:
        pieces.append((header + ("\n" + "\n".join(body) if body else ""), body_size))
    return pieces


def _split_lines(
    text: str, limit: int, measure: Measure, line_sizes: Sequence[int] | None = None
) -> list[tuple[str, int]]:
    """Pack lines (of ``line_sizes`` when already measured), each piece with its size as packed;
    a line too long on its own splits on sentences, then between words."""
    pieces: list[tuple[str, int]] = []
    current, current_size = "", 0
    lines = text.split("\n")
    for line, line_size in zip(lines, line_sizes or measure.sizes(lines), strict=True):
        parts = _split_long(line, limit, measure) if line_size > limit else [(line, line_size)]
        for part, measured in parts:
            part_size = line_size if len(parts) == 1 else measured
            candidate = measure.joined([current_size, part_size], "\n") if current else part_size
            if candidate > limit and current:
                pieces.append((current, current_size))
                current, candidate = "", part_size
            current = f"{current}\n{part}" if current else part
            current_size = candidate
    if current.strip():
        pieces.append((current, current_size))
    return pieces


def _split_long(text: str, limit: int, measure: Measure) -> list[tuple[str, int]]:
    """A line over the limit in pieces of sentences, a sentence over it cut between words; each
    piece with its size. The sentences are measured in one batch (an abstract is one long line of
    them), and the pieces again only where the measure is not exact."""
    sentences = _sentences(text)
    packed = _pack_sentences(sentences, measure.sizes(sentences), limit, measure)
    if not measure.exact:
        texts = [piece for piece, _ in packed]
        packed = list(zip(texts, measure.sizes(texts), strict=True))
    pieces: list[tuple[str, int]] = []
    for piece, size in packed:
        if size > limit:
            cut = measure.split(piece, limit)
            pieces += zip(cut, measure.sizes(cut), strict=True)
        else:
            pieces.append((piece, size))
    return pieces


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _pack_sentences(sentences: list[str], sizes: list[int], limit: int, measure: Measure) -> list[tuple[str, int]]:
    pieces: list[tuple[str, int]] = []
    current: list[str] = []
    current_size = 0
    for sentence, sentence_size in zip(sentences, sizes, strict=True):
        candidate = measure.joined([current_size, sentence_size], " ") if current else sentence_size
        if current and candidate > limit:
            pieces.append((" ".join(current), current_size))
            current, candidate = [], sentence_size
        current.append(sentence)
        current_size = candidate
    if current:
        pieces.append((" ".join(current), current_size))
    return pieces
