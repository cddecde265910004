"""Word-hashing vectors (cosine follows word overlap) for tests that need a query embedder and
chunk vectors from the same space without the model: an EmbedQuery server and ingest's port."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
from knowledge.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from knowledge_runtime.server import GrpcApp, ServiceSpec

DIM = 384


def hashed_vector(text: str) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.rstrip("s").encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % DIM] += 1.0 if digest[4] & 1 else -1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector


class HashingQueryEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    async def EmbedQuery(self, request, context):
        return embedder_pb2.EmbedQueryResponse(vector=common_pb2.Vector(values=hashed_vector(request.query).tolist()))


class HashingChunkEmbedder:
    """Ingest's Embedder port."""

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        return [hashed_vector(text).tolist() for text in texts]


def embedder_app(verifier) -> GrpcApp:
    """An EmbedderService answering EmbedQuery behind the real token checks (capability embed)."""
    servicer = HashingQueryEmbedder()
    descriptor = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"]
    return GrpcApp(
        services=[
            ServiceSpec(
                descriptor=descriptor,
                register=lambda s: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, s),
                capabilities={m.name: "embed" for m in descriptor.methods},
                unscoped=[m.name for m in descriptor.methods],  # internal, as the real embedder's
            )
        ],
        verifier=verifier,
    )
