"""The chunk index in PostgreSQL (role knowledge_search: reads chunks, never writes them).

Vector channel: cosine distance on the HNSW index with pgvector's iterative index scans, so
a filtered query still fills its depth; the nearest rows are re-sorted exactly because the
relaxed scan may return them slightly out of order. The scan settings are the pool's session
defaults (``scan_settings``), so a query is one statement.

Lexical channel: BM25 over the lexeme postings, in ``lexical``.

Both channels admit only chunks of documents whose access list admits the caller (runtime
``db.reach.readable_by``, the SQL of ``reach.may_read_document``), judged per candidate inside the
scan by the document's primary key, so the depth, and so top_k, fills from what the caller may read.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

import numpy as np
from knowledge_runtime.auth import Scope
from knowledge_runtime.costs import RECORD_COST, CostItem, cost_record
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import PostgresReach, principals_arg, readable_by
from knowledge_runtime.filter_fields import compile_filter, document_fields
from knowledge_runtime.filters import FieldResolver, Node, Params
from knowledge_runtime.reach import Placement, Reach, Reader

from knowledge_search.adapters import lexical
from knowledge_search.domain.errors import DocumentNotFound, ModelChangeNotFound
from knowledge_search.domain.model import (
    CURRENT_SPACE,
    PROVISIONAL_MARKER,
    ChannelHit,
    Chunk,
    Filters,
    VectorSpace,
    Weights,
)
from knowledge_search.domain.retrieval import DEFAULT_EF_SEARCH, DEFAULT_MAX_SCAN_TUPLES, Bm25

# {filters} is one of FILTERS' fragments, never caller text.
_NEAREST_TAIL = """
SELECT n.chunk_id, n.document_id, greatest(0.0, least(1.0, 1.0 - n.distance)) AS score
FROM nearest n
ORDER BY n.distance, n.chunk_id
"""
# The HNSW index's walk, filtered as it goes (the iterative scan), over the chunks' own column or
# a model change's next store: its index is on embedding::vector(D), the change's model's
# dimension, so the statement names that expression ({dimension}: an int).
_HNSW = """
WITH nearest AS MATERIALIZED (
    SELECT c.chunk_id, c.document_id, {vector} <=> $1 AS distance
    FROM {source}
    WHERE c.tenant_id = ANY($2::text[]) {{filters}}
    ORDER BY {vector} <=> $1
    LIMIT $3
)"""
# Every filtered chunk's distance, then the nearest: exact, and never the index (the distances
# are computed in a CTE of their own). For a filter the walk could not fill the depth from.
_EXACT = """
WITH scored AS MATERIALIZED (
    SELECT c.chunk_id, c.document_id, {vector} <=> $1 AS distance
    FROM {source}
    WHERE c.tenant_id = ANY($2::text[]) {{filters}} AND {vector} IS NOT NULL
), nearest AS (SELECT * FROM scored ORDER BY distance LIMIT $3)"""
_CURRENT = {"vector": "c.embedding", "source": "chunks c"}
_NEXT = {
    "vector": "v.embedding::vector({dimension})",
    "source": "chunk_vectors_next v JOIN chunks c ON c.chunk_id = v.chunk_id",
}
VECTOR_SEARCH = _HNSW.format(**_CURRENT) + _NEAREST_TAIL
VECTOR_SEARCH_EXACT = _EXACT.format(**_CURRENT) + _NEAREST_TAIL
VECTOR_SEARCH_NEXT = _HNSW.format(**_NEXT) + _NEAREST_TAIL
VECTOR_SEARCH_NEXT_EXACT = _EXACT.format(**_NEXT) + _NEAREST_TAIL
# Which store search reads, the model of each, and the next store's dimension.
EMBEDDING_STORES = "SELECT current_store, chunks_model, next_model, next_dimension FROM embedding_stores"
SET_SCAN = """
SELECT set_config('hnsw.ef_search', $1, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.max_scan_tuples', $2, true),
       set_config('plan_cache_mode', 'force_custom_plan', true)
"""
SHOW_SCAN = """
SELECT current_setting('hnsw.ef_search', true) AS "hnsw.ef_search",
       current_setting('hnsw.iterative_scan', true) AS "hnsw.iterative_scan",
       current_setting('hnsw.max_scan_tuples', true) AS "hnsw.max_scan_tuples",
       current_setting('plan_cache_mode') AS plan_cache_mode
"""
# What results show, read once for the chunks that are returned (never for the channels' depth),
# under the tenant keys the channels read ($2: Filters.owners, the caller's and the platform
# tenant's when its reach holds a platform-wide corpus; the ids came from within that reach) and
# the caller's principals ($3): a list changed since the channels read is judged again here.
# A deleted document's chunks stay until its removal job deletes them: this join is
# what makes them unreachable from the delete's commit on, in every read that hydrates.
HYDRATE = f"""
SELECT c.chunk_id, c.document_id, c.corpus_id, c.section, c.page, c.content, d.filename, d.source_url, d.extractor,
       d.document_ref, c.fragment, c.passage_metadata, d.metadata AS document_metadata
FROM chunks c
JOIN documents d ON d.document_id = c.document_id AND d.deleted_at IS NULL AND {readable_by("d.principals", "$3")}
WHERE c.chunk_id = ANY($1::bigint[]) AND c.tenant_id = ANY($2::text[])
"""
DOCUMENT_VISIBLE = f"""
SELECT corpus_id FROM documents
WHERE document_id = $1 AND tenant_id = ANY($2::text[]) AND deleted_at IS NULL AND {readable_by("principals", "$3")}
"""
CORPUS_WEIGHTS = "SELECT vector_weight, lexical_weight FROM corpus_search_weights WHERE corpus_id = $1"


def _filter_fields(alias: str) -> FieldResolver:
    """A request's filter over a chunk row (alias ``alias``): its merged metadata, and for the
    built-in fields its document's row (one key lookup per candidate)."""
    return document_fields(
        f"{alias}.metadata",
        lambda column: f"(SELECT fd.{column} FROM documents fd WHERE fd.document_id = {alias}.document_id)",
    )


# How many postings the lexical statement's driving terms have (``roles`` is its terms).
_DRIVING_POSTINGS = "(SELECT coalesce(sum(r.doc_freq), 0) FROM roles r WHERE r.role = 'drive')"


def _fewer_than_driving(rows: str, cap: int | None = None) -> str:
    """SQL: whether ``rows`` (``table alias WHERE ...``) are fewer than the driving postings (and
    than ``cap``), counting them no further than that."""
    bound = _DRIVING_POSTINGS if cap is None else f"least({_DRIVING_POSTINGS}, {cap})"
    return f"(SELECT count(*) FROM (SELECT 1 FROM {rows} LIMIT {bound}::bigint) s) < {bound}"


# A posting carries no metadata, so a filter is judged on its chunk, one of two ways chosen per
# query in SQL (the planner's estimate of a term's postings is an average, far off for common
# terms, and it picked the per-posting lookup where it cost 40 ms):
# - a selective filter: the chunks it holds for are read once (the GIN index on chunks.metadata
#   serves an equality) into a hash that each posting probes;
# - a broad one: each posting's chunk is read by its key and the filter judged on it.
# Reading a chunk in a scan of the filter costs a fraction of a posting's key lookup, so the hash
# is built when the filter holds fewer chunks than the driving terms have postings: counting that
# reads at most that many, a fifth of the lookups' cost where the filter is broad. $1 is the
# lexical statement's tenant keys.
POSTINGS_FILTER = """CASE WHEN {hashed}
THEN {{a}}.chunk_id IN (SELECT fc.chunk_id FROM chunks fc WHERE fc.tenant_id = ANY($1::text[]) AND {within})
ELSE EXISTS (SELECT 1 FROM chunks fk WHERE fk.chunk_id = {{a}}.chunk_id AND {each}) END"""


def _postings_filter(condition: Node, params: Params) -> str:
    """The filter on a posting's chunk (POSTINGS_FILTER), written for alias ``{a}``."""
    few, within = (compile_filter(condition, _filter_fields("fc"), params) for _ in range(2))
    each = compile_filter(condition, _filter_fields("fk"), params)
    hashed = _fewer_than_driving(f"chunks fc WHERE fc.tenant_id = ANY($1::text[]) AND {few}")
    return POSTINGS_FILTER.format(hashed=hashed, within=within, each=each)


def _predicates(filters: Filters, first: int, *, postings: bool = False) -> tuple[list[tuple[bool, str]], list[object]]:
    """Predicates for the set filters only, so each combination gets a plan of its own: each with
    whether it narrows a postings read by its key (a corpus), written for alias ``{a}``.
    ``postings``: ``{a}`` is a posting (the lexical channel), not a chunk row."""
    sql: list[tuple[bool, str]] = []
    args: list[object] = []
    if filters.condition is not None:
        params = Params(first=first)
        if postings:
            sql.append((False, f"AND {_postings_filter(filters.condition, params)}"))
        else:  # the chunk row itself, inside the HNSW scan
            sql.append((False, f"AND {compile_filter(filters.condition, _filter_fields('{a}'), params)}"))
        args += params.values
    if filters.corpus_id is not None:
        args.append(filters.corpus_id)
        sql.append((True, f"AND {{a}}.corpus_id = ${first + len(args) - 1}"))
    if filters.document_id is not None:
        args.append(filters.document_id)
        sql.append((False, f"AND {{a}}.document_id = ${first + len(args) - 1}"))
    if filters.subject is not None:
        args.append(filters.subject)
        sql.append(
            (
                False,
                (
                    f"AND {{a}}.document_id IN (SELECT d.document_id FROM documents d "
                    f"WHERE d.tenant_id = {{a}}.tenant_id AND d.subject = ${first + len(args) - 1})"
                ),
            )
        )
    if filters.exclude_corpora:
        args.append(list(filters.exclude_corpora))
        sql.append((False, f"AND {{a}}.corpus_id <> ALL(${first + len(args) - 1}::bigint[])"))
    if filters.exclude_provisional:
        args.append(PROVISIONAL_MARKER)
        # {a} is chunks in the vector channel and search_postings (no content) in the lexical one
        sql.append(
            (
                False,
                (
                    f"AND NOT EXISTS (SELECT 1 FROM chunks k WHERE k.chunk_id = {{a}}.chunk_id "
                    f"AND starts_with(k.content, ${first + len(args) - 1}))"
                ),
            )
        )
    if filters.corpus_ids is not None:  # the caller's reach (scope and clearance)
        args.append(sorted(filters.corpus_ids))
        sql.append((True, f"AND {{a}}.corpus_id = ANY(${first + len(args) - 1}::bigint[])"))
    return sql, args


# At most this many restricted documents are read into the lexical channel's hash of refusals.
# PostgreSQL hashes a subquery only when its estimated size fits hash_mem (8 MB by default, about
# 160,000 ids): past that it would compare each posting with every refusal.
HASHED_REFUSALS = 100_000


def _access(
    filters: Filters, first: int, owners: str, *, postings: bool = False
) -> tuple[list[tuple[bool, str]], list[object]]:
    """The caller's access, on alias ``{a}`` (a chunk, or a posting: both carry document_id): its
    document's list, read by the document's primary key per candidate, must admit the caller's
    principals (``$first``). A scalar lookup, not a join: a join over the readable documents let
    the planner trade the HNSW scan for an exact one when its estimate was wrong.

    Most tenants restrict no document, and then every candidate is readable: whether the owners
    (``owners``, the statement's tenant keys) restrict any is one lookup of a partial index, read
    once per statement (an InitPlan) in the statement's own snapshot, so the per-candidate lookup
    runs only where a list can refuse. On a 1% metadata filter that lookup was a third of the
    exact scan's time (bench/search.py latency).

    The lexical channel's candidates are postings, tens of thousands for a term in a few percent
    of a million chunks, and a lookup each cost it 120 ms at the 95th percentile. There the
    documents that refuse the caller are read once into a hash that each posting probes, when the
    restricted documents are fewer than the driving terms' postings and than HASHED_REFUSALS
    (counting them stops there, as in POSTINGS_FILTER); otherwise each posting's document is
    looked up as above."""
    listed = "(SELECT ad.principals FROM documents ad WHERE ad.document_id = {a}.document_id)"
    restricted = f"documents rd WHERE rd.tenant_id = ANY({owners}::text[]) AND cardinality(rd.principals) > 0"
    restricting = f"EXISTS (SELECT 1 FROM {restricted})"
    each = readable_by(listed, f"${first}")
    if postings:
        few = _fewer_than_driving(restricted, HASHED_REFUSALS)
        refused = f"SELECT rd.document_id FROM {restricted} AND NOT {readable_by('rd.principals', f'${first}')}"
        each = f"CASE WHEN {few} THEN {{a}}.document_id NOT IN ({refused}) ELSE {each} END"
    return [(False, f"AND (NOT {restricting} OR {each})")], [principals_arg(filters.principals)]


def _render(predicates: list[tuple[bool, str]], alias: str, *, narrowing_only: bool = False) -> str:
    return " ".join(p.replace("{a}", alias) for narrowing, p in predicates if narrowing or not narrowing_only)


def _filters(filters: Filters, first: int) -> tuple[str, list[object]]:
    """Every set filter's predicate on alias c, and their parameters from ``$first``."""
    predicates, args = _predicates(filters, first)
    return _render(predicates, "c"), args


def _channel_predicates(
    filters: Filters, first: int, owners: str, *, postings: bool = False, access: bool = True
) -> tuple[list[tuple[bool, str]], list[object]]:
    """What a channel's candidates must meet: the set filters and the caller's access (``access``
    False only for bench/search_latency.py's baseline, which times the channels without it);
    ``owners`` is the statement's parameter of tenant keys."""
    predicates, args = _predicates(filters, first, postings=postings)
    if access:
        more, extra = _access(filters, first + len(args), owners, postings=postings)
        predicates, args = predicates + more, args + extra
    return predicates, args


def scan_settings(ef_search: int = DEFAULT_EF_SEARCH, max_scan_tuples: int = DEFAULT_MAX_SCAN_TUPLES) -> dict[str, str]:
    """The HNSW scan's settings as session defaults of the search pool's connections
    (``Database.connect(server_settings=...)``): the vector channel is then one statement, not a
    transaction of four round trips (BEGIN, SET LOCAL, the query, COMMIT)."""
    return {
        "hnsw.ef_search": str(ef_search),
        "hnsw.iterative_scan": "relaxed_order",
        "hnsw.max_scan_tuples": str(max_scan_tuples),
        # Every channel statement is planned for its own values: a generic plan (PostgreSQL's
        # choice after five runs of a prepared statement) judges a filter and a term's postings by
        # averages, and on a broad metadata filter it took 2 s where the query's own plan took 40 ms.
        "plan_cache_mode": "force_custom_plan",
    }


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
        self._session_scan: bool | None = None  # whether the pool's sessions carry scan_settings()
        self._access = True  # the access-list predicate in both channels (bench: the baseline without it)

    async def reader(self, scope: Scope) -> Reader:
        return await self._reach.reader(scope)

    async def reach_for(self, tenant: str, reader: Reader) -> Reach:
        return await self._reach.reach_for(tenant, reader)

    async def generation(self, tenant: str, reader: Reader) -> int:
        return await self._reach.generation(tenant, reader)

    async def keyed(self, tenant: str, key: str) -> list[Placement]:
        return await self._reach.keyed(tenant, key)

    async def vector_search(
        self, tenant: str, vector: Sequence[float], filters: Filters, depth: int, space: VectorSpace = CURRENT_SPACE
    ) -> list[ChannelHit]:
        predicates, args = _channel_predicates(filters, 4, "$2", access=self._access)
        rendered = {"filters": _render(predicates, "c"), "dimension": int(space.dimension or 0)}
        nearest, exact = (
            (VECTOR_SEARCH_NEXT, VECTOR_SEARCH_NEXT_EXACT)
            if space.store == "next"
            else (VECTOR_SEARCH, VECTOR_SEARCH_EXACT)
        )
        walk = nearest.format(**rendered)
        query = np.asarray(vector, dtype=np.float32)
        owners = _owners(tenant, filters)
        # The iterative scan goes on past ef_search until the depth is filled, so ef_search stays
        # the configured floor rather than the depth: at 100k chunks, ef_search 100 returned the
        # same 300 nearest as 300 did (bench/search.py latency prints the recall).
        if self._session_scan is None:
            shown = await self._db.fetchrow("show_hnsw_scan", SHOW_SCAN)
            wanted = scan_settings(self._ef_search, self._max_scan_tuples)
            self._session_scan = shown is not None and dict(shown.items()) == wanted
        if self._session_scan:
            rows = await self._db.fetch("vector_search", walk, query, owners, depth, *args)
        else:
            async with self._db.transaction() as tx:  # a pool opened without scan_settings()
                await tx.fetchrow("set_hnsw_scan", SET_SCAN, str(self._ef_search), str(self._max_scan_tuples))
                rows = await tx.fetch("vector_search", walk, query, owners, depth, *args)
        if len(rows) < depth:
            # The walk stops after max_scan_tuples whatever it found: a filter that keeps a small
            # share of a large table (a small corpus among a million chunks) can leave it short,
            # even empty. Such a filter keeps few chunks, so every one of them is measured
            # instead; when the filter keeps fewer chunks than the depth, this is the answer too.
            rows = await self._db.fetch("vector_search_exact", exact.format(**rendered), query, owners, depth, *args)
        return _hits(rows)

    async def lexical_search(self, tenant: str, text: str, filters: Filters, depth: int) -> list[ChannelHit]:
        predicates, args = _channel_predicates(
            filters, lexical.FIRST_FILTER_PARAMETER, "$1", postings=True, access=self._access
        )
        rendered = (_render(predicates, "c"), _render(predicates, "j", narrowing_only=True), args)
        return _hits(
            await lexical.lexical_search(self._db, self._bm25, _owners(tenant, filters), text, depth, rendered)
        )

    async def chunks(
        self, tenant: str, chunk_ids: Sequence[int], owners: Sequence[str] = (), principals: Collection[str] = ()
    ) -> dict[int, Chunk]:
        if not chunk_ids:
            return {}
        rows = await self._db.fetch(
            "hydrate", HYDRATE, list(chunk_ids), list(owners) or [tenant], principals_arg(principals)
        )
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
                document_ref=row["document_ref"] or "",
                fragment=row["fragment"] or "",
                metadata=json.loads(row["passage_metadata"]),
                document_metadata=json.loads(row["document_metadata"]),
            )
            for row in rows
        }

    async def check_filters(self, tenant: str, filters: Filters) -> None:
        # The filter's fields and operators, before anything is embedded (FilterInvalid).
        compile_filter(filters.condition, _filter_fields("c"), Params())
        # A corpus filter was checked against the caller's reach already (usecases.within).
        reachable = filters.corpus_ids
        if filters.document_id is not None:
            corpus = await self._db.fetchval(
                "document_visible",
                DOCUMENT_VISIBLE,
                filters.document_id,
                _owners(tenant, filters),
                principals_arg(filters.principals),
            )
            if corpus is None or (filters.corpus_id is not None and corpus != filters.corpus_id):
                raise DocumentNotFound(str(filters.document_id))
            if reachable is not None and corpus not in reachable:
                raise DocumentNotFound(str(filters.document_id))

    async def corpus_weights(self, corpus_id: int) -> Weights:
        row = await self._db.fetchrow("corpus_weights", CORPUS_WEIGHTS, corpus_id)
        if row is None:
            return Weights()
        return Weights(vector=row["vector_weight"], lexical=row["lexical_weight"])


class PostgresCostLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, tenant: str, item: CostItem) -> None:
        await self._db.execute("record_cost", RECORD_COST, *cost_record(tenant, item))


class PostgresVectorSpaces:
    """Which vectors search reads (``embedding_stores``, ingest's during a model change), read per
    search: a swap commits in one transaction, and the next search reads the other store."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def space(self, candidate: bool) -> VectorSpace:
        row = await self._db.fetchrow("embedding_stores", EMBEDDING_STORES)
        if row is None:  # a database before the model-change migration has one store
            return CURRENT_SPACE
        store = row["current_store"]
        if candidate:
            store = "next" if store == "chunks" else "chunks"
        model = row["chunks_model"] if store == "chunks" else row["next_model"]
        if model is None:
            raise ModelChangeNotFound()
        if store == "chunks":
            return VectorSpace(store="chunks", model=model)
        return VectorSpace(store="next", model=model, dimension=row["next_dimension"])
