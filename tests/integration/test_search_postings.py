"""Migration 0022: the lexeme postings follow every write to chunks, and the lexical channel that
reads them scores exactly the BM25 of the chunks' own tsvectors (recomputed here in Python)."""

from __future__ import annotations

import json
import math

import asyncpg
import numpy as np
import pytest
from knowledge_runtime.db.pool import Database
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.domain.model import Filters
from knowledge_search.domain.retrieval import Bm25
from pgvector.asyncpg import register_vector

from tests.support.db import TEST_DIMENSION

pytestmark = pytest.mark.integration
TENANT = "postings-tenant"
POSTINGS = """
SELECT lexeme, chunk_id, corpus_id, document_id, count_a, count_b, count_c, count_d, bm25_length
FROM search_postings WHERE tenant_id = $1 ORDER BY lexeme, chunk_id
"""
# The postings recomputed from the chunks' own lexemes.
TRUTH = """
SELECT u.lexeme, c.chunk_id, c.corpus_id, c.document_id,
       (SELECT count(*) FROM unnest(u.weights) w WHERE w = 'A') AS count_a,
       (SELECT count(*) FROM unnest(u.weights) w WHERE w = 'B') AS count_b,
       (SELECT count(*) FROM unnest(u.weights) w WHERE w = 'C') AS count_c,
       greatest((SELECT count(*) FROM unnest(u.weights) w WHERE w = 'D'), 1 - least(cardinality(u.weights), 1))
           AS count_d,
       search_bm25_length(c.lexemes) AS bm25_length
FROM chunks c, unnest(c.lexemes) u WHERE c.tenant_id = $1 ORDER BY 1, 2
"""


def _rows(records) -> list[tuple]:
    return [tuple(r) for r in records]


async def _setup(admin: asyncpg.Connection, tenant: str, corpora: int = 1) -> tuple[list[int], list[int]]:
    await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
    corpus_ids, document_ids = [], []
    for i in range(corpora):
        corpus = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", tenant, f"c{i}"
        )
        corpus_ids.append(corpus)
        document_ids.append(
            await admin.fetchval(
                "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, 'f') RETURNING document_id",
                tenant,
                corpus,
            )
        )
    return corpus_ids, document_ids


async def test_postings_follow_inserts_updates_moves_deletes_and_rollbacks(migrated_pg):
    admin = await asyncpg.connect(migrated_pg.url())
    ingest = await asyncpg.connect(migrated_pg.url(user="knowledge_ingest"))
    search = await asyncpg.connect(migrated_pg.url(user="knowledge_search"))
    await register_vector(ingest)
    try:
        (corpus, other), (document, other_document) = await _setup(admin, TENANT, corpora=2)
        insert = (
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, content, embedding, metadata) "
            "SELECT $1, $2, $3, i, 'Cats', 'the cats sat on ' || repeat('mats ', i + 1), $4, '{\"document_id\": 1}' "
            "FROM generate_series($5::int, $6::int) AS i"
        )
        vector = np.ones(TEST_DIMENSION, dtype=np.float32)
        await ingest.execute(insert, TENANT, corpus, document, vector, 0, 4)
        postings = _rows(await admin.fetch(POSTINGS, TENANT))
        assert postings == _rows(await admin.fetch(TRUTH, TENANT))
        # "cat" is in the heading (A) once and in the body (D) once; "mat" i + 1 times in the body.
        cat = [p for p in postings if p[0] == "cat"]
        assert len(cat) == 5 and all(p[4:8] == (1, 0, 0, 1) for p in cat)
        assert sorted(p[7] for p in postings if p[0] == "mat") == [1, 2, 3, 4, 5]

        transaction = ingest.transaction()  # a rolled-back write leaves no posting behind
        await transaction.start()
        await ingest.execute(insert, TENANT, corpus, document, vector, 5, 9)
        await transaction.rollback()
        assert _rows(await admin.fetch(POSTINGS, TENANT)) == postings

        # A new text, a corpus move and a delete each rewrite exactly the postings they change.
        await ingest.execute(
            "UPDATE chunks SET section = '', content = 'dogs bark' WHERE chunk_index = 0 AND tenant_id = $1", TENANT
        )
        await ingest.execute(
            "UPDATE chunks SET corpus_id = $2, document_id = $3 WHERE chunk_index = 1 AND tenant_id = $1",
            TENANT,
            other,
            other_document,
        )
        await ingest.execute("UPDATE chunks SET page = 3 WHERE tenant_id = $1", TENANT)  # changes no posting
        await ingest.execute("DELETE FROM chunks WHERE chunk_index = 2 AND tenant_id = $1", TENANT)
        postings = _rows(await admin.fetch(POSTINGS, TENANT))
        assert postings == _rows(await admin.fetch(TRUTH, TENANT))
        assert {p[0] for p in postings} >= {"dog", "bark"} and {p[2] for p in postings} == {corpus, other}

        # Only the database writes postings; search reads them.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await ingest.execute("DELETE FROM search_postings")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await search.execute("DELETE FROM search_postings")
        assert await search.fetchval("SELECT count(*) FROM search_postings WHERE tenant_id = $1", TENANT) > 0

        await ingest.execute("DELETE FROM chunks WHERE tenant_id = $1", TENANT)
        assert await admin.fetch(POSTINGS, TENANT) == []
    finally:
        for connection in (admin, ingest, search):
            await connection.close()


