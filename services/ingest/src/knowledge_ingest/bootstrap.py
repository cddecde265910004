"""The one place that reads ingest's configuration and wires its adapters."""

from __future__ import annotations

from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.server import GrpcApp

from knowledge_ingest.adapters.postgres import PostgresCorpora
from knowledge_ingest.api.servicer import IngestServicer, service_spec
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.usecases import CorpusUseCases


async def build_app(settings: IngestSettings | None = None) -> GrpcApp:
    settings = settings or IngestSettings.from_env()
    verifier = prepare(settings.common)
    db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
    servicer = IngestServicer(CorpusUseCases(PostgresCorpora(db)))
    return GrpcApp.for_service(settings.common, [service_spec(servicer)], verifier, on_stop=[db.close])
