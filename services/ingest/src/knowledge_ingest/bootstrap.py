"""The one place that reads ingest's configuration and composes its capabilities.

``wire`` builds every capability over one database and the ports it is handed (blobs, the
embedder, extraction, the readiness of the services a job needs, the file importer, the sealer of
webhook secrets): its gRPC
services and its background loops. Nothing in it is optional. ``build_app`` opens the real
adapters; what it opens joins one ``AsyncExitStack``: a step that fails half-way through closes
what the steps before it opened, and a started app closes all of it, newest first, as it stops
(the background loops first, then the clients and the metrics server, the pool last).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import cast

from knowledge_runtime import health
from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import PostgresReach
from knowledge_runtime.db.tenant_settings import enablement_gate
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.periodic import Background, Periodic, Runs
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_runtime.service_tokens import ServiceTokenSigner

from knowledge_ingest.clients.kept_blobs import KeptBlobs
from knowledge_ingest.clients.services import ContentIndexClient, EmbedderClient, SearchClient, ServicesReadiness
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.corpora import api as corpora_api
from knowledge_ingest.corpora.postgres import PostgresCorpora
from knowledge_ingest.corpora.usecases import CorpusUseCases
from knowledge_ingest.deletion.postgres import PostgresTombstones
from knowledge_ingest.deletion.usecases import TombstoneUseCases
from knowledge_ingest.deletion.workers import RemovalWorkers
from knowledge_ingest.documents import api as documents_api
from knowledge_ingest.documents.feed import PostgresDocumentFeed
from knowledge_ingest.documents.postgres import PostgresDocuments
from knowledge_ingest.documents.usecases import DocumentUseCases
from knowledge_ingest.domain.extraction import Extracted, Source
from knowledge_ingest.domain.jobs import RetryPolicy
from knowledge_ingest.domain.ports import (
    BlobStore,
    Embedder,
    FileImporter,
    HeldModels,
    Readiness,
    SecretSealer,
    SetSearch,
)
from knowledge_ingest.events import api as events_api
from knowledge_ingest.events.outbox import OutboxRelay, PostgresEventLog, PostgresWakeups
from knowledge_ingest.events.usecases import EventUseCases
from knowledge_ingest.imports import api as imports_api
from knowledge_ingest.imports.postgres import PostgresImports, hash_file
from knowledge_ingest.imports.scheduler import scheduled_passes
from knowledge_ingest.imports.usecases import ImportUseCases
from knowledge_ingest.jobs import api as jobs_api
from knowledge_ingest.jobs.fetch import WebFetcher
from knowledge_ingest.jobs.pipeline import Pipeline, PipelineSettings
from knowledge_ingest.jobs.postgres import PostgresJobs
from knowledge_ingest.jobs.queue import PostgresJobQueue
from knowledge_ingest.jobs.uploads import UploadUseCases
from knowledge_ingest.jobs.usecases import JobUseCases
from knowledge_ingest.jobs.web import WebPageUseCases
from knowledge_ingest.jobs.workers import Workers
from knowledge_ingest.models import api as models_api
from knowledge_ingest.models.evaluation import EvaluationSetUseCases, Evaluator
from knowledge_ingest.models.postgres import PostgresEvaluationSets, PostgresModelChanges
from knowledge_ingest.models.usecases import ModelChangeUseCases
from knowledge_ingest.passages import api as passages_api
from knowledge_ingest.passages.postgres import PostgresPassages
from knowledge_ingest.passages.usecases import PassageUseCases
from knowledge_ingest.tenants import api as tenants_api
from knowledge_ingest.tenants.metrics import TenantMetrics
from knowledge_ingest.tenants.postgres import PostgresTenants
from knowledge_ingest.tenants.usecases import QuotaChecks, TenantUseCases
from knowledge_ingest.webhooks import api as webhooks_api
from knowledge_ingest.webhooks.deliverer import WebhookDeliverer
from knowledge_ingest.webhooks.postgres import PostgresDeliveries, PostgresWebhooks
from knowledge_ingest.webhooks.sealing import AesGcmSealer
from knowledge_ingest.webhooks.sender import WebhookSender
from knowledge_ingest.webhooks.usecases import WebhookUseCases

EVENTS_PRUNE_EVERY_S = 60.0
WEBHOOK_METRICS_EVERY_S = 15.0


@dataclass
class Ingest:
    """Ingest composed: its gRPC services, its background loops, and the parts a process (or a
    test) reaches into."""

    services: list[ServiceSpec]
    background: Background
    feed: PostgresDocumentFeed  # ended as a drain begins: the watches end with UNAVAILABLE
    workers: Workers
    corpora: CorpusUseCases
    uploads: UploadUseCases
    imports: ImportUseCases
    reach: PostgresReach  # its ``reader`` is the server's scope resolver
    deliverer: WebhookDeliverer


def wire(
    settings: IngestSettings,
    db: Database,
    *,
    blobs: BlobStore,
    embedder: Embedder,
    extract: Callable[[Source, str, str], Extracted],
    readiness: Readiness,
    importer: FileImporter,
    sealer: SecretSealer,
    search: SetSearch,
) -> Ingest:
    reach = PostgresReach(db)
    document_store, job_store, queue = PostgresDocuments(db), PostgresJobs(db), PostgresJobQueue(db)
    tombstones = PostgresTombstones(db)
    event_log, wakeups = PostgresEventLog(db), PostgresWakeups(db)
    feed = PostgresDocumentFeed(db)
    tenant_store = PostgresTenants(db, settings.common.tenants_enabled_by_default)
    quotas = QuotaChecks(tenant_store)
    fetcher = WebFetcher(settings.fetch_allow_hosts, timeout_s=settings.fetch_timeout_s)
    hooks = settings.webhooks
    sender = WebhookSender(hooks.allow_hosts, timeout_s=hooks.timeout_s)

    corpus_cases = CorpusUseCases(PostgresCorpora(db), reach, document_store)
    document_cases = DocumentUseCases(document_store, reach, feed)
    deletion = TombstoneUseCases(tombstones, document_store, reach)
    uploads = UploadUseCases(document_store, job_store, blobs, settings.common.max_upload_bytes, reach, quotas)
    hash_capped = functools.partial(hash_file, max_bytes=settings.common.max_upload_bytes)
    import_cases = ImportUseCases(
        settings.import_roots, importer, document_store, job_store, PostgresImports(db), hash_capped, reach
    )
    event_cases = EventUseCases(event_log, wakeups, settings.events_heartbeat_s, settings.events_retention_s, reach)
    passage_cases = PassageUseCases(
        passages=PostgresPassages(db),
        corpora=corpus_cases,
        reach=reach,
        kinds=document_store,
        blobs=blobs,
        tombstones=tombstones,
        quotas=quotas,
        max_upload_bytes=settings.common.max_upload_bytes,
        access=document_store,
    )
    services = [
        corpora_api.service_spec(corpora_api.CorpusServicer(corpus_cases, deletion)),
        documents_api.service_spec(documents_api.DocumentServicer(document_cases, deletion)),
        jobs_api.service_spec(
            jobs_api.IngestJobServicer(
                uploads, WebPageUseCases(uploads, fetcher), JobUseCases(job_store, reach, document_store)
            )
        ),
        imports_api.service_spec(imports_api.ImportServicer(import_cases)),
        tenants_api.service_spec(tenants_api.TenantServicer(TenantUseCases(tenant_store, reach))),
        events_api.service_spec(events_api.EventServicer(event_cases)),
        passages_api.service_spec(passages_api.PassageServicer(passage_cases)),
        webhooks_api.service_spec(
            webhooks_api.WebhookServicer(
                WebhookUseCases(PostgresWebhooks(db), reach, event_log, sealer, sender, hooks.allow_hosts)
            )
        ),
    ]
    deliverer = WebhookDeliverer(
        PostgresDeliveries(db, hooks.lease_s),
        event_log,
        reach,
        sender,
        sealer,
        webhooks_api.event_body,
        hooks.retry,
        wakeups,
        concurrency=hooks.concurrency,
    )

    # The embedder client is both ports; a test's fake embedder may be only the first.
    held_models = cast(HeldModels, embedder)
    model_store, evaluation_sets = PostgresModelChanges(db), PostgresEvaluationSets(db)
    model_changes = ModelChangeUseCases(
        model_store,
        held_models,
        grace_s=settings.model_change_grace_s,
        evaluator=Evaluator(evaluation_sets, search),
        margin=settings.model_change_margin,
        batch=settings.model_change_batch,
    )
    services.append(
        models_api.service_spec(
            models_api.ModelChangeServicer(model_changes, EvaluationSetUseCases(evaluation_sets, reach))
        )
    )
    pipeline = Pipeline(
        queue=queue,
        documents=document_store,
        blobs=blobs,
        embedder=embedder,
        extract=extract,
        settings=PipelineSettings(
            chunk_max_chars=settings.chunk_max_chars,
            chunk_max_tokens=settings.chunk_max_tokens,
            chunk_window_share=settings.chunk_window_share,
            embed_batch=settings.embed_batch,
            lease_s=settings.lease_s,
            embed_window=settings.embed_window,
            retry=RetryPolicy(settings.max_attempts, settings.retry_base_s, settings.max_interruptions),
        ),
        fetcher=fetcher,
        admission=job_store,
        max_upload_bytes=settings.common.max_upload_bytes,
        quotas=quotas,
        stores=model_store.stores,
        models=held_models,
    )
    workers = Workers(
        queue=queue,
        pipeline=pipeline,
        count=settings.workers,
        lease_s=settings.lease_s,
        readiness=readiness,
        wakeups=wakeups,
    )
    loops: list[Runs] = [
        wakeups,  # first: the relay and the idle workers listen through it
        OutboxRelay(event_log, wakeups),
        Periodic("events_prune", event_cases.prune, EVENTS_PRUNE_EVERY_S),
        deliverer,
        Periodic(
            "webhook_deliveries_prune",
            functools.partial(deliverer.prune, settings.events_retention_s),
            EVENTS_PRUNE_EVERY_S,
        ),
        # Removals run wherever jobs do (a replica with no workers serves the API only).
        RemovalWorkers(
            tombstones,
            count=1 if settings.workers else 0,
            lease_s=settings.lease_s,
            retention_s=settings.tombstone_retention_days * 86400.0,
        ),
        workers,
        # Re-embedding runs wherever jobs do; one replica's step at a time advances the change
        # (its cursor moves in the transaction that writes the vectors).
        *(
            [
                Periodic("model_change_reembed", model_changes.reembed, settings.model_change_every_s),
                Periodic("model_change_tend", model_changes.tend, settings.model_change_every_s),
            ]
            if settings.workers
            else []
        ),
        *scheduled_passes(import_cases, settings.import_scan_interval_s),
    ]
    if settings.common.metrics_port:
        metrics = TenantMetrics(tenant_store.totals, settings.metrics_max_tenants)
        loops.append(Periodic("tenant_metrics", metrics.refresh, settings.metrics_tenants_every_s))
        loops.append(Periodic("webhook_metrics", deliverer.refresh_metrics, WEBHOOK_METRICS_EVERY_S))
    return Ingest(
        services=services,
        background=Background(loops),
        feed=feed,
        workers=workers,
        corpora=corpus_cases,
        uploads=uploads,
        imports=import_cases,
        reach=reach,
        deliverer=deliverer,
    )


async def build_app(settings: IngestSettings | None = None) -> GrpcApp:
    # Each file is read in a child process with a time and memory cap: one pathological page
    # cannot hang a worker (and its renewed lease) forever; and only as many children at once as
    # the memory budget holds, so concurrent uploads cannot add their caps up past it.
    from knowledge_ingest.extraction.isolated import IsolatedExtractor

    settings = settings or IngestSettings.from_env()
    verifier = prepare(settings.common)
    signer = ServiceTokenSigner.for_service(settings.common)  # ingest signs every internal call
    # Before anything is opened: an unreadable key stops the start.
    sealer = AesGcmSealer.from_file(settings.webhooks.key_path, create=settings.webhooks.create_key)
    async with AsyncExitStack() as resources:
        db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
        resources.push_async_callback(db.close)
        blobs = ContentIndexClient(settings.content_index_address, signer, kept=KeptBlobs())
        resources.push_async_callback(blobs.close)
        embedder = EmbedderClient(settings.embedder_address, signer)
        resources.push_async_callback(embedder.close)
        search = SearchClient(settings.search_address, signer)
        resources.push_async_callback(search.close)
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        resources.push_async_callback(metrics.stop)
        allowance = settings.extraction_allowance()
        extractor = IsolatedExtractor(
            settings.extraction_limits(), memory_bytes=allowance.memory_bytes, children=allowance.children
        )
        ingest = wire(
            settings,
            db,
            blobs=blobs,
            embedder=embedder,
            extract=extractor.extract,
            readiness=ServicesReadiness(content_index=blobs.grpc_channel, embedder=embedder.grpc_channel),
            importer=blobs,
            sealer=sealer,
            search=search,
        )
        resources.push_async_callback(ingest.feed.close)
        resources.push_async_callback(ingest.background.stop)
        app = GrpcApp.for_service(
            settings.common,
            ingest.services,
            verifier,
            on_stop=[resources.pop_all().aclose],
            readiness=[health.database(db)],
            tenant_gate=enablement_gate(db, settings.common.tenants_enabled_by_default),
            scope_resolver=ingest.reach.reader,
        )
    app.on_start.append(extractor.start)  # before the workers: their first file finds it started
    app.on_start.append(ingest.background.start)
    app.on_drain.append(ingest.feed.close)  # the watches end with UNAVAILABLE; their clients watch again
    return app
