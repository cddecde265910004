"""The filter language's SQL on real PostgreSQL: each operator selects exactly the rows it says,
typed as JSON types them, and hostile values stay values."""

from __future__ import annotations

import json

import pytest
from knowledge_runtime.filters import Column, Kind, Params, compile_sql, parse

pytestmark = pytest.mark.integration

ROWS = [
    (1, "projects/42/a.pdf", "SEARCHABLE", "2026-01-05T10:00:00Z", {"page": 3, "tags": ["hr", "pay"], "owner": "ana"}),
    (2, "projects/42/b.pdf", "FAILED", "2026-02-05T10:00:00Z", {"page": 12, "tags": ["it"], "year": 2024}),
    (3, "projects/7/c.pdf", "SEARCHABLE", "2025-12-31T23:00:00Z", {"page": "3", "due": "2026-03-01T00:00:00Z"}),
    (4, "projects/4_2/d.pdf", "SEARCHABLE", "2026-03-01T00:00:00Z", {"tags": "hr", "year": 2025, "draft": True}),
    (5, "x'); DROP TABLE t; --", "QUEUED", "2026-04-01T00:00:00Z", {"due": "2025-01-01T00:00:00+02:00"}),
]


def resolve(name: tuple[str, ...]) -> Column | None:
    if len(name) == 2 and name[0] == "metadata":
        return Column("t.metadata", Kind.JSON, key=name[1])
    return {
        ("document_ref",): Column("t.document_ref", Kind.TEXT),
        ("state",): Column("t.state", Kind.TEXT),
        ("create_time",): Column("t.create_time", Kind.TIMESTAMP),
    }.get(name)


@pytest.fixture
async def table(admin):
    await admin.execute(
        "CREATE TEMP TABLE t (id int, document_ref text, state text, create_time timestamptz, metadata jsonb)"
    )
    await admin.executemany(
        "INSERT INTO t VALUES ($1, $2, $3, $4::text::timestamptz, $5::jsonb)",
        [(i, ref, state, created, json.dumps(meta)) for i, ref, state, created, meta in ROWS],
    )
    yield admin
    await admin.execute("DROP TABLE t")


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("", {1, 2, 3, 4, 5}),
        ("metadata.page = 3", {1}),  # a number: the string "3" of row 3 is not it
        ('metadata.page = "3"', {3}),
        ("metadata.page >= 3", {1, 2}),
        ("metadata.page > 3 AND metadata.page <= 12", {2}),
        ('metadata.tags:"hr"', {1, 4}),  # a list holding it, or the value itself
        ('metadata.tags = "hr"', {1, 4}),
        ("metadata.year IN (2024, 2025)", {2, 4}),
        ("metadata.owner:*", {1}),
        ("metadata.draft = true", {4}),
        ("NOT metadata.draft = true", {1, 2, 3, 5}),
        ('metadata.due < "2026-01-01T00:00:00Z"', {5}),
        ('metadata.due > "2026-02-28T22:00:00-01:00"', {3}),
        ('document_ref = "projects/42/*"', {1, 2}),
        ('document_ref = "projects/4_2/*"', {4}),  # _ is a character, not LIKE's wildcard
        ('state IN ("FAILED", "QUEUED")', {2, 5}),
        ('state != "SEARCHABLE"', {2, 5}),
        ('create_time >= "2026-01-01T00:00:00Z" AND create_time < "2026-03-01T00:00:00Z"', {1, 2}),
        ('create_time = "2026-03-01T01:00:00+01:00"', {4}),
        ('state = "SEARCHABLE" metadata.page = 3 OR metadata.year = 2025', {1, 4}),
        ('document_ref = "x\'); DROP TABLE t; --"', {5}),
        ('metadata.owner = "\'; DELETE FROM t; --"', set()),
    ],
)
async def test_each_filter_selects_exactly_its_rows(table, text, ids):
    params = Params()
    where = compile_sql(parse(text), resolve, params)
    rows = await table.fetch(f"SELECT id FROM t WHERE {where}", *params.values)
    assert {r["id"] for r in rows} == ids
    assert await table.fetchval("SELECT count(*) FROM t") == len(ROWS)


async def test_an_equality_filter_is_served_by_a_gin_index(table):
    await table.execute("CREATE INDEX ON t USING gin (metadata jsonb_path_ops)")
    params = Params()
    where = compile_sql(parse('metadata.tags:"hr"'), resolve, params)
    await table.execute("SET enable_seqscan = off")
    try:
        plan = "\n".join(r[0] for r in await table.fetch(f"EXPLAIN SELECT id FROM t WHERE {where}", *params.values))
    finally:
        await table.execute("RESET enable_seqscan")
    assert "Bitmap Index Scan" in plan or "Index Scan" in plan, plan
