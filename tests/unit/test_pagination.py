import base64

import pytest
from knowledge_runtime.pagination import (
    InvalidPageSize,
    InvalidPageToken,
    bounded_page_size,
    decode_page_token,
    encode_page_token,
)


def test_round_trip_and_empty():
    assert decode_page_token(encode_page_token(12345)) == 12345
    assert encode_page_token(None) == ""
    assert decode_page_token("") == 0


@pytest.mark.parametrize("token", ["zzz", "!!!", "aGVsbG8", encode_page_token(1)[:-2] + "__"])
def test_foreign_tokens_are_invalid_argument(token):
    with pytest.raises(InvalidPageToken) as caught:
        decode_page_token(token)
    assert caught.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "token",
    [
        encode_page_token(1) + "==",  # padded: one spelling per token
        "azE6wrI",  # base64 of "k1:²": a non-ASCII digit
        encode_page_token(10**18),  # past bigint
        "azE6",  # "k1:" without an id
        encode_page_token(0),  # no id is 0
        base64.urlsafe_b64encode(b"k1:01").decode().rstrip("="),  # one spelling per id
    ],
)
def test_lenient_spellings_and_out_of_range_ids_are_invalid(token):
    with pytest.raises(InvalidPageToken):
        decode_page_token(token)


def test_the_pattern_is_exactly_the_tokens_the_server_accepts():
    """What the OpenAPI description states: every issued token matches it, and every string that
    matches it decodes (Hypothesis draws them as Schemathesis does)."""
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from knowledge_runtime.pagination import MAX_ID_DIGITS, PAGE_TOKEN_PATTERN

    pattern = re.compile(PAGE_TOKEN_PATTERN)
    for after_id in [1, 9, 10, 99, 100, 101, 12345, 123456, 10**MAX_ID_DIGITS - 1, 2**59]:
        assert pattern.fullmatch(encode_page_token(after_id)), after_id
    assert pattern.fullmatch("")

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(PAGE_TOKEN_PATTERN, fullmatch=True))
    def decodes(token: str) -> None:
        assert 0 <= decode_page_token(token) < 10**MAX_ID_DIGITS
        assert token == "" or encode_page_token(decode_page_token(token)) == token  # one spelling

    decodes()


def test_a_page_size_is_the_default_for_0_capped_at_the_maximum_and_never_negative():
    assert [bounded_page_size(n, 20, 100) for n in (0, 1, 100, 101, 10**6)] == [20, 1, 100, 100, 100]
    with pytest.raises(InvalidPageSize):
        bounded_page_size(-1, 20, 100)
