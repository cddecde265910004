"""The one place that reads search's configuration and wires its adapters."""

from __future__ import annotations

from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.server import GrpcApp

from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.config import SearchSettings


async def build_app(settings: SearchSettings | None = None) -> GrpcApp:
    settings = settings or SearchSettings.from_env()
    verifier = prepare(settings.common)
    db = await connect_service_database(settings.common)
    return GrpcApp.for_service(settings.common, [service_spec(SearchServicer())], verifier, on_stop=[db.close])
