"""The chunk index in PostgreSQL (role knowledge_search: reads chunks, never writes them).

Vector channel: cosine distance on the HNSW index with pgvector's iterative index scans, so
a filtered query still fills its depth; the nearest rows are re-sorted exactly because the
relaxed scan may return them slightly out of order.

Lexical channel: Okapi BM25 computed in SQL from the lexeme postings (migration 0022: one row
per tenant, lexeme and chunk, with the positions per weight tier and the chunk's BM25 length,
kept by triggers on chunks) and the per-tenant statistics of migration 0005. A query reads only
its own terms' postings, by index-only scans, never a chunk row. A term's frequency in a chunk
sums its positions' tier weights relative to body text (D), so a heading match counts more than
a body match while body text keeps BM25's saturation.

Like Elasticsearch's common-terms query, a term found in more than ``common_fraction`` of
the tenant's chunks (and in more than ``common_min_df`` of them) still scores but does not
select candidates on its own, so one very frequent word does not make the query score most
of the tenant; when every term is that frequent, a candidate must hold them all. A common term
whose postings are short enough is read whole; a much longer one is looked up per candidate,
only for the candidates its largest possible share could still lift into the channel's depth.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import PostgresReach
from knowledge_runtime.db.tenant_settings import TenantSettingsReader, llm_cost_since
from knowledge_runtime.reach import PLATFORM_TENANT, Reach, Reader
from knowledge_runtime.refusals import Refused
from knowledge_runtime.tenancy import budget_refusal, current_period, period_bounds

from knowledge_search.domain.errors import CorpusNotFound, DocumentNotFound
from knowledge_search.domain.model import PROVISIONAL_MARKER, ChannelHit, Chunk, CostItem, Filters, Weights
from knowledge_search.domain.retrieval import DEFAULT_EF_SEARCH, DEFAULT_MAX_SCAN_TUPLES, Bm25

# {filters} is one of FILTERS' fragments, never caller text.
VECTOR_SEARCH = """
WITH nearest AS MATERIALIZED (
    SELECT c.chunk_id, c.document_id, c.embedding <=> $1 AS distance
    FROM chunks c
    WHERE c.tenant_id = ANY($2::text[]) {filters}
    ORDER BY c.embedding <=> $1
    LIMIT $3
)
SELECT n.chunk_id, n.document_id, greatest(0.0, least(1.0, 1.0 - n.distance)) AS score
FROM nearest n
ORDER BY n.distance, n.chunk_id
"""
SET_SCAN = """
SELECT set_config('hnsw.ef_search', $1, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.max_scan_tuples', $2, true)
"""
# The query's distinct lexemes with their idf, document frequency, whether they are selective,
# and the mean BM25 length, over the tenant keys $3 (the caller's, and the platform tenant's when
# it reaches a platform-wide corpus: Reach.owners); rarest first. No row when they have no chunks.
LEXICAL_TERMS = """
WITH terms AS (
    SELECT DISTINCT t.lexeme FROM unnest(to_tsvector($1::regconfig, $2)) AS t
),
stats AS (
    SELECT greatest(sum(s.chunk_count), 1)::float8 AS n,
           greatest(sum(s.total_length)::float8 / greatest(sum(s.chunk_count), 1), 1.0) AS avgdl
    FROM search_tenant_stats s WHERE s.tenant_id = ANY($3::text[]) HAVING count(*) > 0
)
SELECT t.lexeme,
       ln(1.0 + (st.n - coalesce(l.doc_freq, 0) + 0.5) / (coalesce(l.doc_freq, 0) + 0.5)) AS idf,
       coalesce(l.doc_freq, 0) AS doc_freq,
       coalesce(l.doc_freq, 0) <= greatest($4, $5 * st.n) AS selective,
       st.avgdl
FROM terms t
CROSS JOIN stats st
LEFT JOIN LATERAL (
    SELECT sum(l.doc_freq)::bigint AS doc_freq FROM search_lexeme_stats l
    WHERE l.tenant_id = ANY($3::text[]) AND l.lexeme = t.lexeme
) l ON true
ORDER BY coalesce(l.doc_freq, 0), t.lexeme
"""
# BM25 over the postings of migration 0022, index-only reads of the query's own terms, exact:
# - the driving terms ($2, idf $3) select the candidates (any of them) and score them;
# - the joined terms ($4, idf $5), whose postings are short enough to read whole, add their share
#   to every candidate; when $12 is set (no selective term) a candidate must hold all of them;
# - the looked-up terms ($6, idf $7), far more frequent than the driving ones, add their share
#   by a key lookup, only for candidates that can still reach the best $11: a term adds less than
#   idf * (k1 + 1), so a candidate whose score plus $8 (that bound summed) stays below the
#   $11-th best score so far cannot. Of those, the best $15 so far are looked up: exact unless more
#   than $15 candidates lie within the bound of that floor (many near-ties, as in random text).
# $9, $10: k1, b; $13: the mean BM25 length; $14: tier weights D, C, B, A relative to D.
# {filters} is one of FILTERS' fragments, never caller text.
_TF = (
    "({p}.count_a * ($14::float8[])[4] + {p}.count_b * ($14::float8[])[3]"
    " + {p}.count_c * ($14::float8[])[2] + {p}.count_d * ($14::float8[])[1])"
)
# float8 throughout: a numeric literal would make PostgreSQL score in (slow) numeric arithmetic.
_BM25 = (
    "t.idf * {tf} * ($9::float8 + 1.0::float8)"
    " / ({tf} + $9::float8 * (1.0::float8 - $10::float8 + $10::float8 * {p}.bm25_length / $13::float8))"
)
LEXICAL_SEARCH = """
WITH driven AS (
    SELECT c.chunk_id, c.document_id, sum({bm25_c}) AS score
    FROM unnest($2::text[], $3::float8[]) AS t (lexeme, idf)
    JOIN search_postings c ON c.tenant_id = ANY($1::text[]) AND c.lexeme = t.lexeme
    WHERE true {{filters}}
    GROUP BY c.chunk_id, c.document_id
),
joined AS (
    SELECT d.chunk_id, d.document_id, d.score + coalesce(sum({bm25_j}), 0.0) AS score
    FROM driven d
    LEFT JOIN (
        unnest($4::text[], $5::float8[]) AS t (lexeme, idf)
        JOIN search_postings j ON j.tenant_id = ANY($1::text[]) AND j.lexeme = t.lexeme
    ) ON j.chunk_id = d.chunk_id
    GROUP BY d.chunk_id, d.document_id, d.score
    HAVING NOT $12 OR count(j.chunk_id) = cardinality($4::text[])
),
floor AS (
    SELECT coalesce((SELECT score FROM joined ORDER BY score DESC OFFSET $11 - 1 LIMIT 1), '-Infinity') AS score
),
looked_up AS (
    SELECT k.chunk_id, sum({bm25_p}) AS score
    FROM (
        SELECT k.chunk_id, k.score FROM joined k, floor f
        WHERE k.score + $8::float8 >= f.score
        ORDER BY k.score DESC, k.chunk_id
        LIMIT $15
    ) AS k
    CROSS JOIN unnest($6::text[], $7::float8[]) AS t (lexeme, idf)
    -- a key lookup per (candidate, term), never a scan of a very common term's postings
    CROSS JOIN LATERAL (
        SELECT o.count_a, o.count_b, o.count_c, o.count_d, o.bm25_length FROM search_postings o
        WHERE o.tenant_id = ANY($1::text[]) AND o.lexeme = t.lexeme AND o.chunk_id = k.chunk_id
        LIMIT 1
    ) AS p
    GROUP BY k.chunk_id
)
SELECT k.chunk_id, k.document_id, k.score + coalesce(r.score, 0.0) AS score
FROM joined k
LEFT JOIN looked_up r ON r.chunk_id = k.chunk_id
ORDER BY 3 DESC, k.chunk_id
LIMIT $11
""".format(
    bm25_c=_BM25.format(tf=_TF.format(p="c"), p="c"),
    bm25_j=_BM25.format(tf=_TF.format(p="j"), p="j"),
    bm25_p=_BM25.format(tf=_TF.format(p="p"), p="p"),
)
# A term's whole postings list is read (joined) when it is at most this many times longer than
# the driving terms' lists together; a longer one is looked up per candidate (a key lookup costs
# about as much as reading this many postings in a row).
JOIN_RATIO = 4
# Candidates (a multiple of the channel depth) that at most get the looked-up terms' share.
LOOKUP_WINDOW = 2
# What results show, read once for the chunks that are returned (never for the channels' depth):
# the caller's, or a platform-wide corpus's (chunks the channels found within the caller's reach).
# A deleted document's chunks stay until its removal job deletes them (issue 18): this join is
# what makes them unreachable from the delete's commit on, in every read that hydrates.
HYDRATE = """
SELECT c.chunk_id, c.document_id, c.corpus_id, c.section, c.page, c.content, d.filename, d.source_url, d.extractor
FROM chunks c
JOIN documents d ON d.document_id = c.document_id AND d.deleted_at IS NULL
WHERE c.chunk_id = ANY($1::bigint[]) AND (c.tenant_id = $2
    OR (c.tenant_id = $3 AND c.corpus_id IN (SELECT p.corpus_id FROM corpora p WHERE p.tenant_id IS NULL AND p.is_system)))
"""
# The tenant's own corpora and the platform-wide ones (no tenant); never another tenant's system corpus.
CORPUS_VISIBLE = """
SELECT 1 FROM corpora WHERE corpus_id = $1 AND (tenant_id = $2 OR (tenant_id IS NULL AND is_system)) AND deleted_at IS NULL
"""
DOCUMENT_VISIBLE = (
    "SELECT corpus_id FROM documents WHERE document_id = $1 AND tenant_id = ANY($2::text[]) AND deleted_at IS NULL"
)
CORPUS_WEIGHTS = "SELECT vector_weight, lexical_weight FROM corpus_search_weights WHERE corpus_id = $1"
RECORD_COST = """
INSERT INTO cost_records (tenant_id, model, operation, texts, tokens, cost)
VALUES ($1, $2, $3, $4, $5, $6)
"""


def _filters(filters: Filters, first: int) -> tuple[str, list[object]]:
    """Predicates for the set filters only, so each combination gets a plan of its own."""
    sql: list[str] = []
    args: list[object] = []
    if filters.corpus_id is not None:
        args.append(filters.corpus_id)
        sql.append(f"AND c.corpus_id = ${first + len(args) - 1}")
    if filters.document_id is not None:
        args.append(filters.document_id)
        sql.append(f"AND c.document_id = ${first + len(args) - 1}")
    if filters.subject is not None:
        args.append(filters.subject)
        sql.append(
            f"AND c.document_id IN (SELECT d.document_id FROM documents d "
            f"WHERE d.tenant_id = c.tenant_id AND d.subject = ${first + len(args) - 1})"
        )
    if filters.exclude_corpora:
        args.append(list(filters.exclude_corpora))
        sql.append(f"AND c.corpus_id <> ALL(${first + len(args) - 1}::bigint[])")
    if filters.exclude_provisional:
        args.append(PROVISIONAL_MARKER)
        # c is chunks in the vector channel and search_postings (no content) in the lexical one
        sql.append(
            f"AND NOT EXISTS (SELECT 1 FROM chunks k WHERE k.chunk_id = c.chunk_id "
            f"AND starts_with(k.content, ${first + len(args) - 1}))"
        )
    if filters.corpus_ids is not None:  # the caller's reach (scope and clearance)
        args.append(sorted(filters.corpus_ids))
        sql.append(f"AND c.corpus_id = ANY(${first + len(args) - 1}::bigint[])")
    return " ".join(sql), args


def _owners(tenant: str, filters: Filters) -> list[str]:
    """The tenant keys a channel reads (Filters.owners, set from the caller's reach)."""
    return list(filters.owners) or [tenant]


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
        self._reach = PostgresReach(db)
        self._bm25 = bm25
        self._ef_search = ef_search
        self._max_scan_tuples = max_scan_tuples

    async def reader(self, scope: Scope) -> Reader:
        return await self._reach.reader(scope)

    async def reach_for(self, tenant: str, reader: Reader) -> Reach:
        return await self._reach.reach_for(tenant, reader)

    async def generation(self, tenant: str, reader: Reader) -> int:
        return await self._reach.generation(tenant, reader)

    async def vector_search(
        self, tenant: str, vector: Sequence[float], filters: Filters, depth: int
    ) -> list[ChannelHit]:
        predicates, args = _filters(filters, 4)
        # The iterative scan goes on past ef_search until the depth is filled, so ef_search stays
        # the configured floor rather than the depth: at 100k chunks, ef_search 100 returned the
        # same 300 nearest as 300 did (bench/search.py latency prints the recall).
        async with self._db.transaction() as tx:
            await tx.fetchrow("set_hnsw_scan", SET_SCAN, str(self._ef_search), str(self._max_scan_tuples))
            rows = await tx.fetch(
                "vector_search",
                VECTOR_SEARCH.format(filters=predicates),
                np.asarray(vector, dtype=np.float32),
                _owners(tenant, filters),
                depth,
                *args,
            )
        return _hits(rows)

    async def lexical_search(self, tenant: str, text: str, filters: Filters, depth: int) -> list[ChannelHit]:
        bm25 = self._bm25
        terms = await self._db.fetch(
            "lexical_terms",
            LEXICAL_TERMS,
            bm25.text_config,
            text,
            _owners(tenant, filters),
            bm25.common_min_df,
            bm25.common_fraction,
        )
        if not terms:
            return []
        # Selective terms select the candidates (any of them); when every term is common, a
        # candidate must hold them all, found from the rarest one's postings.
        require_all = not any(t["selective"] for t in terms)
        driving = terms[:1] if require_all else [t for t in terms if t["selective"]]
        rest = terms[1:] if require_all else [t for t in terms if not t["selective"]]
        reach = JOIN_RATIO * max(1, sum(t["doc_freq"] for t in driving))
        joined = rest if require_all else [t for t in rest if t["doc_freq"] <= reach]
        looked_up = [t for t in rest if t not in joined]
        predicates, args = _filters(filters, 16)
        d, c, b, a = bm25.tiers
        rows = await self._db.fetch(
            "lexical_search",
            LEXICAL_SEARCH.format(filters=predicates),
            _owners(tenant, filters),
            [t["lexeme"] for t in driving],
            [t["idf"] for t in driving],
            [t["lexeme"] for t in joined],
            [t["idf"] for t in joined],
            [t["lexeme"] for t in looked_up],
            [t["idf"] for t in looked_up],
            # the bound of what the looked-up terms can add, widened against rounding
            sum(t["idf"] for t in looked_up) * (bm25.k1 + 1.0) * (1.0 + 1e-9) + 1e-9,
            bm25.k1,
            bm25.b,
            depth,
            require_all,
            terms[0]["avgdl"],
            [1.0, c / d, b / d, a / d],
            LOOKUP_WINDOW * depth,
            *args,
        )
        idf_mass = sum(t["idf"] for t in terms)
        return [
            ChannelHit(
                chunk_id=row["chunk_id"],
                document_id=row["document_id"],
                score=float(row["score"]),
                rank=rank,
                coverage=min(1.0, float(row["score"]) / idf_mass) if idf_mass > 0 else 1.0,
            )
            for rank, row in enumerate(rows, start=1)
        ]

    async def chunks(self, tenant: str, chunk_ids: Sequence[int]) -> dict[int, Chunk]:
        if not chunk_ids:
            return {}
        rows = await self._db.fetch("hydrate", HYDRATE, list(chunk_ids), tenant, PLATFORM_TENANT)
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
                extractor=row["extractor"] or "",
            )
            for row in rows
        }

    async def check_filters(self, tenant: str, filters: Filters) -> None:
        reachable = filters.corpus_ids
        if filters.corpus_id is not None:
            if reachable is not None and filters.corpus_id not in reachable:
                raise CorpusNotFound()  # outside the caller's reach: as if absent
            if await self._db.fetchval("corpus_visible", CORPUS_VISIBLE, filters.corpus_id, tenant) is None:
                raise CorpusNotFound()
        if filters.document_id is not None:
            corpus = await self._db.fetchval(
                "document_visible", DOCUMENT_VISIBLE, filters.document_id, _owners(tenant, filters)
            )
            if corpus is None or (filters.corpus_id is not None and corpus != filters.corpus_id):
                raise DocumentNotFound()
            if reachable is not None and corpus not in reachable:
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


class PostgresLlmBudget:
    """The tenant's LLM budget against its spend this month (issue 19), read per query."""

    def __init__(self, db: Database) -> None:
        self._reader = TenantSettingsReader(db, enabled_by_default=True)  # only the quotas are read
        self._db = db

    async def refusal(self, tenant: str) -> Refused | None:
        quotas = (await self._reader.settings(tenant)).quotas
        if quotas.max_llm_cost_per_month is None:
            return None
        held = await llm_cost_since(self._db, tenant, period_bounds(current_period())[0])
        return budget_refusal(quotas, held)
