"""SearchService over gRPC.

Retrieval and answers land with the search issue; until then the generated base answers
UNIMPLEMENTED, behind the same auth, logging and error interceptors as every service.
"""

from __future__ import annotations

from knowledge.v1 import search_pb2, search_pb2_grpc
from knowledge_runtime.server import ServiceSpec

CAPABILITIES = {"Search": "search", "SearchDocuments": "search", "Query": "search"}


class SearchServicer(search_pb2_grpc.SearchServiceServicer):
    pass


def service_spec(servicer: SearchServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=search_pb2.DESCRIPTOR.services_by_name["SearchService"],
        register=lambda server: search_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
