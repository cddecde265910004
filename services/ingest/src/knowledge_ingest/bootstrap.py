"""The one place that reads ingest's configuration and wires its adapters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.pool import Database
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.service_tokens import ServiceTokenSigner
from knowledge_runtime.settings import SettingsError

from knowledge_ingest.adapters.postgres import PostgresCorpora
from knowledge_ingest.adapters.services import ContentIndexClient, EmbedderClient
from knowledge_ingest.adapters.store import PostgresIngestStore
from knowledge_ingest.api.servicer import IngestServicer, service_spec
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.domain.extraction import Extracted
from knowledge_ingest.domain.ports import BlobStore, Embedder
from knowledge_ingest.service_layer.corpora import CorpusUseCases
from knowledge_ingest.service_layer.documents import DocumentUseCases
from knowledge_ingest.service_layer.jobs import JobUseCases
from knowledge_ingest.service_layer.pipeline import Pipeline, PipelineSettings
from knowledge_ingest.service_layer.uploads import UploadUseCases
from knowledge_ingest.worker import Workers


def wire(settings: IngestSettings, db: Database, blobs: BlobStore, embedder: Embedder,
         extract: Callable[[Path, str, str], Extracted]) -> tuple[IngestServicer, Workers]:
    store = PostgresIngestStore(db)
    servicer = IngestServicer(
        corpora=CorpusUseCases(PostgresCorpora(db)),
        documents=DocumentUseCases(store),
        uploads=UploadUseCases(store, blobs, settings.max_upload_bytes),
        jobs=JobUseCases(store),
    )
    pipeline = Pipeline(
        store=store, blobs=blobs, embedder=embedder, extract=extract,
        settings=PipelineSettings(chunk_max_chars=settings.chunk_max_chars, embed_batch=settings.embed_batch,
                                  lease_s=settings.lease_s, max_attempts=settings.max_attempts,
                                  retry_base_s=settings.retry_base_s),
    )
    workers = Workers(store=store, pipeline=pipeline, count=settings.workers, lease_s=settings.lease_s)
    return servicer, workers


async def build_app(settings: IngestSettings | None = None) -> GrpcApp:
    # Each file is read in a child process with a time and memory cap: one pathological page
    # cannot hang a worker (and its renewed lease) forever.
    from knowledge_ingest.adapters.extraction.isolated import IsolatedExtractor

    settings = settings or IngestSettings.from_env()
    verifier = prepare(settings.common)
    if settings.service_key is None:
        raise SettingsError("KNOWLEDGE_SERVICE_KEY_PATH is required (the key ingest signs internal calls with)")
    signer = ServiceTokenSigner.for_service(settings.common, settings.service_key)
    db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
    blobs = ContentIndexClient(settings.content_index_address, signer)
    embedder = EmbedderClient(settings.embedder_address, signer)
    servicer, workers = wire(settings, db, blobs, embedder, IsolatedExtractor().extract)
    metrics = start_metrics_server(settings.metrics_port, settings.common.host)
    app = GrpcApp.for_service(settings.common, [service_spec(servicer)], verifier,
                              on_stop=[workers.stop, metrics.stop, blobs.close, embedder.close, db.close])
    app.on_start.append(workers.start)
    return app
