"""The FileDescriptorSet that Envoy's grpc_json_transcoder reads.

Built from the generated ``knowledge.v1`` modules and everything they import, so it always
matches the stubs the services run (which a test checks against the protos).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor
from google.rpc import error_details_pb2, status_pb2
from knowledge.v1 import ingest_pb2, search_pb2

# The services the REST API exposes; the embedder and content-index stay internal.
PUBLIC_SERVICES = (
    ingest_pb2.DESCRIPTOR.services_by_name["IngestService"],
    search_pb2.DESCRIPTOR.services_by_name["SearchService"],
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


def public_service_names() -> list[str]:
    return [service.full_name for service in PUBLIC_SERVICES]
