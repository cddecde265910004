"""The committed OpenAPI description matches the protos, and describes what the gateway serves."""

import json
from pathlib import Path

from knowledge_gateway.descriptors import http_rules
from knowledge_gateway.openapi import committed_path, generate, main, openapi_text


def test_committed_description_matches_the_protos():
    assert committed_path().read_text() == generate(), "run: python -m knowledge_gateway.openapi"
    assert main(["--check"]) == 0


def test_every_http_rule_is_an_operation_with_the_rest_path():
    document = json.loads(openapi_text())
    operations = {
        op["operationId"]: (verb, path) for path, item in document["paths"].items() for verb, op in item.items()
    }
    expected = {method.name: (verb, path) for method, verb, path in http_rules()}
    assert operations == expected
    assert operations["CreateCorpus"] == ("post", "/api/v1/knowledge/corpora")
    assert operations["GetDocumentText"] == ("get", "/api/v1/knowledge/documents/{document_id}/text")
    assert operations["SearchDocuments"] == ("post", "/api/v1/knowledge/search_documents")
    assert "GetPromptContext" not in operations  # gRPC only


def test_schemas_use_proto_field_names_and_the_transcoders_json():
    document = json.loads(openapi_text())
    schemas = document["components"]["schemas"]
    result = schemas["knowledge.v1.SearchResult"]
    assert {"document_id", "chunk_id", "vector_rank", "lexical_rank", "fused_score"} <= set(result["properties"])
    assert schemas["knowledge.v1.Document"]["properties"]["size_bytes"]["type"] == "string"  # int64
    assert schemas["knowledge.v1.Corpus"]["properties"]["create_time"]["format"] == "date-time"
    assert "DOCUMENT_STATE_SEARCHABLE" in schemas["knowledge.v1.DocumentState"]["enum"]
    text = schemas["knowledge.v1.GetDocumentTextResponse"]
    assert "page" not in text["required"] and "text" in text["required"]  # proto3 optional: may be absent
    upload = document["paths"]["/api/v1/knowledge/upload"]["post"]
    assert set(upload["requestBody"]["content"]) == {"application/octet-stream", "multipart/form-data"}
    assert {"413", "401", "403", "429"} <= set(upload["responses"])
    assert "411" not in upload["responses"] and "chunked" in upload["requestBody"]["description"]
    assert "409" in document["paths"]["/api/v1/knowledge/corpora"]["post"]["responses"]
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "capability corpus.create" in document["paths"]["/api/v1/knowledge/corpora"]["post"]["description"].lower()


def test_request_constraints_name_real_fields_and_reach_the_schemas():
    from knowledge_gateway.openapi import MESSAGE_CONSTRAINTS, REQUEST_CONSTRAINTS, _Builder, proto_descriptor_set

    builder = _Builder(proto_descriptor_set())
    for key in REQUEST_CONSTRAINTS:
        message, _, field = key.rpartition(".")
        assert field in {f.name for f in builder.messages[message].field}, key
    schemas = json.loads(openapi_text())["components"]["schemas"]
    name = schemas["knowledge.v1.CreateCorpusRequest.Input"]
    assert name["required"] == ["name"] and name["properties"]["name"]["maxLength"] == 200
    assert schemas["knowledge.v1.SearchRequest.Input"]["properties"]["query"]["minLength"] == 1
    for message, constraint in MESSAGE_CONSTRAINTS.items():
        assert message in builder.messages
        assert schemas[f"{message}.Input"].items() >= constraint.items()
    # What the server checks, the description states: page tokens' format, page_size >= 0.
    from knowledge_runtime.pagination import PAGE_TOKEN_PATTERN

    listed = json.loads(openapi_text())["paths"]["/api/v1/knowledge/corpora"]["get"]["parameters"]
    params = {p["name"]: p["schema"] for p in listed}
    assert params["page_token"]["pattern"] == PAGE_TOKEN_PATTERN and params["page_size"]["minimum"] == 0


def test_non_blank_means_what_the_services_strip():
    """The services strip with str.strip() before checking a value is not blank; the description's
    "not blank" pattern counts the same characters as space (JSON Schema's \\s does not)."""
    import re

    from knowledge_gateway.openapi_constraints import _NON_BLANK

    blank_char = re.compile(_NON_BLANK["pattern"])
    assert [hex(c) for c in range(1, 0x110000) if chr(c).isspace() != (blank_char.fullmatch(chr(c)) is None)] == []
    assert blank_char.fullmatch("a\x00b") is None  # and no NUL, as every request text field
    schemas = json.loads(openapi_text())["components"]["schemas"]
    texts = schemas["knowledge.v1.IngestTextRequest.Input"]["properties"]
    assert texts["title"]["pattern"] == texts["source_url"]["pattern"] == "^[^\\x00]*$"


def test_every_rest_operation_served_before_is_still_served():
    """The REST API outlives any reshaping of the gRPC services behind it (operation ids and tags
    may change; the paths may not)."""
    listed = Path(__file__).resolve().parents[1] / "data" / "rest_paths.txt"
    before = {line for line in listed.read_text().splitlines() if line and not line.startswith("#")}
    served = {
        f"{method.upper()} {path}"
        for path, operations in json.loads(generate())["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert len(before) >= 46
    assert before - served == set(), "REST operations dropped"


def test_a_map_field_is_an_object_of_its_values_as_proto3_json_prints_it():
    schemas = json.loads(openapi_text())["components"]["schemas"]
    metadata = schemas["knowledge.v1.CheckIndexingResponse"]["properties"]["metadata"]
    assert metadata["type"] == "object" and metadata["additionalProperties"] == {"type": "string"}
    assert not any(name.endswith("MetadataEntry") for name in schemas)
