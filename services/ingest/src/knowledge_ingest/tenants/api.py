"""TenantService over gRPC: a tenant's enablement, quotas and usage."""

from __future__ import annotations

import math
from decimal import Decimal

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import PLATFORM_ADMIN, current_scope
from knowledge_runtime.server import ServiceSpec
from knowledge_runtime.tenancy import Quotas, TenantSettings

from knowledge_ingest.convert import timestamp
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.usage import UsageReport
from knowledge_ingest.tenants.usecases import TenantUseCases

CAPABILITIES = {
    "GetTenantSettings": PLATFORM_ADMIN,
    "UpdateTenantSettings": PLATFORM_ADMIN,
    "GetUsage": "corpus.read",
}
Context = grpc.aio.ServicerContext
_COUNTS = ("max_documents", "max_bytes", "max_chunks", "max_embedding_tokens_per_month")


def quotas_from(message: ingest_pb2.TenantQuotas) -> Quotas:
    counts = {name: getattr(message, name) if message.HasField(name) else None for name in _COUNTS}
    cost = None
    if message.HasField("max_llm_cost_per_month"):
        value = message.max_llm_cost_per_month
        if not math.isfinite(value):
            raise InvalidRequest(
                "quotas.max_llm_cost_per_month must be a finite number", field="quotas.max_llm_cost_per_month"
            )
        cost = Decimal(str(value))
    return Quotas(**counts, max_llm_cost_per_month=cost)


def quotas_message(quotas: Quotas) -> ingest_pb2.TenantQuotas:
    message = ingest_pb2.TenantQuotas()
    for name in _COUNTS:
        value = getattr(quotas, name)
        if value is not None:
            setattr(message, name, value)
    if quotas.max_llm_cost_per_month is not None:
        message.max_llm_cost_per_month = float(quotas.max_llm_cost_per_month)
    return message


def settings_message(settings: TenantSettings) -> ingest_pb2.TenantSettings:
    message = ingest_pb2.TenantSettings(
        tenant=settings.tenant,
        enabled=settings.enabled,
        quotas=quotas_message(settings.quotas),
        configured=settings.configured,
        updated_by=settings.updated_by,
        features=list(settings.features),
    )
    if settings.update_time is not None:
        message.update_time.CopyFrom(timestamp(settings.update_time))
    return message


def usage_message(report: UsageReport) -> ingest_pb2.Usage:
    return ingest_pb2.Usage(
        period=report.period,
        document_count=report.documents,
        stored_bytes=report.stored_bytes,
        chunk_count=report.chunks,
        embedding_tokens=report.embedding_tokens,
        embedding_cost=float(report.embedding_cost),
        llm_tokens=report.llm_tokens,
        llm_cost=float(report.llm_cost),
        quotas=quotas_message(report.quotas),
        scope="" if report.scope is None else str(report.scope),
    )


class TenantServicer(ingest_pb2_grpc.TenantServiceServicer):
    def __init__(self, tenants: TenantUseCases) -> None:
        self._tenants = tenants

    async def GetTenantSettings(
        self, request: ingest_pb2.GetTenantSettingsRequest, context: Context
    ) -> ingest_pb2.TenantSettings:
        return settings_message(await self._tenants.get_settings(current_scope(), request.tenant))

    async def UpdateTenantSettings(
        self, request: ingest_pb2.UpdateTenantSettingsRequest, context: Context
    ) -> ingest_pb2.UpdateTenantSettingsResponse:
        if not request.HasField("enabled"):
            raise InvalidRequest("enabled is required (true or false)", field="enabled")
        settings = await self._tenants.update_settings(
            current_scope(), request.tenant, request.enabled, quotas_from(request.quotas), list(request.features)
        )
        return ingest_pb2.UpdateTenantSettingsResponse(settings=settings_message(settings))

    async def GetUsage(self, request: ingest_pb2.GetUsageRequest, context: Context) -> ingest_pb2.Usage:
        return usage_message(await self._tenants.usage(current_scope(), request.period))


def service_spec(servicer: TenantServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["TenantService"],
        register=lambda server: ingest_pb2_grpc.add_TenantServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
        # Platform administration: the operator names any tenant in the request, and nothing of a
        # tenant's corpora is read or written, so no scope of the operator's token is involved.
        unscoped=["GetTenantSettings", "UpdateTenantSettings"],
    )
