"""The one place that reads content-index's configuration and wires its adapters."""

from __future__ import annotations

from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import SettingsError

from knowledge_content_index.api.servicer import ContentIndexServicer, service_spec
from knowledge_content_index.config import ContentIndexSettings


async def build_app(settings: ContentIndexSettings | None = None) -> GrpcApp:
    settings = settings or ContentIndexSettings.from_env()
    verifier = prepare(settings.common)
    try:
        settings.blob_root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SettingsError(f"KNOWLEDGE_BLOB_ROOT: cannot create {settings.blob_root} ({error.strerror})") from None
    db = await connect_service_database(settings.common)
    return GrpcApp.for_service(settings.common, [service_spec(ContentIndexServicer())], verifier, on_stop=[db.close])
