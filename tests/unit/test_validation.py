"""The one request check every service runs; through the real servers in
tests/integration/test_grpc_runtime.py."""

import pytest
from google.protobuf import struct_pb2
from knowledge.v1 import embedder_pb2, ingest_pb2
from knowledge_runtime.validation import NulCharacter, UnknownField, check_request


def test_a_clean_request_passes():
    check_request(embedder_pb2.IndexRequest(content="text", document=embedder_pb2.DocumentBinding(document_id="1")))
    check_request(ingest_pb2.MoveDocumentsRequest(target_corpus_id="1", document_ids=["1", "2"]))


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (ingest_pb2.IngestTextRequest(corpus_id="1", text="t", source_url="https://x/\x00"), "source_url"),
        (
            embedder_pb2.IndexRequest(
                content="t", document=embedder_pb2.DocumentBinding(document_id="1", source="\x00")
            ),
            "document.source",
        ),
        (embedder_pb2.EmbedTextsRequest(texts=["a", "b", "\x00c"]), "texts[2]"),
        (struct_pb2.Struct(fields={"k": struct_pb2.Value(string_value="v\x00")}), "fields['k'].string_value"),
        (struct_pb2.Struct(fields={"k\x00": struct_pb2.Value(string_value="v")}), "fields (a key)"),
    ],
)
def test_a_nul_at_any_depth_is_refused_naming_its_path(message, field):
    with pytest.raises(NulCharacter) as caught:
        check_request(message)
    assert caught.value.code == "INVALID_ARGUMENT" and caught.value.metadata["field"] == field


def test_an_unknown_field_at_any_depth_is_refused():
    outer = ingest_pb2.CreateCorpusRequest.FromString(
        ingest_pb2.CreateCorpusRequest(name="x").SerializeToString() + b"\xf8\x06\x01"
    )  # field 111, varint 1
    with pytest.raises(UnknownField) as caught:
        check_request(outer)
    assert caught.value.metadata["field"] == "#111" and caught.value.code == "INVALID_ARGUMENT"
    binding = embedder_pb2.DocumentBinding.FromString(b"\xf8\x06\x01")
    nested = embedder_pb2.IndexRequest(content="t", document=binding)
    with pytest.raises(UnknownField) as caught:
        check_request(nested)
    assert caught.value.metadata["field"] == "document.#111"


def test_bytes_may_hold_anything():
    check_request(ingest_pb2.UploadDocumentRequest(http_body={"data": b"\x00\x00", "content_type": "text/plain"}))
