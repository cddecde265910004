"""No request of a reading RPC may choose its retrieval scope: the scope comes only from the
verified token. An agent's tool arguments are chosen by a model; its reach must not be."""

from __future__ import annotations

import re

from google.protobuf.descriptor import Descriptor
from knowledge.v1 import common_pb2, content_index_pb2, embedder_pb2, ingest_pb2, search_pb2

SCOPE_WORDS = {"scope", "scopes", "project", "projects", "workspace", "workspaces", "mission", "missions"}
# The administrative act that places a corpus (not a read): its request names the target node.
SETS_A_SCOPE = {"knowledge.v1.CorpusService.BindCorpus"}
# A resource an update request carries whole (AIP-134) whose scope field the service only reports
# (the registering token's node): the update mask cannot name it, so no request sets it.
OUTPUT_ONLY = {"knowledge.v1.WebhookService.UpdateWebhook": ["webhook.scope"]}


def scope_fields(message: Descriptor, path: str = "", seen: frozenset[str] = frozenset()) -> list[str]:
    """Fields anywhere in ``message`` (nested messages and maps included) whose name holds a scope word."""
    found = []
    for field in message.fields:
        name = f"{path}{field.name}"
        if SCOPE_WORDS & set(re.split(r"_", field.name.lower())):
            found.append(name)
        nested = field.message_type
        if nested is not None and nested.full_name not in seen:
            found += scope_fields(nested, name + ".", seen | {message.full_name})
    return found


def rpcs():
    for module in (common_pb2, content_index_pb2, embedder_pb2, ingest_pb2, search_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            yield from service.methods


def test_no_reading_rpc_request_has_a_scope_project_workspace_or_mission_field():
    methods = list(rpcs())
    assert {"Search", "Query", "SearchDocuments", "ListCorpora", "GetDocumentText", "GetPromptContext"} <= {
        m.name for m in methods
    }
    offenders = {
        m.full_name: fields
        for m in methods
        if m.full_name not in SETS_A_SCOPE
        and (fields := [f for f in scope_fields(m.input_type) if f not in OUTPUT_ONLY.get(m.full_name, [])])
    }
    assert offenders == {}


def test_the_walk_finds_a_scope_field_where_there_is_one():
    bind = ingest_pb2.DESCRIPTOR.services_by_name["CorpusService"].methods_by_name["BindCorpus"]
    assert scope_fields(bind.input_type) == ["scope"]
    # and one nested in a message a request holds (BindCorpusResponse.corpus.scope)
    assert scope_fields(ingest_pb2.BindCorpusResponse.DESCRIPTOR) == ["corpus.scope"]
