"""The one rule that makes a chunk's ``metadata``: the jsonb search's filters read.

Written when a job stores its chunks and again when a document's metadata or filename changes
(``UpdateDocument``), each time by this expression, so both agree. In order, a later part
winning a key: the service's descriptive keys (``source`` the filename, ``section``, ``page``),
the document's metadata, the passage's own metadata, then the keys the service reads back
(``chunk_index``, ``document_id``, ``overlap_chars``, and the passage's ``fragment``), which
caller metadata may not name (``domain.metadata.RESERVED_KEYS``).
"""

from __future__ import annotations


def chunk_metadata(*, c: str, filename: str, document: str, overlap: str) -> str:
    """The SQL expression over the chunk's columns (alias ``c``: section, page, chunk_index,
    document_id, fragment, passage_metadata), the document's ``filename`` and ``document``
    metadata, and the chunk's ``overlap`` characters."""
    return (
        f"jsonb_build_object('source', {filename}, 'section', {c}.section, 'page', {c}.page)"
        f" || {document} || {c}.passage_metadata"
        f" || jsonb_build_object('chunk_index', {c}.chunk_index, 'document_id', {c}.document_id::text,"
        f" 'overlap_chars', {overlap})"
        f" || CASE WHEN {c}.fragment IS NULL THEN '{{}}'::jsonb ELSE jsonb_build_object('fragment', {c}.fragment) END"
    )
