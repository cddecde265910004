import pytest
from knowledge_runtime.pagination import InvalidPageToken, decode_page_token, encode_page_token


def test_round_trip_and_empty():
    assert decode_page_token(encode_page_token(12345)) == 12345
    assert encode_page_token(None) == ""
    assert decode_page_token("") == 0


@pytest.mark.parametrize("token", ["zzz", "!!!", "aGVsbG8", encode_page_token(1)[:-2] + "__"])
def test_foreign_tokens_are_invalid_argument(token):
    with pytest.raises(InvalidPageToken) as caught:
        decode_page_token(token)
    assert caught.value.code == "INVALID_ARGUMENT"
