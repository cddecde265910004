"""The contracts: buf passes offline, the stubs match the protos, REST paths match docs/api.md."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from google.api import annotations_pb2
from knowledge.v1 import documents_ai_pb2, ingest_pb2, search_pb2

ROOT = Path(__file__).resolve().parents[2]
BUF = Path(sys.executable).parent / "buf"
PROTO_INCLUDE = Path(__import__("grpc_tools").__file__).parent / "_proto"  # protoc's well-known types

# docs/api.md, "Public REST API": (method, path) -> RPC.
REST_API = {
    ("post", "/api/v1/knowledge/corpora"): "CorpusService.CreateCorpus",
    ("get", "/api/v1/knowledge/corpora"): "CorpusService.ListCorpora",
    ("post", "/api/v1/knowledge/upload"): "IngestJobService.UploadDocument",
    ("get", "/api/v1/knowledge/ingest/{job_id}"): "IngestJobService.GetIngestJob",
    ("post", "/api/v1/knowledge/search"): "SearchService.Search",
    ("post", "/api/v1/knowledge/query"): "SearchService.Query",
    ("get", "/api/v1/knowledge/documents/{document_id}/text"): "DocumentService.GetDocumentText",
    ("post", "/api/v1/knowledge/documents:move"): "DocumentService.MoveDocuments",
    ("delete", "/api/v1/knowledge/documents/{document_id}"): "DocumentService.DeleteDocument",
}


def http_rules() -> dict[tuple[str, str], str]:
    found = {}
    for module in (ingest_pb2, search_pb2, documents_ai_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                rule = method.GetOptions().Extensions[annotations_pb2.http]
                kind = rule.WhichOneof("pattern")
                if kind:
                    found[(kind, getattr(rule, kind))] = f"{service.name}.{method.name}"
    return found


def test_every_documented_path_maps_to_its_rpc():
    rules = http_rules()
    for route, rpc in REST_API.items():
        assert rules.get(route) == rpc, route
    assert all(path.startswith("/api/v1/knowledge/") for _, path in rules)


def api_reference_routes() -> dict[tuple[str, str], str]:
    """(method, path) -> capability, from the REST tables of docs/api.md."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Public REST API", 1)[1].split("\n## ", 1)[0]
    routes = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            for path in re.findall(r"`([^`]+)`", cells[1]):
                routes[(cells[0].lower(), "/api/v1/knowledge" + path.split("?")[0])] = cells[2]
    return routes


def test_the_api_reference_lists_every_rest_route_with_its_capability():
    from knowledge_documents_ai.api import servicer as documents_ai
    from knowledge_ingest.corpora import api as corpora
    from knowledge_ingest.documents import api as documents
    from knowledge_ingest.events import api as events
    from knowledge_ingest.imports import api as imports
    from knowledge_ingest.jobs import api as jobs
    from knowledge_ingest.models import api as models
    from knowledge_ingest.passages import api as passages
    from knowledge_ingest.tenants import api as tenants
    from knowledge_ingest.webhooks import api as webhooks
    from knowledge_search.api import servicer as search

    capabilities = {}
    for module in (
        corpora,
        documents,
        events,
        imports,
        jobs,
        models,
        passages,
        tenants,
        webhooks,
        search,
        documents_ai,
    ):
        spec = module.service_spec(None)  # type: ignore[arg-type]  # only its descriptor and capabilities are read
        capabilities |= {f"{spec.descriptor.name}.{m}": c for m, c in spec.capabilities.items()}
    documented, rules = api_reference_routes(), http_rules()
    assert len(documented) >= len(REST_API)
    assert set(documented) == set(rules)
    assert {route: capabilities[rpc] for route, rpc in rules.items()} == documented


def test_committed_stubs_equal_a_fresh_generation():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_protos
    finally:
        sys.path.pop(0)
    assert gen_protos.differences() == []


