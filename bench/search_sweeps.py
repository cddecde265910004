"""The vector channel's recall against exact search, and ``bench/search.py latency --ef-sweep``
and ``--lexical-fractions``: one setting's trade on a loaded data dir, each value timed in turn on
every query (in a rotating order, so that load from elsewhere and cold pages hit them alike) and
judged against the first value or exact search."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import numpy as np
from knowledge_runtime.db.pool import Database
from knowledge_search.adapters.postgres import PostgresChunkIndex, scan_settings
from knowledge_search.domain.model import ChannelHit, Filters
from knowledge_search.domain.retrieval import CHANNEL_DEPTH, Bm25
from search_common import EXACT, TENANT, percentile

T = TypeVar("T")
R = TypeVar("R")


def overlap(found: list[int], best: list[int]) -> float:
    """The share of ``best`` (an exact top 10, or a baseline's) that ``found`` holds."""
    return len(set(found) & set(best)) / len(best)


async def in_turn(calls: list[Callable[[T], Awaitable[R]]], items: list[T]) -> tuple[list[list[float]], list[list[R]]]:
    """Every call on every item, after a warm-up on the first ten: per call, its times (ms) and
    results in the items' order. The calls take turns on each item in a rotating order, so load
    from elsewhere hits them alike and the first to read an item's pages (paying their misses)
    is a different one each time."""
    for call in calls:
        for item in items[:10]:
            await call(item)
    durations: list[list[float]] = [[] for _ in calls]
    results: list[list[R]] = [[] for _ in calls]
    for n, item in enumerate(items):
        for i in [(n + k) % len(calls) for k in range(len(calls))]:
            started = time.perf_counter()
            results[i].append(await calls[i](item))
            durations[i].append((time.perf_counter() - started) * 1000)
    return durations, results


async def exact_top10(db: Database, queries: np.ndarray, cache: Path | None) -> list[list[int]]:
    """Each query's exact ten nearest chunks (a sequential scan each); kept in ``cache`` when
    given, since at a million rows they take minutes and the data dir's rows do not change."""
    if cache is not None and cache.exists():
        held = json.loads(cache.read_text())
        if len(held) == len(queries):
            return held
    found = [[r["chunk_id"] for r in await db.fetch("exact", EXACT.format(filter=""), v, TENANT, 10)] for v in queries]
    if cache is not None:
        cache.write_text(json.dumps(found))
    return found


async def ef_sweep(url: str, values: list[int], queries: np.ndarray, cache: Path | None) -> None:
    """Per ``hnsw.ef_search``: the vector channel's recall@10 against exact search and its
    latency at the channel's depth, on pools opened as the service opens its own; the values are
    timed in turn on each query, in a rotating order, so load from elsewhere and cold pages hit
    them alike."""
    judged = queries[:100]
    db = await Database.connect(url, max_size=1)
    try:
        exact = await exact_top10(db, judged, cache)
    finally:
        await db.close()
    print(
        f"ef_search sweep: recall@10 over {len(judged)} queries, latency over {len(queries)} "
        f"(the values in turn on each), depth {CHANNEL_DEPTH}"
    )
    pools = [await Database.connect(url, max_size=1, server_settings=scan_settings(ef_search=ef)) for ef in values]
    try:
        indexes = [PostgresChunkIndex(db, ef_search=ef) for db, ef in zip(pools, values, strict=True)]
        searches: list[Callable[[np.ndarray], Awaitable[list[ChannelHit]]]] = [
            lambda vector, index=index: index.vector_search(TENANT, vector, Filters(), CHANNEL_DEPTH)
            for index in indexes
        ]
        durations, hits = await in_turn(searches, list(queries))
    finally:
        for db in pools:
            await db.close()
    for i, ef in enumerate(values):
        found = statistics.mean(overlap([h.chunk_id for h in hits[i][n][:10]], best) for n, best in enumerate(exact))
        print(
            f"ef_search {ef:5d}: recall@10 {found:.3f}, VECTOR channel "
            f"p50 {percentile(durations[i], 50):7.2f} ms p95 {percentile(durations[i], 95):7.2f} ms, "
            f"p50 x{percentile(durations[i], 50) / percentile(durations[0], 50):.2f} of ef_search {values[0]}"
        )


async def _lexical_in_turn(
    db: Database, indexes: list, texts: list[str]
) -> tuple[list[list[float]], list[list[list[ChannelHit]]], dict[str, int]]:
    """Each index's lexical channel alone at its depth, in turn on each query (rotating): its
    times (ms) and hits, and the chunk count of every query word."""
    searches: list[Callable[[str], Awaitable[list[ChannelHit]]]] = [
        lambda text, index=index: index.lexical_search(TENANT, text, Filters(), CHANNEL_DEPTH) for index in indexes
    ]
    durations, hits = await in_turn(searches, texts)
    words = sorted({w for text in texts for w in text.split()})
    frequency = {
        r["lexeme"]: int(r["df"])
        for r in await db.fetch(
            "df",
            "SELECT lexeme, sum(doc_freq) AS df FROM search_lexeme_stats WHERE tenant_id = $1 "
            "AND lexeme = ANY($2::text[]) GROUP BY lexeme",
            TENANT,
            words,
        )
    }
    return durations, hits, frequency


def _slowest(
    label: str, durations: list[float], texts: list[str], frequency: dict[str, int], baseline: list[float] | None = None
) -> None:
    """The five slowest queries at ``label``, with their words' chunk counts (and the baseline's time)."""
    for n in sorted(range(len(texts)), key=lambda n: -durations[n])[:5]:
        terms = ", ".join(f"{w} in {frequency.get(w, 0)}" for w in texts[n].split())
        against = f" (baseline {baseline[n]:.1f} ms)" if baseline is not None else ""
        print(f"  slow at {label}: {durations[n]:6.1f} ms{against}  {terms} chunks")


async def lexical_fractions(url: str, fractions: list[float], texts: list[str]) -> None:
    """The lexical channel alone at its depth, per BM25 ``common_fraction`` (the values in turn
    on each query, rotating): p50/p95, how many queries find no lexical hit, how much of each top
    10 the first value's results keep, and the slowest queries' terms with their chunk counts."""
    db = await Database.connect(url, max_size=1, server_settings=scan_settings())
    try:
        indexes = [PostgresChunkIndex(db, bm25=dataclasses.replace(Bm25(), common_fraction=f)) for f in fractions]
        durations, hits, frequency = await _lexical_in_turn(db, indexes, texts)
    finally:
        await db.close()
    found = [[[h.chunk_id for h in result[:10]] for result in results] for results in hits]
    answered = [n for n, hits in enumerate(found[0]) if hits]
    for i, fraction in enumerate(fractions):
        kept = [overlap(found[i][n], found[0][n]) for n in answered]
        print(
            f"LEXICAL common_fraction {fraction}: p50 {percentile(durations[i], 50):7.2f} ms "
            f"p95 {percentile(durations[i], 95):7.2f} ms, {sum(not hits for hits in found[i])} of {len(texts)} "
            f"queries without a hit; of the {len(answered)} answered at {fractions[0]}: "
            f"{sum(not found[i][n] for n in answered)} without one, top 10 kept {statistics.mean(kept) if kept else 0:.0%}"
        )
    _slowest(str(fractions[0]), durations[0], texts, frequency)


ADAPTERS = "services/search/src/knowledge_search/adapters"


def adapter_at(revision: str, keep: Path) -> ModuleType:
    """The search service's PostgreSQL adapter as it was at a git revision of this repository:
    the revision's ``knowledge_search.adapters`` package, written under ``keep`` and imported as a
    package of its own (so its modules import one another, and the working tree's domain)."""
    root = Path(__file__).resolve().parent.parent
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{revision}:{ADAPTERS}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    name = "adapters_at_revision"
    package = keep / name
    package.mkdir()
    for file in [f for f in listed if f.endswith(".py")]:
        source = subprocess.run(
            ["git", "show", f"{revision}:{ADAPTERS}/{file}"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
        (package / file).write_text(source.replace("knowledge_search.adapters", name))
    sys.path.insert(0, str(keep))
    try:
        return importlib.import_module(f"{name}.postgres")  # its modules are loaded now: keep can go
    finally:
        sys.path.remove(str(keep))


def same_hits(a: list[ChannelHit], b: list[ChannelHit]) -> bool:
    """The same chunks in the same order with the same scores (to float rounding)."""
    return [h.chunk_id for h in a] == [h.chunk_id for h in b] and all(
        math.isclose(x.score, y.score, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b, strict=True)
    )


async def lexical_versus(url: str, revision: str, texts: list[str]) -> None:
    """The lexical channel's statement at ``revision`` against the working tree's, in turn on each
    query (rotating), on the same data: p50/p95 of each, their ratio, and on how many queries the
    two return the same hits."""
    with tempfile.TemporaryDirectory() as keep:
        before = adapter_at(revision, Path(keep))
    db = await Database.connect(url, max_size=1, server_settings=scan_settings())
    try:
        indexes = [before.PostgresChunkIndex(db), PostgresChunkIndex(db)]
        durations, hits, frequency = await _lexical_in_turn(db, indexes, texts)
    finally:
        await db.close()
    for label, times in zip([revision, "working tree"], durations, strict=True):
        print(f"LEXICAL at {label}: p50 {percentile(times, 50):7.2f} ms p95 {percentile(times, 95):7.2f} ms")
    ratio = [percentile(durations[1], q) / percentile(durations[0], q) for q in (50, 95)]
    identical = sum(same_hits(a, b) for a, b in zip(hits[0], hits[1], strict=True))
    print(
        f"LEXICAL working tree / {revision}: p50 x{ratio[0]:.2f}, p95 x{ratio[1]:.2f}, max "
        f"{max(durations[1]):.1f} against {max(durations[0]):.1f} ms; the same hits on {identical} of {len(texts)} queries"
    )
    _slowest("the working tree", durations[1], texts, frequency, baseline=durations[0])


async def recall(
    db: Database,
    index: PostgresChunkIndex,
    queries: np.ndarray,
    corpus: int | None,
    depth: int,
    exact: list[list[int]] | None = None,
) -> float:
    """Recall@10 of the vector channel at ``depth``; ``exact``: the queries' exact ten, when known."""
    found = []
    for n, vector in enumerate(queries):
        filters = Filters(corpus_id=corpus)
        approx = [h.chunk_id for h in await index.vector_search(TENANT, vector, filters, depth)][:10]
        if exact is not None:
            best = exact[n]
        else:
            extra = "AND corpus_id = $4" if corpus is not None else ""
            args = [corpus] if corpus is not None else []
            best = [
                r["chunk_id"] for r in await db.fetch("exact", EXACT.format(filter=extra), vector, TENANT, 10, *args)
            ]
        found.append(overlap(approx, best))
    return statistics.mean(found)


async def forced_hnsw_recall(db: Database, queries: np.ndarray, corpus: int) -> tuple[float, float]:
    """Recall@10 and mean hits of the filtered query when the planner must take the HNSW index
    (no sort allowed), i.e. what pgvector's iterative scan delivers on a selective filter."""
    from knowledge_search.adapters.postgres import SET_SCAN, VECTOR_SEARCH

    found, counts = [], []
    for vector in queries:
        async with db.transaction() as tx:
            await tx.fetchrow("scan", SET_SCAN, "300", "20000")
            await tx.fetchrow("no_sort", "SELECT set_config('enable_sort', 'off', true)")
            rows = await tx.fetch(
                "vector_search", VECTOR_SEARCH.format(filters="AND c.corpus_id = $4"), vector, [TENANT], 300, corpus
            )
        exact = [
            r["chunk_id"]
            for r in await db.fetch("exact", EXACT.format(filter="AND corpus_id = $4"), vector, TENANT, 10, corpus)
        ]
        found.append(overlap([r["chunk_id"] for r in rows[:10]], exact))
        counts.append(len(rows))
    return statistics.mean(found), statistics.mean(counts)
