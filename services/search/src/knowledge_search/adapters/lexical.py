"""The lexical channel: Okapi BM25 computed in SQL from the lexeme postings (migration 0022: one
row per tenant, lexeme and chunk, with the positions per weight tier and the chunk's BM25 length,
kept by triggers on chunks; keyed by corpus since 0053) and the per-tenant statistics of
migration 0005. A query reads only its own terms' postings (only the filtered corpora's, when
filtered), by index-only scans, never a chunk row. A term's frequency in a chunk sums its
positions' tier weights relative to body text (D), so a heading match counts more than a body
match while body text keeps BM25's saturation.

Like Elasticsearch's common-terms query, a term found in more than ``common_fraction`` of
the tenant's chunks (and in more than ``common_min_df`` of them) still scores but does not
select candidates on its own, so one very frequent word does not make the query score most
of the tenant; when every term is that frequent, a candidate must hold them all. A common term
whose postings are short enough is read whole; a much longer one is looked up per candidate,
only for the candidates its largest possible share could still lift into the channel's depth.

Two statements: the first gives each of the query's terms its idf and its role; the second
scores, and is written for the roles it was given. Each shape gets a statement of its own
because PostgreSQL plans and starts every branch of a statement, even one that a condition
skips: one statement for every shape cost a query that finds nothing 2 ms more at 100k chunks.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from knowledge_runtime.db.pool import Database

from knowledge_search.domain.retrieval import Bm25

# A term's whole postings list is read (joined) when it is at most this many times longer than
# the driving terms' lists together; a longer one is looked up per candidate (a key lookup costs
# about as much as reading this many postings in a row).
JOIN_RATIO = 4
# Candidates (a multiple of the channel depth) that at most get the looked-up terms' share.
LOOKUP_WINDOW = 2

# The query's distinct lexemes over the tenants read ($1: the tenant keys), with their document
# frequency, idf, and role; none when those tenants have no chunks. The driving terms select the
# candidates (any of them) and score them: the selective ones, or the rarest when none is (a
# candidate must then hold every term). The joined terms, whose postings are at most $6 times
# longer than the driving ones' together, are read whole and add their share to every candidate.
# The looked-up terms, far more frequent, add their share by a key lookup, only for candidates
# that can still reach the channel's depth. $2, $3: text search configuration and query text; $4,
# $5: common_min_df, common_fraction.
TERMS = """
WITH stats AS (
    SELECT greatest(sum(s.chunk_count)::float8, 1.0::float8) AS n,
           greatest(sum(s.total_length)::float8 / greatest(sum(s.chunk_count)::float8, 1.0::float8), 1.0::float8)
               AS avgdl
    FROM search_tenant_stats s WHERE s.tenant_id = ANY($1::text[])
    HAVING count(*) > 0
),
terms AS (
    SELECT q.lexeme,
           ln(1.0::float8 + (st.n - f.df + 0.5::float8) / (f.df + 0.5::float8)) AS idf,
           f.df AS doc_freq,
           f.df <= greatest($4::float8, $5::float8 * st.n) AS selective,
           st.avgdl
    FROM (SELECT DISTINCT u.lexeme FROM unnest(to_tsvector($2::regconfig, $3)) AS u) AS q
    CROSS JOIN stats st
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(l.doc_freq), 0)::float8 AS df FROM search_lexeme_stats l
        WHERE l.tenant_id = ANY($1::text[]) AND l.lexeme = q.lexeme
    ) AS f
),
picked AS (
    SELECT t.*, CASE WHEN bool_or(t.selective) OVER () THEN t.selective
                     ELSE row_number() OVER (ORDER BY t.doc_freq, t.lexeme) = 1 END AS driving,
           bool_or(t.selective) OVER () AS any_selective
    FROM terms t
)
SELECT p.lexeme, p.idf, p.doc_freq, p.avgdl, p.any_selective,
       CASE WHEN p.driving THEN 'drive'
            WHEN NOT p.any_selective
              OR p.doc_freq <= $6 * greatest(1.0::float8, sum(p.doc_freq) FILTER (WHERE p.driving) OVER ())
            THEN 'join'
            ELSE 'lookup' END AS role
