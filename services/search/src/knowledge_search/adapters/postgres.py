"""The chunk index in PostgreSQL (role knowledge_search: reads chunks, never writes them).

Vector channel: cosine distance on the HNSW index with pgvector's iterative index scans, so
a filtered query still fills its depth; the nearest rows are re-sorted exactly because the
relaxed scan may return them slightly out of order.

Lexical channel: Okapi BM25 computed in SQL from each chunk's weighted tsvector and the
per-tenant statistics that migration 0005's triggers keep. The query's lexemes are quoted
one by one and OR-ed (a second ``to_tsquery`` pass would stem them twice). A term's
frequency in a chunk sums its positions' tier weights relative to body text (D), so a
heading match counts more than a body match while body text keeps BM25's saturation.

Like Elasticsearch's common-terms query, a term found in more than ``common_fraction`` of
the tenant's chunks (and in more than ``common_min_df`` of them) still scores but does not
select candidates on its own, so one very frequent word does not make the query score most
of the tenant; when every term is that frequent, a candidate must hold them all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from knowledge_runtime.db.pool import Database

from knowledge_search.domain.errors import CorpusNotFound, DocumentNotFound
from knowledge_search.domain.model import ChannelHit, Chunk, CostItem, Filters, Weights
from knowledge_search.domain.retrieval import DEFAULT_EF_SEARCH, DEFAULT_MAX_SCAN_TUPLES, Bm25

# {filters} is one of FILTERS' fragments, never caller text.
VECTOR_SEARCH = """
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
SET_SCAN = """
SELECT set_config('hnsw.ef_search', $1, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.max_scan_tuples', $2, true)
"""
LEXICAL_SEARCH = """
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
# What results show, read once for the chunks that are returned (never for the channels' depth).
HYDRATE = """
SELECT c.chunk_id, c.document_id, c.corpus_id, c.section, c.page, c.content, d.filename, d.source_url
FROM chunks c
JOIN documents d ON d.document_id = c.document_id
WHERE c.chunk_id = ANY($1::bigint[]) AND c.tenant_id = $2
"""
CORPUS_VISIBLE = "SELECT 1 FROM corpora WHERE corpus_id = $1 AND (tenant_id = $2 OR is_system)"
DOCUMENT_VISIBLE = "SELECT corpus_id FROM documents WHERE document_id = $1 AND tenant_id = $2"
CORPUS_WEIGHTS = "SELECT vector_weight, lexical_weight FROM corpus_search_weights WHERE corpus_id = $1"
RECORD_COST = """
INSERT INTO cost_records (tenant_id, model, operation, texts, tokens, cost)
VALUES ($1, $2, $3, $4, $5, $6)
"""


def _filters(filters: Filters, first: int) -> tuple[str, list[int]]:
    """Predicates for the set filters only, so each combination gets a plan of its own."""
    sql, args = [], []
    if filters.corpus_id is not None:
        args.append(filters.corpus_id)
        sql.append(f"AND c.corpus_id = ${first + len(args) - 1}")
    if filters.document_id is not None:
        args.append(filters.document_id)
        sql.append(f"AND c.document_id = ${first + len(args) - 1}")
    return " ".join(sql), args


def _hits(rows) -> list[ChannelHit]:
    return [
        ChannelHit(
            chunk_id=row["chunk_id"],
            document_id=row["document_id"],
            score=float(row["score"]),
            rank=rank,
            coverage=1.0 if row.get("coverage") is None else float(row["coverage"]),  # lexical only
        )
        for rank, row in enumerate(rows, start=1)
    ]


_DEFAULT_BM25 = Bm25()


class PostgresChunkIndex:
    def __init__(
        self,
        db: Database,
        *,
        bm25: Bm25 = _DEFAULT_BM25,
        ef_search: int = DEFAULT_EF_SEARCH,
        max_scan_tuples: int = DEFAULT_MAX_SCAN_TUPLES,
    ) -> None:
        self._db = db
        self._bm25 = bm25
        self._ef_search = ef_search
        self._max_scan_tuples = max_scan_tuples

    async def vector_search(
        self, tenant: str, vector: Sequence[float], filters: Filters, depth: int
    ) -> list[ChannelHit]:
        predicates, args = _filters(filters, 4)
        ef_search = max(self._ef_search, min(depth, 1000))
        async with self._db.transaction() as tx:
            await tx.fetchrow("set_hnsw_scan", SET_SCAN, str(ef_search), str(self._max_scan_tuples))
            rows = await tx.fetch(
                "vector_search",
                VECTOR_SEARCH.format(filters=predicates),
                np.asarray(vector, dtype=np.float32),
                tenant,
                depth,
                *args,
            )
        return _hits(rows)

    async def lexical_search(self, tenant: str, text: str, filters: Filters, depth: int) -> list[ChannelHit]:
        predicates, args = _filters(filters, 12)
        d, c, b, a = self._bm25.tiers
        rows = await self._db.fetch(
            "lexical_search",
            LEXICAL_SEARCH.format(filters=predicates),
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

    async def chunks(self, tenant: str, chunk_ids: Sequence[int]) -> dict[int, Chunk]:
        if not chunk_ids:
            return {}
        rows = await self._db.fetch("hydrate", HYDRATE, list(chunk_ids), tenant)
        return {
            row["chunk_id"]: Chunk(
                chunk_id=row["chunk_id"],
                document_id=row["document_id"],
                corpus_id=row["corpus_id"],
                filename=row["filename"],
                section=row["section"],
                page=row["page"],
                content=row["content"],
                source_url=row["source_url"] or "",
            )
            for row in rows
        }

    async def check_filters(self, tenant: str, filters: Filters) -> None:
        if filters.corpus_id is not None:
            if await self._db.fetchval("corpus_visible", CORPUS_VISIBLE, filters.corpus_id, tenant) is None:
                raise CorpusNotFound()
        if filters.document_id is not None:
            corpus = await self._db.fetchval("document_visible", DOCUMENT_VISIBLE, filters.document_id, tenant)
            if corpus is None or (filters.corpus_id is not None and corpus != filters.corpus_id):
                raise DocumentNotFound()

    async def corpus_weights(self, corpus_id: int) -> Weights:
        row = await self._db.fetchrow("corpus_weights", CORPUS_WEIGHTS, corpus_id)
        if row is None:
            return Weights()
        return Weights(vector=row["vector_weight"], lexical=row["lexical_weight"])


class PostgresCostLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, tenant: str, item: CostItem) -> None:
        await self._db.execute(
            "record_cost",
            RECORD_COST,
            tenant,
            item.model_id,
            item.operation,
            item.texts,
            item.input_tokens + item.output_tokens,
            item.amount,
        )
