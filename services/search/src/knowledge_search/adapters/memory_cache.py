"""The search answers of one process, kept for a short TTL (KNOWLEDGE_SEARCH_CACHE_TTL_S).

Replicas never share entries; they agree through the key's generation, which every replica reads
from PostgreSQL per request, so a change made through any replica is seen by all at once. The
TTL bounds how long an entry lives at all; the size bound keeps memory flat under many queries.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from prometheus_client import Counter

from knowledge_search.domain.cache import CacheKey
from knowledge_search.domain.model import SearchOutcome

MAX_ENTRIES = 10_000

HITS = Counter("knowledge_search_cache_hits_total", "Search answers served from the scope-keyed cache")
MISSES = Counter("knowledge_search_cache_misses_total", "Search answers computed because the cache held none")


class TtlCache:
    def __init__(
        self, ttl_s: float, *, max_entries: int = MAX_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_s = ttl_s
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[CacheKey, tuple[float, SearchOutcome]] = OrderedDict()

    def get(self, key: CacheKey) -> SearchOutcome | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            if entry is not None:
                del self._entries[key]
            MISSES.inc()
            return None
        HITS.inc()
        return entry[1]

    def put(self, key: CacheKey, outcome: SearchOutcome) -> None:
        self._entries[key] = (self._clock() + self._ttl_s, outcome)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)  # the oldest write goes first

    def __len__(self) -> int:
        return len(self._entries)
