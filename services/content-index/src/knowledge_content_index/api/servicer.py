"""ContentIndexService over gRPC (internal).

The blob RPCs land with the content-index issue; until then the generated base answers
UNIMPLEMENTED, behind the same auth, logging and error interceptors as every service.
"""

from __future__ import annotations

from knowledge.v1 import content_index_pb2, content_index_pb2_grpc
from knowledge_runtime.server import ServiceSpec

CAPABILITIES = {
    "WriteBlob": "blob.write",
    "EnsureBlob": "blob.write",
    "ReadBlob": "blob.read",
    "StatBlob": "blob.read",
    "CountReferences": "blob.read",
    "FindByHash": "blob.read",
    "CollectGarbage": "blob.admin",
}


class ContentIndexServicer(content_index_pb2_grpc.ContentIndexServiceServicer):
    pass


def service_spec(servicer: ContentIndexServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=content_index_pb2.DESCRIPTOR.services_by_name["ContentIndexService"],
        register=lambda server: content_index_pb2_grpc.add_ContentIndexServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
