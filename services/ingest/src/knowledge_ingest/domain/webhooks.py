"""Webhooks: the decisions of pushing a tenant's events to an endpoint.

What an endpoint is sent (:func:`wanted`: its types, and the same rule as ``WatchEvents``,
``events.delivered_to``, for the token that registered it), how a delivery is signed (the Standard
Webhooks specification: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``), which URLs
may be registered (the fence of ``fetching``, and https only), what follows a failed attempt (the
retry schedule, and disabling after failing too long), and who may manage a webhook. The adapters
read, write and send; they decide nothing.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from knowledge_runtime.auth import Scope
from knowledge_runtime.reach import Access, Band, Reader, ScopePath

from knowledge_ingest.domain.errors import InvalidRequest, UrlRefused
from knowledge_ingest.domain.events import Event, EventType, NewEvent, delivered_to
from knowledge_ingest.domain.fetching import Target, is_allowed, target

SECRET_PREFIX = "whsec_"  # as the Standard Webhooks libraries take a secret
SECRET_BYTES = 32
MAX_DESCRIPTION_CHARS = 500
MAX_WEBHOOKS_PER_TENANT = 50
DEFAULT_GRACE_S = 86400  # how long a rotated-out secret still signs
MAX_GRACE_S = 7 * 86400
# Waits after the 1st, 2nd, ... failed attempt at an event; the last repeats until the endpoint
# is disabled. Each is moved by up to RETRY_JITTER of itself either way, so endpoints that failed
# together do not all come back in the same second.
DEFAULT_RETRY_SCHEDULE_S = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0)
RETRY_JITTER = 0.2
DEFAULT_DISABLE_AFTER_S = 3 * 86400.0
MAX_ERROR_CHARS = 300
SUBSCRIBABLE = tuple(t.value for t in EventType if t is not EventType.HEARTBEAT)
UPDATABLE = ("state", "event_types", "description")


class WebhookState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Registrant:
    """The token that registered a webhook, as far as reading goes: the webhook is sent what this
    token could read (its node, clearance, capabilities and principals), whoever changes it later."""

    node: ScopePath
    clearance: Band
    subject: str
    capabilities: frozenset[str]
    principals: frozenset[str] = frozenset()

    def scope(self, tenant: str) -> Scope:
        """The registrant as a caller, to be resolved as every caller is (a node the tenant no
        longer has reads nothing), speaking for the principals its token did (its groups)."""
        groups = frozenset(p.removeprefix(GROUP) for p in self.principals if p.startswith(GROUP))
        return Scope(tenant, self.capabilities, self.subject, str(self.node), self.clearance, groups=groups)


GROUP = "group:"


def registrant_of(scope: Scope, reader: Reader) -> Registrant:
    """What is kept of the registering token: its node, clearance, subject, capabilities and the
    principals it speaks for (``user:<sub>`` and its groups), so a document's access list is
    applied to the webhook as to the token's own reads."""
    return Registrant(reader.node, reader.clearance, scope.subject, scope.capabilities, scope.principals)


