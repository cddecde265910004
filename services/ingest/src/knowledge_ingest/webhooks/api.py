"""WebhookService over gRPC, and an event's body as a webhook is sent it (the JSON WatchEvents
gives over REST)."""

from __future__ import annotations

import json
from typing import cast

import grpc
from google.protobuf import json_format
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import WEBHOOKS_ADMIN, current_scope
from knowledge_runtime.pagination import decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import timestamp
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.events import Event
from knowledge_ingest.domain.webhooks import Delivery, Webhook, WebhookChanges, WebhookState, changes
from knowledge_ingest.events.api import event_message
from knowledge_ingest.guards import page_of
from knowledge_ingest.webhooks.usecases import WebhookUseCases

CAPABILITIES = {
    "CreateWebhook": WEBHOOKS_ADMIN,
    "ListWebhooks": WEBHOOKS_ADMIN,
    "GetWebhook": WEBHOOKS_ADMIN,
    "UpdateWebhook": WEBHOOKS_ADMIN,
    "DeleteWebhook": WEBHOOKS_ADMIN,
    "RotateWebhookSecret": WEBHOOKS_ADMIN,
    "ReplayWebhook": WEBHOOKS_ADMIN,
    "ListWebhookDeliveries": WEBHOOKS_ADMIN,
}
Context = grpc.aio.ServicerContext
_STATE_PREFIX = "WEBHOOK_STATE_"


def event_body(event: Event) -> bytes:
    """The event as one compact JSON object, as the gateway prints it for WatchEvents: proto
    field names, every field (empty ones too), timestamps in RFC 3339."""
    values = json_format.MessageToDict(
        event_message(event), preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode()


def state_value(state: WebhookState) -> ingest_pb2.WebhookState:
    return cast(ingest_pb2.WebhookState, ingest_pb2.WebhookState.Value(_STATE_PREFIX + state.name))


def webhook_message(webhook: Webhook) -> ingest_pb2.Webhook:
    message = ingest_pb2.Webhook(
        webhook_id=str(webhook.webhook_id),
        url=webhook.url,
        event_types=list(webhook.event_types),
        description=webhook.description,
        state=state_value(webhook.state),
        disabled_reason=webhook.disabled_reason,
        scope=str(webhook.registrant.node),
        clearance=webhook.registrant.clearance.value,
        cursor=str(webhook.cursor),
        failed_attempts=webhook.failed_attempts,
        created_by=webhook.registrant.subject,
        create_time=timestamp(webhook.create_time),
        update_time=timestamp(webhook.update_time),
    )
    if webhook.failing_since is not None:
        message.failing_since.CopyFrom(timestamp(webhook.failing_since))
        message.next_attempt_time.CopyFrom(timestamp(webhook.next_attempt_time))
    if webhook.previous_secret_expire_time is not None:
        message.previous_secret_expire_time.CopyFrom(timestamp(webhook.previous_secret_expire_time))
    return message


def delivery_message(delivery: Delivery) -> ingest_pb2.WebhookDelivery:
    return ingest_pb2.WebhookDelivery(
        delivery_id=str(delivery.delivery_id),
        event_id=str(delivery.event_id),
        cursor=str(delivery.cursor),
        type=delivery.type,
        attempt=delivery.attempt,
        attempt_time=timestamp(delivery.attempt_time),
        status_code=delivery.status_code,
        latency_ms=delivery.latency_ms,
        delivered=delivery.delivered,
        error=delivery.error,
    )


def requested_changes(request: ingest_pb2.UpdateWebhookRequest) -> WebhookChanges:
    given = request.webhook
    if given.webhook_id and given.webhook_id != request.webhook_id:
        raise InvalidRequest("webhook.webhook_id must be empty or the webhook_id", field="webhook.webhook_id")
    name = ingest_pb2.WebhookState.Name(given.state).removeprefix(_STATE_PREFIX)
    state = None if given.state == ingest_pb2.WEBHOOK_STATE_UNSPECIFIED else WebhookState[name]
    return changes(list(request.update_mask.paths), state, list(given.event_types), given.description)


class WebhookServicer(ingest_pb2_grpc.WebhookServiceServicer):
    def __init__(self, webhooks: WebhookUseCases) -> None:
        self._webhooks = webhooks

    async def CreateWebhook(
        self, request: ingest_pb2.CreateWebhookRequest, context: Context
    ) -> ingest_pb2.CreateWebhookResponse:
        webhook, secret = await self._webhooks.create(
            current_scope(), request.url, list(request.event_types), request.description
        )
        return ingest_pb2.CreateWebhookResponse(webhook=webhook_message(webhook), secret=secret)

    async def ListWebhooks(
        self, request: ingest_pb2.ListWebhooksRequest, context: Context
    ) -> ingest_pb2.ListWebhooksResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        webhooks, next_after = await self._webhooks.listing(current_scope(), page)
        return ingest_pb2.ListWebhooksResponse(
            webhooks=[webhook_message(w) for w in webhooks], next_page_token=encode_page_token(next_after)
        )

    async def GetWebhook(self, request: ingest_pb2.GetWebhookRequest, context: Context) -> ingest_pb2.Webhook:
        return webhook_message(await self._webhooks.get(current_scope(), request.webhook_id))

    async def UpdateWebhook(
        self, request: ingest_pb2.UpdateWebhookRequest, context: Context
    ) -> ingest_pb2.UpdateWebhookResponse:
        webhook = await self._webhooks.update(current_scope(), request.webhook_id, requested_changes(request))
        return ingest_pb2.UpdateWebhookResponse(webhook=webhook_message(webhook))

    async def DeleteWebhook(
        self, request: ingest_pb2.DeleteWebhookRequest, context: Context
    ) -> ingest_pb2.DeleteWebhookResponse:
        deleted = await self._webhooks.delete(current_scope(), request.webhook_id)
        return ingest_pb2.DeleteWebhookResponse(webhook_id=str(deleted))

    async def RotateWebhookSecret(
        self, request: ingest_pb2.RotateWebhookSecretRequest, context: Context
    ) -> ingest_pb2.RotateWebhookSecretResponse:
        webhook, secret = await self._webhooks.rotate(current_scope(), request.webhook_id, request.grace_seconds)
        return ingest_pb2.RotateWebhookSecretResponse(webhook=webhook_message(webhook), secret=secret)

    async def ReplayWebhook(
        self, request: ingest_pb2.ReplayWebhookRequest, context: Context
    ) -> ingest_pb2.ReplayWebhookResponse:
        webhook = await self._webhooks.replay(current_scope(), request.webhook_id, request.after)
        return ingest_pb2.ReplayWebhookResponse(webhook=webhook_message(webhook))

    async def ListWebhookDeliveries(
        self, request: ingest_pb2.ListWebhookDeliveriesRequest, context: Context
    ) -> ingest_pb2.ListWebhookDeliveriesResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        deliveries, next_after = await self._webhooks.deliveries(current_scope(), request.webhook_id, page)
        return ingest_pb2.ListWebhookDeliveriesResponse(
            deliveries=[delivery_message(d) for d in deliveries], next_page_token=encode_page_token(next_after)
        )


def service_spec(servicer: WebhookServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["WebhookService"],
        register=lambda server: ingest_pb2_grpc.add_WebhookServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