@pytest.mark.parametrize("args", [["lint"], ["build", "-o", "/dev/null"]])
def test_buf_passes_offline(args):
    result = subprocess.run([str(BUF), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["status", "error_details", "code"])
def test_the_vendored_google_rpc_protos_are_the_ones_the_services_send(name, tmp_path):
    """A client compiling third_party/google/rpc gets the very messages of googleapis-common-protos,
    which the services and the gateway encode their errors with."""
    import importlib

    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    out = tmp_path / "set.pb"
    source = f"google/rpc/{name}.proto"
    assert protoc.main(["protoc", f"-I{ROOT / 'third_party'}", f"-I{PROTO_INCLUDE}", f"-o{out}", source]) == 0
    [vendored] = [f for f in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file if f.name == source]
    installed = descriptor_pb2.FileDescriptorProto()
    importlib.import_module(f"google.rpc.{name}_pb2").DESCRIPTOR.CopyToProto(installed)
    assert vendored.package == installed.package == "google.rpc"
    assert [_shape(m) for m in vendored.message_type] == [_shape(m) for m in installed.message_type]
    assert [e.SerializeToString() for e in vendored.enum_type] == [e.SerializeToString() for e in installed.enum_type]
    assert "Apache License, Version 2.0" in (ROOT / "third_party" / source).read_text(encoding="utf-8")


def _shape(message) -> tuple:
    """A message's wire shape: its fields' names, numbers, types and labels, its nested types'."""
    fields = [(f.name, f.number, f.type, f.type_name, f.label) for f in message.field]
    return message.name, fields, [_shape(m) for m in message.nested_type]


def _capabilities_in(document: str, bullet: str) -> tuple[set[str], set[str]]:
    """The capabilities a document's ``bullet`` names: the public ones (in the parentheses after
    "public"), and every one it names."""
    text = (ROOT / document).read_text(encoding="utf-8")
    section = text.split(f"- **{bullet}**", 1)[1].split("\n- **", 1)[0]
    named = set(re.findall(r"`([a-z]+\.[a-z]+|search|embed)`", section))
    listed = section.split("public", 1)[1].split("(", 1)[1].split(")", 1)[0]
    public = set(re.findall(r"`([a-z]+\.[a-z]+|search)`", listed))
    return public, named


def code_capabilities() -> tuple[set[str], set[str], set[str]]:
    """(public, granted deliberately, internal), as the code declares them."""
    from knowledge_runtime.auth import ADMIN_CAPABILITIES, INTERNAL_CAPABILITIES, PUBLIC_CAPABILITIES
    from knowledge_runtime.system_corpora import PLATFORM_CAPABILITIES

    return set(PUBLIC_CAPABILITIES), set(ADMIN_CAPABILITIES) | set(PLATFORM_CAPABILITIES), set(INTERNAL_CAPABILITIES)


def test_the_security_notes_and_the_api_reference_list_the_capabilities_the_code_has():
    public, granted, internal = code_capabilities()
    readme_public, readme_named = _capabilities_in("docs/security.md", "Tokens.")
    assert readme_public == public
    assert readme_named == public | granted  # the internal ones are the next bullet's, unnamed
    api_public, api_named = _capabilities_in("docs/api.md", "Capabilities.")
    assert api_public == public
    assert api_named == public | granted | internal


def test_every_rpc_needs_a_capability_the_code_declares():
    from knowledge_content_index.api import servicer as content_index
    from knowledge_documents_ai.api import servicer as documents_ai
    from knowledge_embedder.api import servicer as embedder
    from knowledge_ingest.corpora import api as corpora
    from knowledge_ingest.documents import api as documents
    from knowledge_ingest.events import api as events
    from knowledge_ingest.imports import api as imports
    from knowledge_ingest.jobs import api as jobs
    from knowledge_ingest.tenants import api as tenants
    from knowledge_ingest.webhooks import api as webhooks
    from knowledge_search.api import servicer as search

    public, granted, internal = code_capabilities()
    needed = set()
    modules = (
        content_index,
        embedder,
        corpora,
        documents,
        events,
        imports,
        jobs,
        tenants,
        webhooks,
        search,
        documents_ai,
    )
    for module in modules:
        needed |= set(module.service_spec(None).capabilities.values())  # type: ignore[arg-type]
    assert needed <= public | granted | internal, needed - (public | granted | internal)
    assert public | internal <= needed  # each is some RPC's
