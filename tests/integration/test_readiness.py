"""Readiness tells the truth about the database; liveness does not restart a process for it; and a
stop drains: the calls in flight when SIGTERM arrives all get their answers."""

import asyncio
import time

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge.v1 import ingest_pb2
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.corpora.api import CorpusServicer, service_spec
from knowledge_ingest.corpora.usecases import CorpusUseCases
from knowledge_runtime import health
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import Env

from tests.support import rpc
from tests.support.ingest import wire_fakes
from tests.support.rpc import auth

pytestmark = pytest.mark.integration

NAMED = "knowledge.v1.CorpusService"


def corpora_for(db: Database) -> CorpusUseCases:
    """The real corpus use cases (their RPCs are what these tests call)."""
    return wire_fakes(IngestSettings.from_env(Env({})), db, None, None, None).corpora


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
async def own_pg(tmp_path):
    """A PostgreSQL of this test alone: it is stopped and started under a running service."""
    pg = await asyncio.to_thread(start_embedded, tmp_path / "pg")
    connection = await asyncpg.connect(pg.url())
    await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")  # the pool's codec needs it
    await connection.close()
    yield pg
    await asyncio.to_thread(pg.shutdown)


async def wait_status(stub, service: str, wanted: int, timeout: float) -> float:
    started = time.monotonic()
    while True:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
        if reply.status == wanted:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{service or 'liveness'} still {reply.status} after {timeout}s")
        await asyncio.sleep(0.05)


async def test_readiness_follows_the_database_and_liveness_stays_serving(own_pg, verifier):
    db = await Database.connect(own_pg.url(), max_size=2)
    app = GrpcApp(
        services=[service_spec(CorpusServicer(corpora_for(db), None))],  # type: ignore[arg-type]  # no deletion here
        verifier=verifier,
        readiness=[health.database(db)],
        readiness_interval_s=0.2,
    )
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await wait_status(stub, NAMED, SERVING, 1)
            await asyncio.to_thread(own_pg.shutdown)  # PostgreSQL stopped hard under the service
            took = await wait_status(stub, NAMED, NOT_SERVING, 5)
            assert took < 5
            assert (await stub.Check(health_pb2.HealthCheckRequest(service=""))).status == SERVING
            await asyncio.to_thread(own_pg.restart)
            await wait_status(stub, NAMED, SERVING, 5)
            assert (await stub.Check(health_pb2.HealthCheckRequest(service=""))).status == SERVING
    finally:
        await app.stop()
        await db.close()


class SlowServicer(CorpusServicer):
    """ListCorpora takes a while, as a search does under load."""

    def __init__(self, corpora: CorpusUseCases) -> None:
        super().__init__(corpora, None)  # type: ignore[arg-type]  # nothing is deleted here
        self.started = 0

    async def ListCorpora(self, request, context):
        self.started += 1
        await asyncio.sleep(1.0)
        return await super().ListCorpora(request, context)


@pytest.fixture
async def ingest_db(migrated_pg):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), max_size=4)
    yield db
    await db.close()


async def test_a_stop_answers_every_call_in_flight(ingest_db, verifier, make_token):
    servicer = SlowServicer(corpora_for(ingest_db))
    app = GrpcApp(services=[service_spec(servicer)], verifier=verifier, shutdown_grace_s=10)
    port = await app.start()
    token = make_token("drain", ["corpus.read"])
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = rpc.IngestStub(channel)
        calls = [
            asyncio.ensure_future(stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=auth(token), timeout=30))
            for _ in range(8)
        ]
        while servicer.started < 8:
            await asyncio.sleep(0.01)
        stopping = asyncio.ensure_future(app.stop())  # what SIGTERM runs
        replies = await asyncio.gather(*calls)
        await stopping
    assert len(replies) == 8 and all(reply.corpora == [] for reply in replies)
