"""What a cached search answer is keyed on: the tenant, the reader's scope node, clearance and
principals, the generation of what that reader sees, and the full request. No key without a
scope: a reader only exists once its token's scope resolved."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

from knowledge_runtime.reach import Reader

from knowledge_search.domain.model import SearchOutcome, SearchRequest

DEFAULT_TTL_S = 30.0  # KNOWLEDGE_SEARCH_CACHE_TTL_S; 0 disables the cache


@dataclass(frozen=True, slots=True)
class CacheKey:
    tenant: str
    node: str
    clearance: str
    # Who the reader is to access lists (Reader.principals): two readers of one node and band who
    # are in other groups read other documents, so never each other's answers.
    principals: frozenset[str]
    # The sum of the generations of the reader's node and its ancestors (migration 0024): any
    # change a reader could see bumps one of them (a document's access list too: migration 0062),
    # so an entry of before the change never matches.
    generation: int
    request: Hashable


def cache_key(tenant: str, reader: Reader, generation: int, request: SearchRequest) -> CacheKey:
    return CacheKey(tenant, str(reader.node), reader.clearance.value, reader.principals, generation, request)


class OutcomeCache(Protocol):
    def get(self, key: CacheKey) -> SearchOutcome | None:
        """The outcome stored under ``key`` while it is fresh; None otherwise (a miss)."""

    def put(self, key: CacheKey, outcome: SearchOutcome) -> None: ...
