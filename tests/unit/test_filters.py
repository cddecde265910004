"""The filter language (AIP-160): what it reads, what it refuses and where, and the SQL it binds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from knowledge_runtime.filters import (
    MAX_FILTER_CHARS,
    MAX_TERMS,
    AllOf,
    AnyOf,
    Column,
    FilterError,
    Kind,
    Not,
    Op,
    Params,
    Restriction,
    compile_sql,
    parse,
)


def test_restrictions_and_their_values():
    assert parse('metadata.file_id = "f-42"') == Restriction(("metadata", "file_id"), Op.EQ, ("f-42",), 1)
    assert parse("metadata.page >= 3").values == (3.0,)
    assert parse("metadata.score < -0.5").values == (-0.5,)
    assert parse("metadata.draft = false").values == (False,)
    assert parse("metadata.owner:*").op is Op.EXISTS
    assert parse('metadata.tags:"hr"') == Restriction(("metadata", "tags"), Op.HAS, ("hr",), 1)
    assert parse('state IN ("FAILED", "CANCELLED")').values == ("FAILED", "CANCELLED")
    assert parse('metadata.`file-id` = "x"').name == ("metadata", "file-id")
    assert parse('metadata.quote = "say \\"hi\\""').values == ('say "hi"',)
    assert parse("") is None and parse("   ") is None


def test_and_or_not_with_aip160_precedence():
    a = Restriction(("a",), Op.EQ, (1.0,), 1)
    # OR binds tighter than AND (AIP-160).
    assert parse("a = 1 AND b = 2 OR c = 3") == AllOf(
        (a, AnyOf((Restriction(("b",), Op.EQ, (2.0,), 11), Restriction(("c",), Op.EQ, (3.0,), 20))))
    )
    # Side by side means AND.
    assert isinstance(parse("a = 1 b = 2"), AllOf)
    assert parse("NOT a = 1") == Not(Restriction(("a",), Op.EQ, (1.0,), 5))
    assert parse("-a = 1") == Not(Restriction(("a",), Op.EQ, (1.0,), 2))
    assert isinstance(parse("(a = 1 OR b = 2) AND NOT (c = 3)"), AllOf)
    # Keywords are whole words: these are field names.
    assert parse("ANDROID = 1").name == ("ANDROID",)
    assert parse("NOTE = true").name == ("NOTE",)


@pytest.mark.parametrize(
    ("text", "column", "says"),
    [
        ("a = ", 3, "ends too early"),
        ("a == 1", 4, "unexpected '='"),
        ("(a = 1", 6, "ends too early"),
        ("a ~ 1", 3, "unexpected character '~'"),
        ('a = "open', 5, "unexpected character"),
        ("a IN ()", 7, "unexpected ')'"),
        ("a = 1e999", 5, "not a finite number"),
    ],
)
def test_a_malformed_filter_is_refused_at_its_position(text, column, says):
    with pytest.raises(FilterError) as caught:
        parse(text)
    assert caught.value.column == column
    assert says in str(caught.value) and f"column {column}" in str(caught.value)


def test_size_limits():
    with pytest.raises(FilterError, match="characters"):
        parse("a = 1 " * (MAX_FILTER_CHARS // 6 + 1))
    with pytest.raises(FilterError, match="restrictions"):
        parse(" AND ".join(f"a = {i}" for i in range(MAX_TERMS + 1)))
    with pytest.raises(FilterError, match="IN takes at most"):
        parse("a IN (" + ", ".join(str(i) for i in range(101)) + ")")
    # Deep nesting is a refusal, never a crash of the parser.
    for deep in ("NOT " * 995 + "a = 1", "-" * 3000 + "a = 1", "(a = 1 OR " * 300 + "b = 2" + ")" * 300):
        with pytest.raises(FilterError, match="levels deep"):
            parse(deep)
    assert parse("(" * 1990 + "a = 1" + ")" * 1990) == Restriction(("a",), Op.EQ, (1.0,), 1991)
    assert parse("NOT " * 10 + "a = 1") is not None


def resolve(name: tuple[str, ...]) -> Column | None:
    if len(name) == 2 and name[0] == "metadata":
        return Column("c.metadata", Kind.JSON, key=name[1])
    return {
        ("state",): Column("d.state", Kind.TEXT, choices=frozenset({"FAILED", "SEARCHABLE"})),
        ("document_ref",): Column("d.document_ref", Kind.TEXT),
        ("create_time",): Column("d.create_time", Kind.TIMESTAMP),
    }.get(name)


def test_values_are_bound_never_spliced():
    params = Params(["query"], first=1)
    hostile = "x'); DROP TABLE chunks; --"
    sql = compile_sql(parse(f'metadata.k = "{hostile}" AND document_ref = "{hostile}"'), resolve, params)
    assert "DROP" not in sql and "$2" in sql and "$3" in sql
    assert params.values[0] == "query"
    assert params.values[1] == '$."k" ? (@ == "x\'); DROP TABLE chunks; --")'
    assert params.values[2] == hostile


def test_the_sql_of_each_kind():
    params = Params()
    sql = compile_sql(
        parse(
            'document_ref = "p/4_2/*" AND state != "FAILED" AND create_time >= "2026-01-01T01:00:00+01:00" '
            "AND metadata.year IN (2024, 2025) AND metadata.owner:* AND NOT metadata.page > 3"
        ),
        resolve,
        params,
    )
    assert sql == (
        "((d.document_ref LIKE $1) AND (d.state IS DISTINCT FROM $2) AND (d.create_time >= $3::timestamptz) "
        "AND (c.metadata @? $4::jsonpath) AND (c.metadata ? $5) AND NOT coalesce((c.metadata @? $6::jsonpath), FALSE))"
    )
    assert params.values == [
        "p/4\\_2/%",
        "FAILED",
        datetime(2026, 1, 1, 0, 0, tzinfo=UTC),
        '$."year" ? (@ == 2024 || @ == 2025)',
        "owner",
        '$."page" ? (@ > 3)',
    ]
    assert compile_sql(None, resolve, Params()) == "TRUE"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nope = 1", "unknown field 'nope'"),
        ("state = 1", "compared with a string"),
        ('state = "DONE"', "one of FAILED, SEARCHABLE"),
        ('state < "FAILED"', "takes =, !=, IN or :*"),
        ('create_time > "yesterday"', "not an RFC 3339 time"),
        ('create_time > "2026-01-01T00:00:00"', "needs a time zone"),
        ('create_time:"2026-01-01T00:00:00Z"', "takes =, !=, <"),
        ("metadata.draft < true", "compares a boolean"),
    ],
)
def test_a_field_or_operator_that_does_not_fit_is_refused_with_its_position(text, says):
    with pytest.raises(FilterError) as caught:
        compile_sql(parse(text), resolve, Params())
    assert says in str(caught.value) and caught.value.column == 1