@dataclass(frozen=True, slots=True)
class Webhook:
    webhook_id: int
    tenant: str
    url: str
    event_types: tuple[str, ...]  # empty: every type
    description: str
    state: WebhookState
    disabled_reason: str
    registrant: Registrant
    cursor: int  # the seq of the last event acknowledged, or passed over as not the webhook's
    failed_attempts: int  # at the event after the cursor
    next_attempt_time: datetime.datetime
    failing_since: datetime.datetime | None
    previous_secret_expire_time: datetime.datetime | None
    create_time: datetime.datetime
    update_time: datetime.datetime
    version: int  # bumped by every change through the API: a deliverer that read another stops


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one POST of an event came to."""

    status_code: int  # 0: no answer
    latency_ms: int
    error: str = ""  # why it failed, for a person; empty when the endpoint answered 2xx

    @property
    def delivered(self) -> bool:
        return not self.error and 200 <= self.status_code < 300


@dataclass(frozen=True, slots=True)
class Delivery:
    """One attempt as ListWebhookDeliveries shows it."""

    delivery_id: int
    event_id: uuid.UUID
    cursor: int
    type: str
    attempt: int
    attempt_time: datetime.datetime
    status_code: int
    latency_ms: int
    delivered: bool
    error: str


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    schedule_s: tuple[float, ...] = DEFAULT_RETRY_SCHEDULE_S
    disable_after_s: float = DEFAULT_DISABLE_AFTER_S


@dataclass(frozen=True, slots=True)
class AfterFailure:
    """What a failed attempt leads to: the next attempt at the same event, or the webhook disabled
    (``disabled_reason`` set)."""

    failed_attempts: int
    failing_since: datetime.datetime
    next_attempt_time: datetime.datetime
    disabled_reason: str = ""


@dataclass(frozen=True, slots=True)
class WebhookChanges:
    """What UpdateWebhook changes; None: left as it is."""

    state: WebhookState | None = None
    event_types: tuple[str, ...] | None = None
    description: str | None = None


# ---- registering ----


def webhook_target(url: str, allowed: frozenset[str]) -> Target:
    """The URL's scheme, host and port, or UrlRefused: a URL ``fetching.target`` refuses, or plain
    http to a host the operator did not allow (KNOWLEDGE_WEBHOOK_ALLOW_HOSTS). The address is the
    fence's to check, when the webhook is created and at every connection."""
    where = target(url)
    if where.scheme != "https" and not is_allowed(where, allowed):
        raise UrlRefused("a webhook's URL must be https (plain http only for the operator's allowed hosts)")
    return where


def event_types(requested: Iterable[str]) -> tuple[str, ...]:
    """The types asked for, each once, in the order asked; an unknown one is refused by name."""
    chosen: list[str] = []
    for name in requested:
        if name not in SUBSCRIBABLE:
            raise InvalidRequest(
                f"event_types: {name[:60]!r} is not an event type; the types are {', '.join(SUBSCRIBABLE)}",
                field="event_types",
            )
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def description(text: str) -> str:
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise InvalidRequest(f"description is over {MAX_DESCRIPTION_CHARS} characters", field="description")
    return text


def grace_seconds(asked: int) -> int:
    """How long a rotated-out secret still signs: 0 means a day, else 1 s to 7 days."""
    if asked == 0:
        return DEFAULT_GRACE_S
    if not 1 <= asked <= MAX_GRACE_S:
        raise InvalidRequest(f"grace_seconds must be 1..{MAX_GRACE_S} (0: a day)", field="grace_seconds")
    return asked


def changes(paths: Sequence[str], state: WebhookState | None, types: Sequence[str], text: str) -> WebhookChanges:
    """UpdateWebhook's changes (AIP-134): the paths named ("*": all three), or without a mask the
    fields the request sets. DISABLED is the service's to set, never a caller's."""
    if not paths:
        paths = [
            name
            for name, given in (("state", state is not None), ("event_types", bool(types)), ("description", bool(text)))
            if given
        ]
        if not paths:
            raise InvalidRequest("nothing to change: set state, event_types or description", field="update_mask")
    if "*" in paths:
        paths = list(UPDATABLE)
    unknown = [p for p in paths if p not in UPDATABLE]
    if unknown:
        raise InvalidRequest(
            f"update_mask path {unknown[0][:60]!r} cannot be changed; the paths are {', '.join(UPDATABLE)} or *",
            field="update_mask",
        )
    if "state" in paths and state not in (WebhookState.ACTIVE, WebhookState.PAUSED):
        raise InvalidRequest("state must be WEBHOOK_STATE_ACTIVE or WEBHOOK_STATE_PAUSED", field="webhook.state")
    return WebhookChanges(
        state=state if "state" in paths else None,
        event_types=event_types(types) if "event_types" in paths else None,
        description=description(text) if "description" in paths else None,
    )


def may_manage(reader: Reader, registrant: Registrant) -> bool:
    """Whether a webhooks.admin caller may see or change a webhook: only as the corpus write rule
    says of a corpus bound at the registrant's node with the registrant's clearance as its band
    (``Reader.access``: the same node, a clearance that allows it). A token low in the hierarchy,
    or of a lower clearance, never learns where the events of a wider reach go, nor their secret."""
    return reader.access(registrant.node, registrant.clearance) is Access.WRITABLE


