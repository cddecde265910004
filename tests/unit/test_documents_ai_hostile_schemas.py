"""Schemas and answers a hostile tenant (or a wayward model) sends: each is refused with a clear
error naming what is wrong and the limit, or checked in time linear in its text; none ends in a
RecursionError (a 500) or runs on for everybody."""

from __future__ import annotations

import json
import time

import pytest
from knowledge_documents_ai.domain import limits
from knowledge_documents_ai.domain.errors import ExtractionInvalid, TaxonomyInvalid
from knowledge_documents_ai.domain.extraction import interpret
from knowledge_documents_ai.domain.processing import interpret_proposal, interpret_schema, parse_schema_text
from knowledge_documents_ai.domain.taxonomy import extraction_schema

CATASTROPHIC = "^(a+)+$"  # Python's re: time doubling with every "a" before a mismatch
HOSTILE_VALUE = "a" * 26 + "!"  # seconds for re; microseconds for a linear-time engine


def schema_with(**spec) -> dict:
    return {"type": "object", "properties": {"code": {"type": "string", "description": "the code", **spec}}}


def answer(value) -> str:
    return json.dumps({"values": [{"field": "code", "value": value}]})


def test_a_catastrophic_pattern_is_checked_in_linear_time():
    schema = extraction_schema("ticket", 1, schema_with(pattern=CATASTROPHIC))
    started = time.monotonic()
    refused = interpret(answer(HOSTILE_VALUE), schema)
    assert time.monotonic() - started < 0.5
    assert "does not match '^(a+)+$'" in refused.problem
    assert interpret(answer("aaaa"), schema).acceptable


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!x)y"])
def test_a_pattern_the_linear_engine_cannot_run_is_refused_when_the_schema_is_created(pattern):
    with pytest.raises(TaxonomyInvalid) as caught:
        extraction_schema("ticket", 1, schema_with(pattern=pattern))
    error = caught.value
    assert error.field == "json_schema" and error.code == "INVALID_ARGUMENT"
    assert "properties/code/pattern" in error.message and "RE2" in error.message


def test_pattern_properties_are_refused_wherever_a_schema_is_read():
    for spec in (
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"$ref": "#/$defs/map"},
    ):
        schema = schema_with(**spec)
        schema["$defs"] = {"map": {"type": "object", "patternProperties": {"(a+)+": {}}}}
        with pytest.raises(TaxonomyInvalid) as caught:
            extraction_schema("ticket", 1, schema)
        assert "patternProperties is not supported" in caught.value.message
    named = {"type": "object", "properties": {"patternProperties": {"type": "string", "description": "a field"}}}
    assert [f.name for f in extraction_schema("ticket", 1, named).fields] == ["patternProperties"]


def _nested_properties(levels: int) -> str:
    spec: dict = {"type": "string", "description": "the leaf"}
    for _ in range(levels):
        spec = {"type": "object", "description": "a level", "properties": {"x": spec}}
    return json.dumps({"type": "object", "properties": {"x": spec}})


DEEP = {
    "properties nested 200 deep": _nested_properties(200),
    "arrays nested 49,000 deep": "[" * 49_000 + "]" * 49_000,
    "a pattern of 5,000 nested groups": json.dumps(schema_with(pattern="(" * 5_000 + "a" + ")" * 5_000)),
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_deep_schemas_are_refused_naming_the_limit(text):
    assert len(text) <= limits.MAX_SCHEMA_CHARS
    with pytest.raises(TaxonomyInvalid) as caught:
        extraction_schema("ticket", 1, parse_schema_text(text))
    assert caught.value.field == "json_schema"
    assert f"deeper than {limits.MAX_NESTING} levels" in caught.value.message
    within = extraction_schema("ticket", 1, parse_schema_text(_nested_properties(limits.MAX_NESTING // 2 - 2)))
    assert [f.name for f in within.fields] == ["x"]  # while a schema within the limit is taken


def test_a_deeply_nested_model_answer_is_told_to_the_model_not_a_crash():
    deep = '{"values": [' + "[" * 5_000 + "]" * 5_000 + "]}"
    told = interpret(deep, extraction_schema("ticket", 1, schema_with()))
    assert not told.acceptable and f"deeper than {limits.MAX_NESTING} levels" in told.problem
    assert "deeper than" in interpret_proposal(deep).problem
    assert "deeper than" in interpret_schema(deep, "ticket", 1).problem


def fanning_out(levels: int) -> dict:
    """Each level refers twice to the one below: 2**levels checks of one value."""
    defs: dict = {"l0": {"type": "null"}}
    for level in range(1, levels + 1):
        defs[f"l{level}"] = {"anyOf": [{"$ref": f"#/$defs/l{level - 1}"}, {"$ref": f"#/$defs/l{level - 1}"}]}
    schema = schema_with()
    schema["properties"]["code"] = {"description": "the code", "$ref": f"#/$defs/l{levels}"}
    return {**schema, "$defs": defs}


def test_checking_an_answer_stops_at_the_time_limit():
    schema = extraction_schema("ticket", 1, fanning_out(40))
    started = time.monotonic()
    with pytest.raises(ExtractionInvalid) as caught:
        interpret(answer("x"), schema)
    assert time.monotonic() - started < limits.VALIDATION_SECONDS + 1.5
    assert f"longer than {limits.VALIDATION_SECONDS:g} s" in caught.value.message


def test_a_schema_that_refers_to_itself_without_end_is_refused_not_a_crash():
    schema = schema_with()
    schema["properties"]["code"] = {"description": "the code", "$ref": "#/$defs/loop"}
    schema["$defs"] = {"loop": {"$ref": "#/$defs/loop"}}
    with pytest.raises(ExtractionInvalid) as caught:
        interpret(answer("x"), extraction_schema("ticket", 1, schema))
    assert "refers to itself" in caught.value.message
