"""Registering and managing webhooks: the endpoints, their secrets, their place in the events."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from knowledge_runtime.auth import Scope
from knowledge_runtime.ids import parse_id
from knowledge_runtime.refusals import Refusal, Refused

from knowledge_ingest.domain import webhooks as rules
from knowledge_ingest.domain.errors import FetchFailed, UrlRefused, WebhookNotFound
from knowledge_ingest.domain.events import parse_cursor, start_after
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import EventLog, ReachSource, SecretSealer, TargetFence, WebhookStore
from knowledge_ingest.domain.webhooks import Delivery, Webhook, WebhookChanges


@dataclass
class WebhookUseCases:
    store: WebhookStore
    reach: ReachSource
    events: EventLog
    sealer: SecretSealer
    fence: TargetFence
    allowed_hosts: frozenset[str]
    random: Callable[[int], bytes] = field(default=secrets.token_bytes)

    async def create(self, scope: Scope, url: str, types: Sequence[str], text: str) -> tuple[Webhook, str]:
        """The webhook and its secret (answered this once). The URL is checked by form and by
        where its host resolves now; the deliverer checks the address again at every connection."""
        reader = await self.reach.reader(scope)
        rules.webhook_target(url, self.allowed_hosts)
        chosen, kept = rules.event_types(types), rules.description(text)
        try:
            await self.fence.check(url)
        except FetchFailed as error:  # a host that resolves nowhere is no endpoint either
            raise UrlRefused(str(error).removeprefix("the page could not be fetched: ")) from None
        secret = rules.new_secret(self.random(rules.SECRET_BYTES))
        registrant = rules.registrant_of(scope, reader)
        sealed = self.sealer.seal(scope.tenant, url, secret)
        webhook = await self.store.create(
            scope.tenant, url, chosen, kept, registrant, sealed, rules.MAX_WEBHOOKS_PER_TENANT
        )
        if webhook is None:
            limit = rules.MAX_WEBHOOKS_PER_TENANT
            raise Refused(
                Refusal.QUOTA_EXHAUSTED,
                f"the tenant has {limit} webhooks, the most it may have; delete one first",
                metadata={"quota": "max_webhooks", "used": str(limit), "limit": str(limit)},
            )
        return webhook, secret

    async def listing(self, scope: Scope, page: Page) -> tuple[list[Webhook], int | None]:
        """The caller's webhooks after ``page.after_id``, oldest first, and where the next page starts."""
        reader = await self.reach.reader(scope)
        mine = [
            w
            for w in await self.store.of_tenant(scope.tenant)
            if w.webhook_id > page.after_id and rules.may_manage(reader, w.registrant)
        ]
        shown = mine[: page.size]
        return shown, shown[-1].webhook_id if len(mine) > page.size else None

    async def get(self, scope: Scope, webhook_id: str) -> Webhook:
        return await self._owned(scope, webhook_id)

    async def update(self, scope: Scope, webhook_id: str, wanted: WebhookChanges) -> Webhook:
        webhook = await self._owned(scope, webhook_id)
        return self._found(await self.store.update(scope.tenant, webhook.webhook_id, wanted), webhook_id)

    async def delete(self, scope: Scope, webhook_id: str) -> int:
        webhook = await self._owned(scope, webhook_id)
        if not await self.store.delete(scope.tenant, webhook.webhook_id):
            raise WebhookNotFound(webhook_id)
        return webhook.webhook_id

    async def rotate(self, scope: Scope, webhook_id: str, grace_s: int) -> tuple[Webhook, str]:
        grace = rules.grace_seconds(grace_s)
        webhook = await self._owned(scope, webhook_id)
        secret = rules.new_secret(self.random(rules.SECRET_BYTES))
        sealed = self.sealer.seal(scope.tenant, webhook.url, secret)
        rotated = await self.store.rotate(scope.tenant, webhook.webhook_id, sealed, grace)
        return self._found(rotated, webhook_id), secret

    async def replay(self, scope: Scope, webhook_id: str, after: str) -> Webhook:
        """Delivery goes on after the cursor ``after`` (empty: the oldest event kept); a cursor
        ahead of the newest or older than the events kept is refused as WatchEvents refuses it."""
        webhook = await self._owned(scope, webhook_id)
        first, head = await self.events.bounds(scope.tenant)
        cursor = start_after(parse_cursor(after), first, head)
        return self._found(await self.store.replay(scope.tenant, webhook.webhook_id, cursor), webhook_id)

    async def deliveries(self, scope: Scope, webhook_id: str, page: Page) -> tuple[list[Delivery], int | None]:
        """The attempts newest first, and where the next page starts."""
        webhook = await self._owned(scope, webhook_id)
        found = await self.store.deliveries(webhook.webhook_id, page.probe())
        shown = found[: page.size]
        return shown, shown[-1].delivery_id if len(found) > page.size else None

    async def _owned(self, scope: Scope, webhook_id: str) -> Webhook:
        """The webhook when the caller may manage it; WebhookNotFound otherwise, as for none."""
        reader = await self.reach.reader(scope)
        key = parse_id(webhook_id)
        webhook = await self.store.get(scope.tenant, key) if key is not None else None
        if webhook is None or not rules.may_manage(reader, webhook.registrant):
            raise WebhookNotFound(webhook_id)
        return webhook

    @staticmethod
    def _found(webhook: Webhook | None, webhook_id: str) -> Webhook:
        """A webhook deleted between the check and the change is not found, as if deleted before."""
        if webhook is None:
            raise WebhookNotFound(webhook_id)
        return webhook
