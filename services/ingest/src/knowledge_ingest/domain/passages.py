"""Passages by reference: what a platform service indexes under its own name for a file."""

from __future__ import annotations

from dataclasses import dataclass, field

from knowledge_ingest.domain.metadata import Metadata


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrievable unit as the caller cut it: indexed as given, never re-chunked."""

    fragment: str
    text: str
    metadata: Metadata = field(default_factory=dict)
