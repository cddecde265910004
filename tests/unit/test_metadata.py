"""What a document's (or a passage's) metadata may hold: one decision function, every limit in a
table, each refusal naming its key."""

import pytest
from knowledge_ingest.domain.metadata import (
    MAX_KEYS,
    MAX_TOTAL_BYTES,
    MAX_VALUE_BYTES,
    MetadataInvalid,
    check_metadata,
    fitted_value,
    parse_metadata_json,
    with_extracted,
)


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ({}, {}),
        ({"title": "Q3 report", "page": 3.0, "score": 0.5, "draft": False}, None),
        ({"tags": ["hr", "pay"], "due": "2026-03-01T00:00:00Z"}, None),
        ({"_private": 1, "A9_z": -2}, None),
        ({"k" * 64: "longest key"}, None),
        ({"v": "x" * (MAX_VALUE_BYTES - 2)}, None),  # its JSON is exactly 1 KiB with the quotes
        ({f"k{i}": i for i in range(MAX_KEYS)}, None),
    ],
)
def test_metadata_within_the_limits_is_kept(given, stored):
    checked = check_metadata(given)
    assert checked == (stored if stored is not None else given)


def test_integral_numbers_are_stored_as_integers_and_others_as_they_are():
    checked = check_metadata({"page": 3.0, "ratio": 0.25, "big": 2.0**60})
    assert checked == {"page": 3, "ratio": 0.25, "big": 2.0**60}
    assert isinstance(checked["page"], int) and isinstance(checked["big"], float)


@pytest.mark.parametrize(
    ("given", "key", "words"),
    [
        ({f"k{i}": i for i in range(MAX_KEYS + 1)}, "", "at most 64"),
        ({"k" * 65: 1}, "k" * 65, "at most 64 characters"),
        ({"1st": 1}, "1st", "must be a letter"),
        ({"file-id": "f"}, "file-id", "must be a letter"),
        ({"": 1}, "", "must be a letter"),
        ({"owner": {"name": "ana"}}, "owner", "not nested"),
        ({"owner": None}, "owner", "null"),
        ({"ids": ["a", 1]}, "ids", "strings only"),
        ({"ids": [["a"]]}, "ids", "strings only"),
        ({"n": float("nan")}, "n", "finite"),
        ({"n": float("inf")}, "n", "finite"),
        ({"v": "x" * (MAX_VALUE_BYTES - 1)}, "v", "1024 bytes"),
        ({"v": "é" * 600}, "v", "1024 bytes"),  # counted in UTF-8 bytes, not characters
        ({f"k{i}": "x" * 1000 for i in range(17)}, "", f"{MAX_TOTAL_BYTES} bytes"),
        ({"document_id": "7"}, "document_id", "reserved"),
        ({"fragment": "#p1"}, "fragment", "reserved"),
        ({"overlap_chars": 3}, "overlap_chars", "reserved"),
        ({"chunk_index": 0}, "chunk_index", "reserved"),
    ],
)
def test_metadata_past_a_limit_is_refused_naming_the_key(given, key, words):
    with pytest.raises(MetadataInvalid) as caught:
        check_metadata(given, "passages[2].metadata")
    error = caught.value
    assert error.reason == "METADATA_INVALID" and error.code == "INVALID_ARGUMENT"
    assert error.metadata["field"] == "passages[2].metadata"
    assert error.metadata.get("key", "") == key
    assert words in error.message and "passages[2].metadata" in error.message


@pytest.mark.parametrize("text", ["[1, 2]", '"x"', "{broken", "null"])
def test_a_form_field_that_is_no_json_object_is_refused(text):
    with pytest.raises(MetadataInvalid):
        parse_metadata_json(text)


def test_a_form_field_json_object_is_checked_like_any_metadata():
    assert parse_metadata_json('{"page": 2, "tags": ["a"]}') == {"page": 2, "tags": ["a"]}
    assert parse_metadata_json("  ") == {}
    with pytest.raises(MetadataInvalid) as caught:
        parse_metadata_json('{"bad key": 1}')
    assert caught.value.metadata["key"] == "bad key"


def test_what_a_file_says_of_itself_is_added_under_the_callers_keys():
    extracted = {"email_from": "a@example.org", "email_subject": "Pumps"}
    assert with_extracted({"team": "blue", "email_from": "me"}, extracted) == {
        "team": "blue",
        "email_from": "me",  # the caller's choice wins
        "email_subject": "Pumps",
    }
    assert with_extracted({}, {}) == {}


def test_nothing_is_added_where_the_sum_would_pass_the_limits():
    full = {f"k{n}": "v" for n in range(MAX_KEYS)}
    assert with_extracted(full, {"email_from": "a@example.org"}) == full
    big = {"notes": "x" * (MAX_VALUE_BYTES - 2), **{f"k{n}": "y" * 1000 for n in range(15)}}
    assert check_metadata(big) == big  # within the total alone, past it with the file's
    assert with_extracted(big, {"email_to": "z" * 1000}) == big
    assert with_extracted(big, {"email_cc": "z"}) == {**big, "email_cc": "z"}


@pytest.mark.parametrize("text", ["short", "é" * 2000, "\x01" * 900, "a" * 5000])
def test_a_fitted_value_is_the_longest_start_within_a_values_bytes(text):
    fitted = fitted_value(text)
    assert text.startswith(fitted) and check_metadata({"v": fitted}) == {"v": fitted}
    assert fitted == text or len(fitted) > MAX_VALUE_BYTES // 7
