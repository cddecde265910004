"""The one place that reads ingest's configuration and wires its adapters.

What it opens joins one ``AsyncExitStack``: a step that fails half-way through closes what
the steps before it opened, and a started app closes all of it, newest first, as it stops
(the workers first, then the clients and the metrics server, the pool last).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from knowledge_runtime import health
from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import PostgresReach
from knowledge_runtime.db.tenant_settings import enablement_gate
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.service_tokens import ServiceTokenSigner

from knowledge_ingest.api.servicer import IngestServicer, service_spec
from knowledge_ingest.clients.kept_blobs import KeptBlobs
from knowledge_ingest.clients.services import ContentIndexClient, EmbedderClient, ServicesReadiness
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.corpora.postgres import PostgresCorpora
from knowledge_ingest.corpora.usecases import CorpusUseCases
from knowledge_ingest.deletion.postgres import PostgresTombstones
from knowledge_ingest.deletion.usecases import RemovalWorkers, TombstoneUseCases
from knowledge_ingest.documents.feed import PostgresDocumentFeed
from knowledge_ingest.documents.postgres import PostgresDocuments
from knowledge_ingest.documents.usecases import DocumentUseCases
from knowledge_ingest.domain.extraction import Extracted, Source
from knowledge_ingest.domain.jobs import RetryPolicy
from knowledge_ingest.domain.ports import BlobStore, DocumentFeed, Embedder, FileImporter, Readiness
from knowledge_ingest.events.outbox import OutboxRelay, PostgresEventLog, PostgresWakeups
from knowledge_ingest.events.usecases import EventRetention, EventUseCases
from knowledge_ingest.imports.postgres import PostgresImports, hash_file
from knowledge_ingest.imports.scheduler import ImportScheduler
from knowledge_ingest.imports.usecases import ImportUseCases
from knowledge_ingest.jobs.fetch import WebFetcher
from knowledge_ingest.jobs.pipeline import Pipeline, PipelineSettings
from knowledge_ingest.jobs.postgres import PostgresJobs
from knowledge_ingest.jobs.queue import PostgresJobQueue
from knowledge_ingest.jobs.uploads import UploadUseCases
from knowledge_ingest.jobs.usecases import JobUseCases
from knowledge_ingest.jobs.web import WebPageUseCases
from knowledge_ingest.jobs.workers import Workers
from knowledge_ingest.tenants.metrics import TenantMetrics
from knowledge_ingest.tenants.postgres import PostgresTenants
from knowledge_ingest.tenants.usecases import QuotaChecks, TenantUseCases


def wire(
    settings: IngestSettings,
    db: Database,
    blobs: BlobStore,
    embedder: Embedder,
    extract: Callable[[Source, str, str], Extracted],
    readiness: Readiness | None = None,
    importer: FileImporter | None = None,
    feed: DocumentFeed | None = None,
) -> tuple[IngestServicer, Workers]:
    documents, jobs, queue = PostgresDocuments(db), PostgresJobs(db), PostgresJobQueue(db)
    tombstones = PostgresTombstones(db)
    # Removals run wherever jobs do (a replica with no workers serves the API only).
    removals = RemovalWorkers(
        tombstones,
        count=1 if settings.workers else 0,
        lease_s=settings.lease_s,
        retention_s=settings.tombstone_retention_days * 86400.0,
    )
    event_log, wakeups = PostgresEventLog(db), PostgresWakeups(db)
    reach = PostgresReach(db)
    events = EventUseCases(event_log, wakeups, settings.events_heartbeat_s, settings.events_retention_s, reach)
    tenants = PostgresTenants(db, settings.common.tenants_enabled_by_default)
    quotas = QuotaChecks(tenants)
    uploads = UploadUseCases(documents, jobs, blobs, settings.common.max_upload_bytes, reach, quotas)
    fetcher = WebFetcher(settings.fetch_allow_hosts, timeout_s=settings.fetch_timeout_s)
    imports = (
        None
        if importer is None
        else ImportUseCases(settings.import_roots, importer, documents, jobs, PostgresImports(db), hash_file, reach)
    )
    servicer = IngestServicer(
        corpora=CorpusUseCases(PostgresCorpora(db), reach),
        documents=DocumentUseCases(documents, reach, feed or PostgresDocumentFeed(db)),
        uploads=uploads,
        jobs=JobUseCases(jobs, reach),
        web=WebPageUseCases(uploads, fetcher),
        imports=imports,
        tenants=TenantUseCases(tenants),
        events=events,
        tombstones=TombstoneUseCases(tombstones, documents, reach),
    )
    pipeline = Pipeline(
        queue=queue,
        documents=documents,
        blobs=blobs,
        embedder=embedder,
        extract=extract,
        settings=PipelineSettings(
            chunk_max_chars=settings.chunk_max_chars,
            embed_batch=settings.embed_batch,
            lease_s=settings.lease_s,
            embed_window=settings.embed_window,
            retry=RetryPolicy(settings.max_attempts, settings.retry_base_s, settings.max_interruptions),
        ),
        fetcher=fetcher,
        admission=jobs,
        max_upload_bytes=settings.common.max_upload_bytes,
        quotas=quotas,
    )
    workers = Workers(
        queue=queue,
        pipeline=pipeline,
        count=settings.workers,
        lease_s=settings.lease_s,
        readiness=readiness,
        wakeups=wakeups,
        services=[wakeups, OutboxRelay(event_log, wakeups), EventRetention(events), removals],
    )
    return servicer, workers


async def build_app(settings: IngestSettings | None = None) -> GrpcApp:
    # Each file is read in a child process with a time and memory cap: one pathological page
    # cannot hang a worker (and its renewed lease) forever.
    from knowledge_ingest.extraction.isolated import IsolatedExtractor

    settings = settings or IngestSettings.from_env()
    verifier = prepare(settings.common)
    signer = ServiceTokenSigner.for_service(settings.common)  # ingest signs every internal call
    async with AsyncExitStack() as resources:
        db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
        resources.push_async_callback(db.close)
        blobs = ContentIndexClient(settings.content_index_address, signer, kept=KeptBlobs())
        resources.push_async_callback(blobs.close)
        embedder = EmbedderClient(settings.embedder_address, signer)
        resources.push_async_callback(embedder.close)
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        resources.push_async_callback(metrics.stop)
        readiness = ServicesReadiness(content_index=blobs.grpc_channel, embedder=embedder.grpc_channel)
        feed = PostgresDocumentFeed(db)
        resources.push_async_callback(feed.close)
        extractor = IsolatedExtractor(settings.extraction_limits())
        servicer, workers = wire(
            settings,
            db,
            blobs,
            embedder,
            extractor.extract,
            readiness,
            importer=blobs,
            feed=feed,
        )
        resources.push_async_callback(workers.stop)
        assert servicer.imports is not None
        scheduler = ImportScheduler(servicer.imports, settings.import_scan_interval_s)
        resources.push_async_callback(scheduler.stop)
        tenant_metrics = TenantMetrics(
            PostgresTenants(db, settings.common.tenants_enabled_by_default).totals,
            settings.metrics_max_tenants,
            settings.metrics_tenants_every_s,
        )
        resources.push_async_callback(tenant_metrics.stop)
        app = GrpcApp.for_service(
            settings.common,
            [service_spec(servicer)],
            verifier,
            on_stop=[resources.pop_all().aclose],
            readiness=[health.database(db)],
            tenant_gate=enablement_gate(db, settings.common.tenants_enabled_by_default),
        )
    app.on_start.append(extractor.start)  # before the workers: their first file finds it started
    app.on_start.append(workers.start)
    app.on_start.append(scheduler.start)
    if settings.common.metrics_port:
        app.on_start.append(tenant_metrics.start)
    app.on_drain.append(feed.close)  # the watches end with UNAVAILABLE; their clients watch again
    return app
