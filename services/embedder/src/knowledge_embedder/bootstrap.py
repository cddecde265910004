"""The one place that reads the embedder's configuration and wires its adapters."""

from __future__ import annotations

from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.server import GrpcApp

from knowledge_embedder.api.servicer import EmbedderServicer, service_spec
from knowledge_embedder.config import EmbedderSettings


async def build_app(settings: EmbedderSettings | None = None) -> GrpcApp:
    settings = settings or EmbedderSettings.from_env()
    verifier = prepare(settings.common)
    db = await connect_service_database(settings.common)
    return GrpcApp.for_service(settings.common, [service_spec(EmbedderServicer())], verifier, on_stop=[db.close])