def _reference(chunks: list[dict], terms: list[str], bm25: Bm25, corpus: int | None, depth: int):
    """Okapi BM25 of the chunks' tsvectors, by the rules the channel documents, in plain Python."""
    n = len(chunks)
    avgdl = max(sum(c["length"] for c in chunks) / max(n, 1), 1.0)
    d, c_, b_, a = bm25.tiers
    factor = {"A": a / d, "B": b_ / d, "C": c_ / d, "D": 1.0}
    df = {t: sum(t in c["terms"] for c in chunks) for t in terms}
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    selective = [t for t in terms if df[t] <= max(bm25.common_min_df, bm25.common_fraction * n)]
    scored = []
    for chunk in chunks:
        if corpus is not None and chunk["corpus"] != corpus:
            continue
        held = [t for t in terms if t in chunk["terms"]]
        if not (any(t in held for t in selective) if selective else len(held) == len(terms)):
            continue
        score = 0.0
        for t in held:
            tf = sum(factor[w] for w in chunk["terms"][t]) or 1.0
            score += idf[t] * tf * (bm25.k1 + 1) / (tf + bm25.k1 * (1 - bm25.b + bm25.b * chunk["length"] / avgdl))
        scored.append((-score, chunk["id"]))
    return [(chunk_id, -negative) for negative, chunk_id in sorted(scored)[:depth]]


@pytest.fixture
async def connected(migrated_pg):
    """The admin's and ingest's connections and the search role's pool."""
    admin = await asyncpg.connect(migrated_pg.url())
    ingest = await asyncpg.connect(migrated_pg.url(user="knowledge_ingest"))
    await register_vector(ingest)
    db = await Database.connect(migrated_pg.url(user="knowledge_search"), max_size=2)
    try:
        yield admin, ingest, db
    finally:
        await db.close()
        await admin.close()
        await ingest.close()