# ---- delivering ----


def wanted(webhook: Webhook, event: Event, reader: Reader | None) -> bool:
    """Whether ``event`` is sent to the webhook: one of its types, and one its registrant could
    read now (``delivered_to``, the rule of WatchEvents; a registrant whose node no longer resolves,
    ``reader`` None, reads nothing)."""
    if webhook.event_types and event.type.value not in webhook.event_types:
        return False
    return reader is not None and delivered_to(event, reader, webhook.registrant.capabilities)


def new_secret(random: bytes) -> str:
    if len(random) != SECRET_BYTES:
        raise ValueError(f"a secret is {SECRET_BYTES} random bytes")
    return SECRET_PREFIX + base64.b64encode(random).decode("ascii")


def _key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("not a webhook secret") from None


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,`` and the base64 HMAC-SHA256, under the secret's bytes, of ``id.timestamp.body``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest()).decode("ascii")


def delivery_headers(event_id: str, timestamp: int, body: bytes, secrets: Sequence[str]) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: the event id (the same on every retry, so a
    receiver de-duplicates by it), the attempt's time, and a signature per secret in use (after a
    rotation, the new and the previous, space-separated)."""
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(secret, event_id, timestamp, body) for secret in secrets),
        "content-type": "application/json",
    }


def retry_delay(failed_attempts: int, schedule_s: Sequence[float], unit: float) -> float:
    """The wait after the ``failed_attempts``-th failure in a row (1-based): the schedule's step,
    its last repeating, moved by up to RETRY_JITTER of itself by ``unit`` (uniform in [0, 1))."""
    step = schedule_s[min(max(failed_attempts, 1), len(schedule_s)) - 1]
    return step * (1.0 + RETRY_JITTER * (2.0 * unit - 1.0))


def after_failure(
    failed_before: int,
    failing_since: datetime.datetime | None,
    seq: int,
    attempt: Attempt,
    now: datetime.datetime,
    policy: RetryPolicy,
    unit: float,
) -> AfterFailure:
    """After a failed attempt at event ``seq`` (``failed_before`` attempts at it failed already;
    the endpoint failing since ``failing_since``, None: it was not): the next attempt on the
    schedule, or, once the endpoint has been failing for ``disable_after_s``, the webhook disabled
    with why."""
    since = failing_since or now
    failed = failed_before + 1
    following = now + datetime.timedelta(seconds=retry_delay(failed, policy.schedule_s, unit))
    reason = ""
    if (now - since).total_seconds() >= policy.disable_after_s:
        last = attempt.error or f"HTTP {attempt.status_code}"
        reason = (
            f"no 2xx answer for {_duration(policy.disable_after_s)} ({failed} attempts at event {seq}; the last: {last})"
        )[:MAX_ERROR_CHARS]
    return AfterFailure(failed, since, following, reason)


def disabled_event(webhook_id: int, reason: str) -> NewEvent:
    return NewEvent(EventType.WEBHOOK_DISABLED, None, None, {"webhook_id": str(webhook_id), "reason": reason})


def answer_error(status_code: int) -> str:
    """Why an answer that is not 2xx failed the attempt."""
    if 300 <= status_code < 400:
        return f"the endpoint answered {status_code}: redirects are not followed"
    if 200 <= status_code < 300:
        return ""
    return f"the endpoint answered {status_code}"


def bounded_backlogs(backlogs: Sequence[tuple[str, int, float]], limit: int) -> list[tuple[str, int, float]]:
    """(label, events behind, oldest undelivered age in s) per webhook for the metrics: the
    ``limit`` furthest behind under their own label, the rest summed (their oldest age kept) under
    "_other", so the series stay bounded however many webhooks there are."""
    ranked = sorted(backlogs, key=lambda b: (-b[1], b[0]))
    kept = list(ranked[:limit])
    rest = ranked[limit:]
    if rest:
        kept.append(("_other", sum(b[1] for b in rest), max(b[2] for b in rest)))
    return kept


def _duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g} day(s)"
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds:g} s"
