"""A stopped real embedder process (SIGSTOP: its port accepts, nothing answers) behind search's
circuit breaker: pre-fetch and context answers stay degraded and never an error; after
the first, which spends the pre-fetch deadline, they come at once from the keyword fallback; once
the embedder continues, a probe after the cool-off closes the breaker again."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env
from knowledge_runtime.system_corpora import SYSTEM_WRITE
from knowledge_search.bootstrap import build_app
from knowledge_search.config import SearchSettings

from tests.support import rpc
from tests.support.hashing import HashingChunkEmbedder
from tests.support.ingest import MemoryBlobs, ingest_app, settings, wait_terminal, wire_fakes
from tests.support.net import free_port
from tests.support.processes import service_env, wait_serving

pytestmark = pytest.mark.integration
DEADLINE_MS = 300
COOL_OFF_S = 5.0  # longer than the ten fast answers take on a loaded machine
MESSAGE = "how do I restart the billing worker?"


def extract(path, filename, mime_type) -> Extracted:
    return Extracted(text=path.read_bytes().decode("utf-8"), page_count=None, extractable=True, format="text")


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


@pytest.fixture
async def stack(migrated_pg, verifier, keys_dir, tmp_path, make_token):
    embedder_port, search_port = free_port(), free_port()
    embedder = subprocess.Popen(
        [sys.executable, "-m", "knowledge_embedder"],
        env=service_env("embedder", embedder_port, migrated_pg, keys_dir, tmp_path, KNOWLEDGE_LOG_LEVEL="warning"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), ingest_db, MemoryBlobs(admin), HashingChunkEmbedder(), extract)
    ingest = ingest_app(ingest, verifier)
    env = service_env(
        "search",
        search_port,
        migrated_pg,
        keys_dir,
        tmp_path,
        KNOWLEDGE_EMBEDDER_ADDRESS=f"127.0.0.1:{embedder_port}",
        KNOWLEDGE_PREFETCH_DEADLINE_MS=str(DEADLINE_MS),
        KNOWLEDGE_SEARCH_EMBEDDER_COOL_OFF_S=str(COOL_OFF_S),
        KNOWLEDGE_SEARCH_CACHE_TTL_S="0",
        KNOWLEDGE_LOG_LEVEL="warning",
    )
    search = await build_app(SearchSettings.from_env(Env(env)))  # the service as bootstrap wires it
    channels = []
    try:
        await wait_serving(f"127.0.0.1:{embedder_port}", "knowledge.v1.EmbedderService", embedder, timeout=120)
        ingest_port = await ingest.start()
        await search.start()
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{p}") for p in (ingest_port, search_port)]
        ingest_stub = rpc.IngestStub(channels[0])
        writer = bearer(make_token("breaker-acme", [*PUBLIC_CAPABILITIES, SYSTEM_WRITE], subject="orchestrator"))
        accepted = await ingest_stub.IngestText(
            ingest_pb2.IngestTextRequest(
                system_corpus="operational_patterns", text="Restart the billing worker after a deploy.", title="e"
            ),
            metadata=writer,
        )
        job = await wait_terminal(ingest_stub, writer, accepted.job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
        yield embedder, search_pb2_grpc.SearchServiceStub(channels[1]), bearer(make_token("breaker-acme"))
    finally:
        if embedder.poll() is None:
            embedder.send_signal(signal.SIGCONT)
            embedder.kill()
            embedder.wait(30)
        for channel in channels:
            await channel.close()
        await search.stop()
        await ingest.stop()
        await ingest_db.close()
        await admin.close()


async def until_whole(search, prefetch, user, within_s: float = 30.0):
    """The first pre-fetch answer that is not degraded, or the last one tried."""
    deadline = time.monotonic() + within_s
    while True:
        reply = await search.PrefetchContext(prefetch, metadata=user)
        if not reply.degraded or time.monotonic() > deadline:
            return reply
        await asyncio.sleep(0.3)


async def timed(call) -> tuple[object, float]:
    started = time.monotonic()
    reply = await call
    return reply, (time.monotonic() - started) * 1000


async def test_a_stopped_embedder_costs_one_deadline_then_the_keyword_fallback_answers_at_once(stack):
    embedder, search, user = stack
    prefetch = search_pb2.PrefetchContextRequest(user_message=MESSAGE)
    reply = await until_whole(search, prefetch, user)  # a cold first embedding may pass the deadline
    assert not reply.degraded and reply.entry_count == 1, reply.degradations  # the embedder answered

    embedder.send_signal(signal.SIGSTOP)
    first, first_ms = await timed(search.PrefetchContext(prefetch, metadata=user))
    assert first.degraded  # the deadline passed while the embedder was silent: empty, never an error
    later = [await timed(search.PrefetchContext(prefetch, metadata=user)) for _ in range(10)]
    for reply, elapsed_ms in later:  # the breaker is open: no wait for the silent embedder
        assert reply.degraded and reply.entry_count == 1, (reply.degradations, reply.rendered)
        assert "Restart the billing worker" in reply.rendered
        assert elapsed_ms < DEADLINE_MS * 0.8, (elapsed_ms, first_ms)  # without the breaker: each >= the deadline
    context, context_ms = await timed(search.GetContext(search_pb2.GetContextRequest(query=MESSAGE), metadata=user))
    assert context.context.metadata.degradations and context_ms < DEADLINE_MS * 0.8  # lexical only, at once

    embedder.send_signal(signal.SIGCONT)
    await asyncio.sleep(COOL_OFF_S + 0.2)
    reply = await until_whole(search, prefetch, user)  # the probe goes through and closes the breaker
    assert not reply.degraded and reply.entry_count == 1, reply.degradations