async def test_lexical_channel_scores_exact_bm25_on_every_path(connected):
    """Driving (selective) terms, joined (common, short lists) and looked-up (very common) terms,
    every term common (all must be held), an unknown term, and a corpus filter."""
    tenant = "postings-bm25"
    admin, ingest, db = connected
    corpora, documents = await _setup(admin, tenant, corpora=2)
    rows = []
    for i in range(400):
        words = [f"filler{i % 97}"] * (i % 5 + 1) + ["apple"] * (i % 3 + 1) * (i % 8 != 0)
        words += ["zebra"] * (i % 50 == 0 or i % 47 == 0) + ["quill"] * (1 + i % 2) * (i % 13 == 0)
        words += ["yak"] * (1 + i % 3) * (i % 25 == 0)
        section = "Zebra notes" if i % 100 == 0 else ("Quill" if i % 39 == 0 else "")
        rows.append((tenant, corpora[i % 2], documents[i % 2], i, section, " ".join(words or ["empty"])))
    await ingest.executemany(
        "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, content, embedding, metadata)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, '{\"document_id\": 1}')",
        [(*r, np.ones(TEST_DIMENSION, dtype=np.float32)) for r in rows],
    )
    truth = await admin.fetch(
        "SELECT c.chunk_id, c.corpus_id, c.bm25_length, u.lexeme, u.weights FROM chunks c, unnest(c.lexemes) u "
        "WHERE c.tenant_id = $1",
        tenant,
    )
    chunks: dict[int, dict] = {}
    for r in truth:
        chunk = chunks.setdefault(
            r["chunk_id"], {"id": r["chunk_id"], "corpus": r["corpus_id"], "length": r["bm25_length"], "terms": {}}
        )
        chunk["terms"][r["lexeme"]] = list(r["weights"])
    # A cut-off of 20 chunks: zebra (17) and yak (16, eight of them zebra's too) are selective;
    # quill (31) is common and joined whole (at most 4 x zebra's postings); apple (350) is
    # common and looked up per candidate.
    bm25 = Bm25(common_fraction=0.05, common_min_df=0)
    index = PostgresChunkIndex(db, bm25=bm25)
    # (query, filters, the one corpus they leave or None)
    cases = [
        ("zebra quill apple", Filters(), None),
        ("zebras and quills, apples", Filters(corpus_id=corpora[1]), corpora[1]),
        ("quill apple", Filters(), None),  # every term common: candidates hold both
        ("apple", Filters(corpus_id=corpora[0]), corpora[0]),
        ("zebra unheardof", Filters(), None),
        # one driving term with postings, nothing joined: each posting is a candidate as read
        ("zebra apple", Filters(), None),
        ("yak apple unheardof", Filters(corpus_id=corpora[0]), corpora[0]),
        # two driving terms: a chunk holding both is one candidate with both shares
        ("zebra yak", Filters(), None),
        ("zebra yak apple", Filters(), None),
        ("zebra yak quill apple", Filters(corpus_id=corpora[1]), corpora[1]),  # and a joined term
        ("unheardof", Filters(), None),
        # the caller's reach and the housekeeping exclusion narrow the postings read by corpus too
        ("zebra quill apple", Filters(corpus_ids=frozenset({corpora[0]})), corpora[0]),
        ("quill apple", Filters(corpus_id=corpora[1], corpus_ids=frozenset(corpora)), corpora[1]),
        ("zebra quill apple", Filters(exclude_corpora=(corpora[1],)), corpora[0]),
    ]
    for text, filters, corpus in cases:
        terms = [
            r["lexeme"]
            for r in await admin.fetch("SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', $1))", text)
        ]
        n = len(chunks)
        idf_mass = sum(
            math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for df in (sum(t in c["terms"] for c in chunks.values()) for t in terms)
        )
        for depth in (300, 10):
            got = await index.lexical_search(tenant, text, filters, depth)
            want = _reference(list(chunks.values()), terms, bm25, corpus, depth)
            assert [h.chunk_id for h in got] == [chunk_id for chunk_id, _ in want], (text, filters, depth)
            assert [h.score for h in got] == pytest.approx([score for _, score in want]), (text, filters, depth)
            assert [h.coverage for h in got] == pytest.approx([min(1.0, score / idf_mass) for _, score in want])
    assert len(await index.lexical_search(tenant, "quill apple", Filters(), 300)) == 31 - 4  # not i % 8 == 0


