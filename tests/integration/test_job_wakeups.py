"""A queued job wakes idle workers at its commit (LISTEN/NOTIFY on real PostgreSQL), in any
replica: the job is claimed as it commits, not at the workers' next poll."""

import asyncio

import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.events.outbox import PostgresWakeups
from knowledge_runtime.db.pool import Database

from tests.support.ingest import CountingEmbedder, MemoryBlobs, auth, new_corpus, replica, wait_terminal

pytestmark = pytest.mark.integration


async def test_a_text_queued_through_one_replica_wakes_the_idle_workers_of_another(migrated_pg, verifier, make_token):
    url = migrated_pg.url(user="knowledge_ingest")
    admin = await Database.connect(migrated_pg.url())
    listener = await Database.connect(url, max_size=2)
    other = PostgresWakeups(listener)  # the other replica's listener
    await other.start()
    metadata = auth(make_token, "t-job-wakeups")
    blobs = MemoryBlobs(admin)  # content-index's store, shared by both replicas
    try:
        with other.jobs() as wakeup:
            await asyncio.sleep(0.5)  # its LISTEN is in place (starting it wakes everyone once)
            wakeup.clear()
            # An API-only replica: nobody claims the job, only the notification is observed.
            async with replica(url, verifier, blobs, CountingEmbedder(), KNOWLEDGE_INGEST_WORKERS="0") as stub:
                corpus_id = await new_corpus(stub, metadata)
                assert not await wakeup.wait(0.3)  # a corpus is no job
                reply = await stub.IngestText(
                    ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="# Leave\n\nTwenty days.", title="leave"),
                    metadata=metadata,
                )
                assert await wakeup.wait(5)
                # Cancelled while queued, then retried: queued again, which wakes the workers too.
                await stub.CancelIngestJob(ingest_pb2.CancelIngestJobRequest(job_id=reply.job_id), metadata=metadata)
                cancelled = await wait_terminal(stub, metadata, reply.job_id)
                assert cancelled.state == ingest_pb2.DOCUMENT_STATE_CANCELLED
                wakeup.clear()
                await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=reply.job_id), metadata=metadata)
                assert await wakeup.wait(5)
                # A replica with workers then takes it and ends it.
                async with replica(url, verifier, blobs, CountingEmbedder()) as worker_stub:
                    job = await wait_terminal(worker_stub, metadata, reply.job_id)
                assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    finally:
        await other.stop()
        await listener.close()
        await admin.close()
