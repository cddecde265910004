"""A document's text, rebuilt from its ordered chunks, in pages of 25,000 characters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knowledge_runtime.chunking import TextChunk

from knowledge_ingest.domain.errors import InvalidRequest, PageOutOfRange

PAGE_CHARS = 25_000


@dataclass(frozen=True, slots=True)
class TextPage:
    document_id: int
    text: str
    page: int | None  # None (with the rest) for a one-page document
    page_count: int | None
    next_page: int | None
    previous_page: int | None
    source_url: str = ""  # where a fetched page came from
    extractor: str = ""  # what read the document's text (Document.extractor)


def _blocks(chunks: Sequence[TextChunk]) -> list[tuple[str, str, bool]]:
    """(text, section, continues_section) per chunk, without overlaps, with page markers."""
    blocks = []
    previous: TextChunk | None = None
    for chunk in chunks:
        body = chunk.content[chunk.overlap_chars :]
        if chunk.page is not None and (previous is None or previous.page != chunk.page):
            body = f"[Page {chunk.page}]\n\n{body}"
        continues = previous is not None and previous.section == chunk.section and bool(chunk.section)
        blocks.append((body, chunk.section, continues))
        previous = chunk
    return blocks


def paginate(document_id: int, chunks: Sequence[TextChunk], page: int) -> TextPage:
    """Pages break between chunks; a page that starts inside a section re-emits its heading."""
    pages: list[list[str]] = [[]]
    size = 0
    for body, section, continues in _blocks(chunks):
        if pages[-1] and size + len(body) + 2 > PAGE_CHARS:
            pages.append([f"## {section} (continued)"] if continues else [])
            size = len(pages[-1][0]) if continues else 0
        pages[-1].append(body)
        size += len(body) + 2
    texts = ["\n\n".join(parts) for parts in pages]
    if page < 0:
        raise InvalidRequest("page must not be negative (0 or 1 is the first page)", field="page")
    number = page or 1
    if number > len(texts):
        raise PageOutOfRange(number, len(texts))
    if len(texts) == 1:
        return TextPage(document_id, texts[0], None, None, None, None)
    return TextPage(
        document_id=document_id,
        text=texts[number - 1],
        page=number,
        page_count=len(texts),
        next_page=number + 1 if number < len(texts) else None,
        previous_page=number - 1 if number > 1 else None,
    )