class _Capturing:
    """The search pool, keeping the statements the channel sends (to EXPLAIN them)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sent: dict[str, tuple[str, tuple]] = {}

    def __getattr__(self, name):
        return getattr(self.db, name)

    async def fetch(self, name, sql, *args):
        self.sent[name] = (sql, args)
        return await self.db.fetch(name, sql, *args)


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


async def test_a_corpus_filter_reads_only_that_corpus_postings(connected):
    """Migration 0053 keys the postings by corpus: the driving and the joined terms' reads take the
    corpus (or the caller's reach) as part of the index condition, so no other corpus's posting is
    read and dropped afterwards."""
    tenant = "postings-by-corpus"
    admin, ingest, db = connected
    corpora, documents = await _setup(admin, tenant, corpora=3)
    await ingest.executemany(
        "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata)"
        " VALUES ($1, $2, $3, $4, $5, $6, '{\"document_id\": 1}')",
        [
            (tenant, corpora[i % 3], documents[i % 3], i, f"zebra {'quill ' * (i % 4 == 0)}apple filler{i}", v)
            for i, v in enumerate([np.ones(TEST_DIMENSION, dtype=np.float32)] * 90)
        ],
    )
    captured = _Capturing(db)
    # zebra in every chunk, quill in a quarter: both common, so quill (the rarer) drives, zebra is joined
    index = PostgresChunkIndex(captured, bm25=Bm25(common_fraction=0.2, common_min_df=0))  # type: ignore[arg-type]
    for filters in (Filters(corpus_id=corpora[1]), Filters(corpus_ids=frozenset({corpora[1], corpora[2]}))):
        hits = await index.lexical_search(tenant, "quill zebra", filters, 300)
        assert hits and {h.document_id for h in hits} <= {documents[1], documents[2]}
        sql, args = captured.sent["lexical_search"]
        await admin.execute("SET enable_seqscan = off")  # a tiny table: read it as a large one is
        plan = json.loads(await admin.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args))[0]["Plan"]
        reads = [n for n in _nodes(plan) if n.get("Relation Name") == "search_postings" and n["Alias"] in "cj"]
        assert {n["Alias"] for n in reads} == {"c", "j"}
        for node in reads:
            assert "corpus_id" in node["Index Cond"], node
            assert node.get("Rows Removed by Filter", 0) == 0, node


async def test_access_lists_refuse_the_same_postings_whether_hashed_or_looked_up(connected):
    """The lexical channel judges a posting's document either by a hash of the documents that
    refuse the caller (restricted documents fewer than the driving postings) or by a lookup per
    posting (otherwise): each gives the unrestricted results less the refused documents' chunks."""
    tenant = "postings-access"
    admin, ingest, db = connected
    await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
    corpus = await admin.fetchval("INSERT INTO corpora (tenant_id, name) VALUES ($1, 'c') RETURNING corpus_id", tenant)
    documents = [
        await admin.fetchval(
            "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, 'f') RETURNING document_id",
            tenant,
            corpus,
        )
        for _ in range(8)
    ]
    rows = [
        (tenant, corpus, documents[i % 8], i, "harbour " * (1 + i % 3) + ("lantern" if i in (3, 8) else ""))
        for i in range(48)
    ]
    await ingest.executemany(
        "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata)"
        " VALUES ($1, $2, $3, $4, $5, $6, '{\"document_id\": 1}')",
        [(*r, np.ones(TEST_DIMENSION, dtype=np.float32)) for r in rows],
    )
    chunk_document = dict(await admin.fetch("SELECT chunk_id, document_id FROM chunks WHERE tenant_id = $1", tenant))
    captured = _Capturing(db)
    index = PostgresChunkIndex(captured, bm25=Bm25(common_fraction=1.0, common_min_df=0))  # type: ignore[arg-type]
    caller = Filters(principals=frozenset({"group:a"}))
    open_results = {text: await index.lexical_search(tenant, text, caller, 300) for text in ("harbour", "lantern")}
    # four documents restricted, one of them (documents[3]: chunk 3 holds "lantern") to another group
    await admin.execute("UPDATE documents SET principals = '{group:a}' WHERE document_id = ANY($1)", documents[:3])
    await admin.execute("UPDATE documents SET principals = '{group:b}' WHERE document_id = $1", documents[3])
    # harbour: 48 driving postings against 4 restricted documents (the hash); lantern: 2 (lookups)
    for text, hashed in (("harbour", True), ("lantern", False)):
        got = await index.lexical_search(tenant, text, caller, 300)
        want = [h for h in open_results[text] if chunk_document[h.chunk_id] != documents[3]]
        assert len(want) < len(open_results[text])
        assert [(h.chunk_id, h.score) for h in got] == [(h.chunk_id, h.score) for h in want], text
        sql, args = captured.sent["lexical_search"]
        plan = "\n".join(r[0] for r in await admin.fetch("EXPLAIN (ANALYZE) " + sql, *args))
        lookup = next(line for line in plan.splitlines() if "documents_pkey on documents ad" in line)
        assert ("never executed" in lookup) is hashed, plan