FROM picked p
ORDER BY p.lexeme
"""

# The scoring statement's parameters: $1 the tenant keys; $2, $3, $4, $12 each term's lexeme,
# role, idf x (k1 + 1) and document frequency; $5, $6 the length norm's parts, k1 (1 - b) and
# k1 b / avgdl; $7 the tier weights D, C, B, A relative to D; $8 the depth; $9 the candidates that
# get the looked-up terms' share; $10 the most those terms can add; $11 how many joined terms a
# candidate must hold (0: any). roles names every one of them, so that each shape's statement
# types them all. The filters' parameters follow ({filters} and {narrowing}, FILTERS' fragments,
# never caller text; a predicate of what every read may see goes beside the tenant keys, once per
# alias c, j, o).
FIRST_FILTER_PARAMETER = 13
_ROLES = """roles AS (
    SELECT r.lexeme, r.role, r.scale, r.doc_freq, $5::float8 AS norm0, $6::float8 AS norm1,
           ($7::float8[])[4] AS wa, ($7::float8[])[3] AS wb, ($7::float8[])[2] AS wc, ($7::float8[])[1] AS wd,
           $9::int8 AS lookup_window, $10::float8 AS lookup_bound, $11::int8 AS must_hold
    FROM unnest($2::text[], $3::text[], $4::float8[], $12::float8[]) AS r (lexeme, role, scale, doc_freq)
)"""
# A posting's share, with what only depends on its term computed once (in roles); float8
# throughout: a numeric literal would make PostgreSQL score in (slow) numeric arithmetic.
_TF = "({p}.count_a * t.wa + {p}.count_b * t.wb + {p}.count_c * t.wc + {p}.count_d * t.wd)"
_BM25 = "t.scale * {tf} / ({tf} + t.norm0 + t.norm1 * {p}.bm25_length)"
_SHARE = {p: _BM25.format(tf=_TF.format(p=p), p=p) for p in "cjp"}
# The candidates, as (chunk_id, document_id, corpus_id, score). One driving term: a chunk holds
# one posting of a term, so each posting is a candidate, scored as it is read. Several: their
# postings grouped by chunk (a chunk's document and corpus are one, so by the chunk alone).
_ONE_DRIVER = f"""SELECT c.chunk_id, c.document_id, c.corpus_id, {_SHARE["c"]} AS score
    FROM roles t
    JOIN search_postings c ON c.tenant_id = ANY($1::text[]) AND c.lexeme = t.lexeme
    WHERE t.role = 'drive' {{filters}}"""
_DRIVERS = f"""SELECT c.chunk_id, min(c.document_id) AS document_id, min(c.corpus_id) AS corpus_id,
           sum({_SHARE["c"]}) AS score
    FROM roles t
    JOIN search_postings c ON c.tenant_id = ANY($1::text[]) AND c.lexeme = t.lexeme
    WHERE t.role = 'drive' {{filters}}
    GROUP BY c.chunk_id"""
# With joined terms: each candidate with its joined terms' shares. A joined term's postings are
# read whole, but scored only where they meet a candidate (a hash of the candidates).
_JOINED = f"""driven AS MATERIALIZED (
    {{driven}}
),
joined AS (
    SELECT d.chunk_id, d.document_id, d.corpus_id, d.score + coalesce(s.score, 0.0::float8) AS score
    FROM driven d
    LEFT JOIN (
        SELECT j.chunk_id, sum({_SHARE["j"]}) AS score, count(*) AS held
        FROM roles t
        JOIN search_postings j ON j.tenant_id = ANY($1::text[]) AND j.lexeme = t.lexeme {{narrowing}}
        WHERE t.role = 'join' AND j.chunk_id IN (SELECT e.chunk_id FROM driven e)
        GROUP BY j.chunk_id
    ) AS s ON s.chunk_id = d.chunk_id
    WHERE $11 = 0 OR coalesce(s.held, 0) = $11
)"""
# The looked-up terms add to the best candidates that can still reach the depth: a term adds less
# than idf x (k1 + 1), so a candidate whose score plus that bound ($10, summed over the terms)
# stays below the $8-th best score cannot. Of those, the best $9 are looked up: exact unless more
# than $9 candidates lie within the bound of that floor (many near-ties, as in random text). The
# best $8 after they add lie in the first max($8, $9) candidates: whatever lies beyond keeps a
# score no higher, and a later chunk id, than each of those; so only that many go on.
_LOOKED_UP = f"""best AS MATERIALIZED (
    SELECT k.chunk_id, k.document_id, k.corpus_id, k.score FROM joined k
    ORDER BY k.score DESC, k.chunk_id
    LIMIT greatest($8::int8, $9::int8)
),
floor AS (
    SELECT coalesce((SELECT score FROM best ORDER BY score DESC OFFSET $8 - 1 LIMIT 1), '-Infinity') AS score
),
looked_up AS (
    SELECT k.chunk_id, sum({_SHARE["p"]}) AS score
    FROM (
        SELECT k.chunk_id, k.corpus_id, k.score FROM best k, floor f
        WHERE k.score + $10::float8 >= f.score
        ORDER BY k.score DESC, k.chunk_id
        LIMIT $9
    ) AS k
    JOIN roles t ON t.role = 'lookup'
    -- a key lookup per (candidate, term), never a scan of a very common term's postings
    CROSS JOIN LATERAL (
        SELECT o.count_a, o.count_b, o.count_c, o.count_d, o.bm25_length FROM search_postings o
        WHERE o.tenant_id = ANY($1::text[]) AND o.lexeme = t.lexeme AND o.corpus_id = k.corpus_id
          AND o.chunk_id = k.chunk_id
        LIMIT 1
    ) AS p
    GROUP BY k.chunk_id
)
SELECT k.chunk_id, k.document_id, k.score + coalesce(r.score, 0.0::float8) AS score
FROM best k
LEFT JOIN looked_up r ON r.chunk_id = k.chunk_id
ORDER BY 3 DESC, k.chunk_id
LIMIT $8"""
_BEST = """SELECT k.chunk_id, k.document_id, k.score FROM joined k
ORDER BY k.score DESC, k.chunk_id
LIMIT $8"""


@dataclass(frozen=True)
class Term:
    lexeme: str
    idf: float
    doc_freq: float
    role: str  # drive, join or lookup


@functools.cache
def scoring(one_driver: bool, joins: bool, lookups: bool) -> str:
    """The scoring statement for one shape of roles: whether one driving term has postings (or
    several), whether any term is joined, whether any is looked up."""
    candidates = _ONE_DRIVER if one_driver else _DRIVERS
    joined = _JOINED.replace("{driven}", candidates) if joins else f"joined AS (\n    {candidates}\n)"
    return f"WITH {_ROLES},\n{joined},\n{_LOOKED_UP}" if lookups else f"WITH {_ROLES},\n{joined}\n{_BEST}"


async def lexical_search(
    db: Database,
    bm25: Bm25,
    owners: list[str],
    text: str,
    depth: int,
    filters: tuple[str, str, Sequence[object]],
) -> list[dict[str, Any]]:
    """The channel's best ``depth`` chunks for ``text`` over the tenant keys ``owners``;
    ``filters``: the rendered predicates on the candidates' postings (alias c), the narrowing
    ones on the joined postings (alias j) and their parameters, from ``FIRST_FILTER_PARAMETER``.
    Each: chunk_id, document_id, score and coverage."""
    rows = await db.fetch(
        "lexical_terms", TERMS, owners, bm25.text_config, text, bm25.common_min_df, bm25.common_fraction, JOIN_RATIO
    )
    terms = [Term(r["lexeme"], float(r["idf"]), float(r["doc_freq"]), r["role"]) for r in rows]
    # a driving term without postings selects nothing, so it is not read
    scored = [t for t in terms if t.role != "drive" or t.doc_freq > 0]
    drivers = sum(t.role == "drive" for t in scored)
    if not drivers:
        return []
    joins = sum(t.role == "join" for t in scored)
    lookups = [t for t in scored if t.role == "lookup"]
    avgdl = float(rows[0]["avgdl"])
    d, c, b, a = bm25.tiers
    on_candidates, on_joined, args = filters
    sql = scoring(drivers == 1, bool(joins), bool(lookups)).format(filters=on_candidates, narrowing=on_joined)
    hits = await db.fetch(
        "lexical_search",
        sql,
        owners,
        [t.lexeme for t in scored],
        [t.role for t in scored],
        [t.idf * (bm25.k1 + 1.0) for t in scored],
        bm25.k1 * (1.0 - bm25.b),
        bm25.k1 * bm25.b / avgdl,
        [1.0, c / d, b / d, a / d],
        depth,
        LOOKUP_WINDOW * depth,
        # the bound of what the looked-up terms can add, widened against rounding
        sum(t.idf for t in lookups) * (bm25.k1 + 1.0) * (1.0 + 1e-9) + 1e-9,
        0 if rows[0]["any_selective"] else joins,
        [t.doc_freq for t in scored],
        *args,
    )
    # how much of the query's idf a hit's score holds (the relevance banner and fusion's gate)
    idf_mass = sum(t.idf for t in terms)
    return [{**row, "coverage": min(1.0, float(row["score"]) / idf_mass) if idf_mass > 0 else 1.0} for row in hits]
