"""The FileDescriptorSet that Envoy's grpc_json_transcoder reads.

Built from the generated ``knowledge.v1`` modules and everything they import, so it always
matches the stubs the services run (which a test checks against the protos).
"""

from __future__ import annotations

from collections.abc import Iterator

from google.api import annotations_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor, MethodDescriptor
from google.rpc import error_details_pb2, status_pb2
from knowledge.v1 import documents_ai_pb2, ingest_pb2, search_pb2

# The services the REST API exposes; the embedder and content-index stay internal.
PUBLIC_SERVICES = (
    ingest_pb2.DESCRIPTOR.services_by_name["CorpusService"],
    ingest_pb2.DESCRIPTOR.services_by_name["DocumentService"],
    ingest_pb2.DESCRIPTOR.services_by_name["IngestJobService"],
    ingest_pb2.DESCRIPTOR.services_by_name["ImportService"],
    ingest_pb2.DESCRIPTOR.services_by_name["TenantService"],
    ingest_pb2.DESCRIPTOR.services_by_name["EventService"],
    search_pb2.DESCRIPTOR.services_by_name["SearchService"],
    documents_ai_pb2.DESCRIPTOR.services_by_name["DocumentsAIService"],
)


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """Every file the public services need, dependencies before dependants."""
    ordered: list[FileDescriptor] = []
    seen: set[str] = set()

    def visit(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            visit(dependency)
        ordered.append(file)

    for service in PUBLIC_SERVICES:
        visit(service.file)
    # convert_grpc_status prints google.rpc.Status with its ErrorInfo as JSON: it needs both.
    visit(status_pb2.DESCRIPTOR)
    visit(error_details_pb2.DESCRIPTOR)
    result = descriptor_pb2.FileDescriptorSet()
    for file in ordered:
        result.file.add().ParseFromString(file.serialized_pb)
    return result


def descriptor_bytes() -> bytes:
    """The descriptor set as the file the transcoder reads."""
    return descriptor_set().SerializeToString()


def public_service_names() -> list[str]:
    return [service.full_name for service in PUBLIC_SERVICES]


def streamed_methods() -> Iterator[MethodDescriptor]:
    """The public RPCs that answer with a server stream (their REST answer streams too)."""
    for service in PUBLIC_SERVICES:
        for method in service.methods:
            if method.server_streaming:
                yield method


def http_rules() -> Iterator[tuple[MethodDescriptor, str, str]]:
    """(method, verb, path template) of every public RPC with a ``google.api.http`` rule."""
    for service in PUBLIC_SERVICES:
        for method in service.methods:
            options = method.GetOptions()
            if options.HasExtension(annotations_pb2.http):
                rule = options.Extensions[annotations_pb2.http]
                verb = rule.WhichOneof("pattern")
                yield method, verb, getattr(rule, verb)
