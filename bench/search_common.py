"""What the search benchmarks share: their tenant, the vector dimension and the baseline.

The baseline is the channels' SQL as it was before the lexeme postings (migration 0022), kept
as :class:`TodayChunkIndex` so that ``latency`` times it in the same run and ``eval --baseline``
scores it; its predicates are today's (the caller's access included), so the two compare the
channels' SQL alone.
"""

from __future__ import annotations

import numpy as np
from knowledge_search.adapters.postgres import PostgresChunkIndex

DIM = 384
TENANT = "bench"
# Exact nearest chunks (the ``+ 0`` keeps the planner off the HNSW index): what recall is judged by.
EXACT = """
SELECT chunk_id FROM chunks WHERE tenant_id = $2 {filter}
ORDER BY (embedding <=> $1) + 0 LIMIT $3
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# The channels as they were before the lexeme postings (migration 0022): lexical candidates from
# the GIN index on chunks.lexemes, each candidate's chunk row read and its query lexemes unnested
# from its tsvector; HNSW ef_search raised to the channel depth. Kept as the baseline that
# ``latency`` times in the same run and that ``eval --baseline`` scores.
TODAY_VECTOR_SEARCH = """
WITH nearest AS MATERIALIZED (
    SELECT c.chunk_id, c.embedding <=> $1 AS distance
    FROM chunks c
    WHERE c.tenant_id = $2 {filters}
    ORDER BY c.embedding <=> $1
    LIMIT $3
)
SELECT n.chunk_id, c.document_id, greatest(0.0, least(1.0, 1.0 - n.distance)) AS score
FROM nearest n
JOIN chunks c ON c.chunk_id = n.chunk_id
ORDER BY n.distance, n.chunk_id
"""
TODAY_LEXICAL_SEARCH = """
WITH terms AS (
    SELECT DISTINCT t.lexeme FROM unnest(to_tsvector($1::regconfig, $2)) AS t
),
stats AS (
    SELECT greatest(s.chunk_count, 1)::float8 AS n,
           greatest(s.total_length::float8 / greatest(s.chunk_count, 1), 1.0) AS avgdl
    FROM search_tenant_stats s WHERE s.tenant_id = $3
),
idf AS (
    SELECT t.lexeme,
           ln(1.0 + (st.n - coalesce(l.doc_freq, 0) + 0.5) / (coalesce(l.doc_freq, 0) + 0.5)) AS idf,
           coalesce(l.doc_freq, 0) <= greatest($10, $11 * st.n) AS selective
    FROM terms t
    CROSS JOIN stats st
    LEFT JOIN search_lexeme_stats l ON l.tenant_id = $3 AND l.lexeme = t.lexeme
),
quoted AS (
    SELECT '''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''' AS term, selective FROM idf
),
query AS (
    SELECT (CASE WHEN bool_or(selective) THEN string_agg(term, ' | ') FILTER (WHERE selective)
                 ELSE string_agg(term, ' & ') END)::tsquery AS q
    FROM quoted
),
matched AS (
    SELECT c.chunk_id, c.document_id, c.lexemes, c.bm25_length::float8 AS len
    FROM chunks c, query
    WHERE c.tenant_id = $3 AND c.lexemes @@ query.q {filters}
),
scored AS (
    SELECT m.chunk_id, m.document_id,
           sum(i.idf * tf.w * ($4 + 1.0) / (tf.w + $4 * (1.0 - $5 + $5 * m.len / st.avgdl))) AS score
    FROM matched m
    CROSS JOIN stats st
    CROSS JOIN (SELECT array_agg(lexeme) AS lexemes FROM terms) AS qt
    -- Only the query's lexemes of the chunk: deleting from it every lexeme that is not the
    -- query's (all in C) leaves a few entries to unnest instead of the whole tsvector.
    CROSS JOIN LATERAL unnest(ts_delete(m.lexemes, tsvector_to_array(ts_delete(m.lexemes, qt.lexemes)))) AS u
    JOIN idf i ON i.lexeme = u.lexeme
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(CASE wt WHEN 'A' THEN $6 WHEN 'B' THEN $7 WHEN 'C' THEN $8 ELSE 1.0 END), 1.0) AS w
        FROM unnest(u.weights) AS wt
    ) AS tf
    GROUP BY m.chunk_id, m.document_id
    ORDER BY score DESC, m.chunk_id
    LIMIT $9
)
SELECT s.chunk_id, s.document_id, s.score,
       least(1.0, s.score / nullif((SELECT sum(idf) FROM idf), 0)) AS coverage
FROM scored s
ORDER BY s.score DESC, s.chunk_id
"""


class TodayChunkIndex(PostgresChunkIndex):
    """The index as it was: the same ports, the previous queries."""

    async def vector_search(self, tenant, vector, filters, depth):
        from knowledge_search.adapters.postgres import SET_SCAN, _channel_predicates, _hits, _render

        channel, args = _channel_predicates(filters, 4, "ARRAY[$2::text]")
        predicates = _render(channel, "c")
        async with self._db.transaction() as tx:
            await tx.fetchrow(
                "set_hnsw_scan", SET_SCAN, str(max(self._ef_search, min(depth, 1000))), str(self._max_scan_tuples)
            )
            rows = await tx.fetch(
                "today_vector",
                TODAY_VECTOR_SEARCH.format(filters=predicates),
                np.asarray(vector, dtype=np.float32),
                tenant,
                depth,
                *args,
            )
        return _hits(rows)

    async def lexical_search(self, tenant, text, filters, depth):
        from knowledge_search.adapters.postgres import _channel_predicates, _hits, _render

        channel, args = _channel_predicates(filters, 12, "ARRAY[$3::text]")
        predicates = _render(channel, "c")
        d, c, b, a = self._bm25.tiers
        rows = await self._db.fetch(
            "today_lexical",
            TODAY_LEXICAL_SEARCH.format(filters=predicates),
            self._bm25.text_config,
            text,
            tenant,
            self._bm25.k1,
            self._bm25.b,
            a / d,
            b / d,
            c / d,
            depth,
            self._bm25.common_min_df,
            self._bm25.common_fraction,
            *args,
        )
        return _hits(rows)
