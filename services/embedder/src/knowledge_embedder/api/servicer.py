"""EmbedderService over gRPC (internal).

The model, batching and indexing land with the embedder issue; until then the generated
base answers UNIMPLEMENTED, behind the same auth, logging and error interceptors.
"""

from __future__ import annotations

from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_runtime.server import ServiceSpec

CAPABILITIES = {
    "Info": "embed",
    "EmbedTexts": "embed",
    "EmbedQuery": "embed",
    "Index": "embed",
    "RefreshAnchor": "embed",
    "SearchAnchors": "embed",
}


class EmbedderServicer(embedder_pb2_grpc.EmbedderServiceServicer):
    pass


def service_spec(servicer: EmbedderServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"],
        register=lambda server: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
