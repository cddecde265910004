"""The MCP adapter's result contract as pure decisions: which answers are Hints and which Errs,
the plain words of each refusal, the calls it spells out, and the ids a model may have meant."""

from __future__ import annotations

import pytest
from knowledge_mcp.domain.contract import Err, Hint, Suggestion, arguments_line, call, failure, is_hint
from knowledge_mcp.domain.suggestions import likely
from knowledge_runtime.reasons import REASONS
from knowledge_runtime.refusals import REFUSALS, Refusal


def test_a_refusal_is_never_a_hint_and_a_correctable_input_always_is():
    for refusal, spec in REFUSALS.items():
        assert not is_hint(refusal.value, spec.code)
    for reason in ("DOCUMENT_NOT_FOUND", "CORPUS_NOT_FOUND", "PAGE_OUT_OF_RANGE", "FILTER_INVALID", "INVALID_REQUEST"):
        assert is_hint(reason, REASONS[reason].code), reason
    for reason in ("EMBEDDER_UNAVAILABLE", "INTERNAL", "CORPUS_READ_ONLY", "RATE_LIMITED"):
        assert not is_hint(reason, REASONS[reason].code), reason


@pytest.mark.parametrize("refusal", list(Refusal))
def test_each_refusal_is_told_in_its_plain_words(refusal):
    spec = REFUSALS[refusal]
    error = failure(refusal.value, spec.code, "detail the user need not read")
    assert error == Err(refusal.value, spec.plain, spec.waiting_helps)
    assert error.text().startswith(f"Error {refusal.value}: {spec.plain}.")
    assert ("Try again later." in error.text()) is spec.waiting_helps


def test_a_failure_without_a_reason_is_named_from_the_catalogue():
    assert failure("UNKNOWN", "UNAVAILABLE").reason == "DEPENDENCY_UNAVAILABLE"
    assert failure("", "DEADLINE_EXCEEDED").retry is True
    internal = failure("BLOB_NOT_FOUND", "NOT_FOUND")
    assert internal.message == "no such blob"  # the catalogue's meaning, "(internal)" left out
    assert failure("QUOTA_EXHAUSTED", "RESOURCE_EXHAUSTED", metadata={"quota": "max_documents"}).message.endswith(
        "(quota max_documents)"
    )


def test_calls_are_spelt_as_a_model_writes_them():
    assert call("get_document_text", document_id="12", page=2) == 'get_document_text(document_id="12", page=2)'
    assert call("list_corpora") == "list_corpora()"
    assert (
        arguments_line({"properties": {"query": {}, "top_k": {}}, "required": ["query"]}) == "query (required), top_k"
    )


def test_a_hint_reads_as_what_was_wrong_then_the_candidates_then_what_to_do():
    hint = Hint("no document '9'.", "Call again with one of these.", (Suggestion("11", "a.md"),))
    assert hint.text() == "Hint: no document '9'.\n- 11: a.md\nCall again with one of these."


def test_the_likeliest_candidates_come_first():
    documents = [Suggestion("11", "vacation-policy.md"), Suggestion("12", "expenses.md"), Suggestion("112", "x.md")]
    assert likely("expenses.md", documents)[0].id == "12"  # a filename for an id
    assert likely("vacation", documents)[0].id == "11"  # part of a name
    assert likely("112", documents)[0].id == "112"  # the id itself
    assert [s.id for s in likely("1122", documents, limit=2)] == ["112", "11"]  # a mistyped id
    assert likely("", documents) == tuple(documents)  # nothing to go by: the given order
