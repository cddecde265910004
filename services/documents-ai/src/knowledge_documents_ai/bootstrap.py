"""The one place that reads documents-ai's configuration and wires its adapters.

What it opens joins one ``AsyncExitStack``: a step that fails half-way through closes what the
steps before it opened, and a started app closes all of it, newest first, as it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from knowledge_runtime import health
from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.reach import PostgresReach
from knowledge_runtime.db.tenant_settings import PostgresLlmBudget, enablement_gate
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.llm import ChatClient
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.server import GrpcApp

from knowledge_documents_ai.adapters.embedder import GrpcAnchors
from knowledge_documents_ai.adapters.postgres import (
    PostgresCostLedger,
    PostgresDocuments,
    PostgresResults,
    PostgresTaxonomy,
)
from knowledge_documents_ai.api.servicer import DocumentsAiServicer, service_spec
from knowledge_documents_ai.config import DocumentsAiSettings
from knowledge_documents_ai.usecases import DocumentsAi


def _embed_tokens(settings: DocumentsAiSettings) -> Callable[[str], str] | None:
    """Tokens for the embedder signed by this service, when it has a key; else the caller's is forwarded."""
    if not settings.sign_internal_calls:
        return None
    from knowledge_runtime.service_tokens import ServiceTokenSigner

    signer = ServiceTokenSigner.for_service(settings.common)
    return lambda tenant: signer.token(tenant, ("embed",))


async def build_app(settings: DocumentsAiSettings | None = None) -> GrpcApp:
    settings = settings or DocumentsAiSettings.from_env()
    verifier = prepare(settings.common)
    async with AsyncExitStack() as resources:
        db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
        resources.push_async_callback(db.close)
        anchors = GrpcAnchors(settings.embedder_address, token_for=_embed_tokens(settings))
        resources.push_async_callback(anchors.close)
        llm = None
        if settings.llm is not None:
            llm = ChatClient.from_settings(settings.llm)
            resources.push_async_callback(llm.close)
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        resources.push_async_callback(metrics.stop)
        usecases = DocumentsAi(
            taxonomy=PostgresTaxonomy(db),
            documents=PostgresDocuments(db),
            anchors=anchors,
            results=PostgresResults(db),
            ledger=PostgresCostLedger(db),
            llm=llm,
            tuning=settings.tuning,
            budget=PostgresLlmBudget(db) if llm is not None else None,
        )
        return GrpcApp.for_service(
            settings.common,
            [service_spec(DocumentsAiServicer(usecases))],
            verifier,
            on_stop=[resources.pop_all().aclose],
            readiness=[health.database(db)],
            tenant_gate=enablement_gate(db, settings.common.tenants_enabled_by_default),
            scope_resolver=PostgresReach(db).reader,
        )
