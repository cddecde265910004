"""Corpora as the domain sees them: frozen values, validated on the way in."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from knowledge_runtime.corpus_keys import InvalidCorpusKey, check_key
from knowledge_runtime.reach import DEFAULT_BAND, TENANT_ROOT, Band, Reader, ScopePath, parse_band

from knowledge_ingest.domain.errors import InvalidCorpus

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Corpus:
    corpus_id: int
    name: str
    description: str
    document_count: int
    chunk_count: int
    create_time: datetime
    scope: ScopePath = TENANT_ROOT
    confidentiality: Band = DEFAULT_BAND
    key: str | None = None  # the caller's key (knowledge_runtime.corpus_keys), if it gave one
    # The access list a document created in it gets when its request names none (empty: everyone
    # who reaches the corpus).
    default_principals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NewCorpus:
    name: str
    description: str
    confidentiality: Band = DEFAULT_BAND
    key: str | None = None
    default_principals: tuple[str, ...] = ()  # checked (runtime.reach.access_list)

    @classmethod
    def parse(cls, name: str, description: str, confidentiality: str = "", key: str = "") -> NewCorpus:
        name = name.strip()
        if not name:
            raise InvalidCorpus("name must not be empty", field="name")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidCorpus(f"name must be at most {MAX_NAME_CHARS} characters", field="name")
        if any(unicodedata.category(ch) == "Cc" for ch in name):
            raise InvalidCorpus("name must not contain control characters", field="name")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise InvalidCorpus(f"description must be at most {MAX_DESCRIPTION_CHARS} characters", field="description")
        if "\x00" in description:
            raise InvalidCorpus("description must not contain NUL characters", field="description")
        band = DEFAULT_BAND
        if confidentiality.strip():
            try:
                band = parse_band(confidentiality)
            except ValueError as error:
                raise InvalidCorpus(str(error), field="confidentiality") from None
        if key:
            try:
                check_key(key)
            except InvalidCorpusKey as error:
                raise InvalidCorpus(str(error), field="key") from None
        return cls(name=name, description=description, confidentiality=band, key=key or None)


def name_taken(reader: Reader, node: ScopePath, bands: Iterable[Band]) -> bool:
    """Whether live corpora named alike at ``node``, in ``bands``, take the name from ``reader``:
    only one it can read does. A name held outside its reach (a band above its clearance, a node
    it does not read) behaves as absent, since saying "taken" would tell it the name; names are
    unique per node and band (migration 0055), so its corpus is created beside that one."""
    return any(reader.may_read(node, band) for band in bands)


@dataclass(frozen=True, slots=True)
class Page:
    """A keyset page request: at most ``size`` items after ``after_id``."""

    size: int
    after_id: int = 0

    def probe(self) -> Page:
        """One item more than the page holds: whether another page follows."""
        return Page(size=self.size + 1, after_id=self.after_id)

    def cut(self, found: list[T], key: Callable[[T], int]) -> tuple[list[T], int | None]:
        """The page out of what ``probe`` found, and the id to continue after (None on the last page)."""
        if len(found) > self.size:
            items = found[: self.size]
            return items, key(items[-1])
        return found, None
