"""The fields a request's filter names, one rule for ingest and search: the built-ins, the states,
and the error a caller gets (FILTER_INVALID at its column)."""

import pytest
from knowledge.v1 import ingest_pb2
from knowledge_runtime.filter_fields import (
    DOCUMENT_STATES,
    FilterInvalid,
    compile_filter,
    document_fields,
    parse_filter,
)
from knowledge_runtime.filters import Kind, Params

RESOLVE = document_fields("c.metadata", lambda column: f"doc.{column}")


def test_the_states_a_filter_takes_are_the_protos():
    every = ingest_pb2.DocumentState.keys()
    names = {n.removeprefix("DOCUMENT_STATE_") for n in every} - {"UNSPECIFIED"}
    assert DOCUMENT_STATES == names


@pytest.mark.parametrize(
    ("name", "sql", "kind"),
    [
        (("metadata", "page"), "c.metadata", Kind.JSON),
        (("document_ref",), "doc.document_ref", Kind.TEXT),
        (("filename",), "doc.filename", Kind.TEXT),
        (("mime_type",), "doc.mime_type", Kind.TEXT),
        (("create_time",), "doc.create_time", Kind.TIMESTAMP),
        (("state",), "doc.state", Kind.TEXT),
    ],
)
def test_each_field_reads_where_its_service_says(name, sql, kind):
    column = RESOLVE(name)
    assert column is not None and (column.sql, column.kind) == (sql, kind)
    assert column.key == (name[1] if kind is Kind.JSON else "")


@pytest.mark.parametrize("name", [("metadata",), ("metadata", "a", "b"), ("section",), ("tenant_id",), ("corpus_id",)])
def test_anything_else_is_no_field(name):
    assert RESOLVE(name) is None


@pytest.mark.parametrize(
    ("text", "column"),
    [("metadata.page >", 15), ('state = "DONE"', 1), ('filename > "a"', 1), ('x = 1 AND tenant_id = "t"', 1)],
)
def test_what_is_refused_is_filter_invalid_at_its_column(text, column):
    with pytest.raises(FilterInvalid) as caught:
        compile_filter(parse_filter(text), RESOLVE, Params())
    error = caught.value
    assert (error.code, error.reason, error.metadata["field"]) == ("INVALID_ARGUMENT", "FILTER_INVALID", "filter")
    assert error.metadata["column"] == str(column) and f"column {column}" in error.message


def test_no_filter_is_true():
    assert parse_filter("  ") is None and compile_filter(None, RESOLVE, Params()) == "TRUE"
