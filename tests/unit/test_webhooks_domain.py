"""The rules of webhooks, pure: what an endpoint is sent, how a delivery is signed (checked by the
Standard Webhooks reference library itself), which targets may be registered, what follows a
failed attempt, who manages a webhook; and the sealing of its secrets."""

from __future__ import annotations

import base64
import datetime
import json
import time
import uuid

import pytest
from knowledge_ingest.domain.errors import InvalidRequest, UrlRefused
from knowledge_ingest.domain.events import Event, EventPlacement, EventType
from knowledge_ingest.domain.system_corpora import CorpusKind
from knowledge_ingest.domain.webhooks import (
    DEFAULT_GRACE_S,
    RETRY_JITTER,
    Attempt,
    Registrant,
    RetryPolicy,
    Webhook,
    WebhookState,
    after_failure,
    answer_error,
    bounded_backlogs,
    changes,
    delivery_headers,
    event_types,
    grace_seconds,
    may_manage,
    new_secret,
    registrant_of,
    retry_delay,
    wanted,
    webhook_target,
)
from knowledge_ingest.webhooks.sealing import AesGcmSealer
from knowledge_runtime.auth import Scope
from knowledge_runtime.reach import Band, Reader, ScopePath
from standardwebhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
ROOT, ENG = ScopePath.parse("/"), ScopePath.parse("workspace:eng")


def webhook(types: tuple[str, ...] = (), node: ScopePath = ROOT, clearance: Band = Band.TENANT) -> Webhook:
    return Webhook(
        webhook_id=1,
        tenant="t",
        url="https://hooks.example.com/in",
        event_types=types,
        description="",
        state=WebhookState.ACTIVE,
        disabled_reason="",
        registrant=Registrant(node, clearance, "dev", frozenset({"webhooks.admin"})),
        cursor=0,
        failed_attempts=0,
        next_attempt_time=NOW,
        failing_since=None,
        previous_secret_expire_time=None,
        create_time=NOW,
        update_time=NOW,
        version=1,
    )


def event(kind: EventType = EventType.CORPUS_CREATED, node: ScopePath = ROOT, band: Band = Band.TENANT) -> Event:
    placement = EventPlacement(node, band, CorpusKind.USER)
    return Event(1, uuid.uuid4(), kind, None, 7, NOW, {}, placement)


def test_a_delivery_verifies_with_the_standard_webhooks_library_and_fails_when_tampered():
    secret = new_secret(bytes(range(32)))
    body = json.dumps({"type": "corpus.created"}).encode()
    headers = delivery_headers("msg_1", int(time.time()), body, [secret])
    assert Verifier(secret).verify(body, headers) == {"type": "corpus.created"}
    with pytest.raises(WebhookVerificationError):
        Verifier(secret).verify(body + b" ", headers)
    with pytest.raises(WebhookVerificationError):
        Verifier(new_secret(bytes(32))).verify(body, headers)


def test_after_a_rotation_each_secret_verifies_on_its_own():
    old, new = new_secret(bytes(range(32))), new_secret(bytes(range(1, 33)))
    body = b'{"a":1}'
    headers = delivery_headers("msg_2", int(time.time()), body, [new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Verifier(secret).verify(body, headers) == {"a": 1}


def test_a_secret_is_whsec_and_32_random_bytes():
    secret = new_secret(b"\x01" * 32)
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    with pytest.raises(ValueError):
        new_secret(b"short")


def test_an_endpoint_is_sent_its_types_and_only_what_its_registrant_reads_now():
    everything, created_only = webhook(), webhook(("corpus.created",))
    root_reader = Reader(ROOT, Band.TENANT)
    assert wanted(everything, event(), root_reader)
    assert not wanted(created_only, event(EventType.DOCUMENT_SEARCHABLE), root_reader)
    # A workspace below the registrant's node, a band above its clearance: not its to read.
    assert not wanted(everything, event(node=ENG), root_reader)
    assert not wanted(everything, event(band=Band.RESTRICTED), root_reader)
    assert wanted(everything, event(node=ROOT), Reader(ENG, Band.TENANT))  # an ancestor's is read
    assert not wanted(everything, event(), None)  # a node that no longer resolves reads nothing
    unplaced = Event(2, uuid.uuid4(), EventType.CORPUS_DELETED, None, None, NOW, {}, None)
    assert not wanted(everything, unplaced, root_reader)


def test_an_endpoint_is_sent_a_listed_documents_events_only_when_its_registrant_is_listed():
    """The registrant's principals (its subject and groups) are kept, and its reader speaks for
    them, so a document's access list is applied to the webhook as to the token's own reads."""
    token = Scope("t", frozenset({"webhooks.admin"}), "ana", "/", Band.TENANT, groups=frozenset({"hr"}))
    registrant = registrant_of(token, Reader(ROOT, Band.TENANT, token.principals))
    assert registrant.principals == {"user:ana", "group:hr"}
    assert registrant.scope("t").principals == token.principals  # as resolved when delivering
    listed = Event(
        3,
        uuid.uuid4(),
        EventType.DOCUMENT_SEARCHABLE,
        9,
        7,
        NOW,
        {},
        EventPlacement(ROOT, Band.TENANT, CorpusKind.USER, ("group:hr",)),
    )
    assert wanted(webhook(), listed, Reader(ROOT, Band.TENANT, registrant.scope("t").principals))
    assert not wanted(webhook(), listed, Reader(ROOT, Band.TENANT, frozenset({"user:bo"})))


def test_a_target_is_https_or_an_allowed_host_and_the_fence_still_applies():
    assert webhook_target("https://hooks.example.com/x", frozenset()).port == 443
    with pytest.raises(UrlRefused, match="https"):
        webhook_target("http://hooks.example.com/x", frozenset())
    assert webhook_target("http://127.0.0.1:9000/x", frozenset({"127.0.0.1:9000"})).scheme == "http"
    with pytest.raises(UrlRefused, match="https"):
        webhook_target("http://127.0.0.1:9001/x", frozenset({"127.0.0.1:9000"}))
    with pytest.raises(UrlRefused):
        webhook_target("ftp://hooks.example.com/x", frozenset())


def test_types_are_checked_and_kept_once_in_order():
    assert event_types(["document.searchable", "corpus.created", "document.searchable"]) == (
        "document.searchable",
        "corpus.created",
    )
    with pytest.raises(InvalidRequest) as unknown:
        event_types(["stream.heartbeat"])
    assert unknown.value.metadata["field"] == "event_types"


def test_an_update_names_its_fields_and_never_disables():
    assert changes([], WebhookState.PAUSED, [], "").state is WebhookState.PAUSED
    assert changes(["description"], WebhookState.PAUSED, [], "").state is None  # the mask decides
    both = changes(["*"], WebhookState.ACTIVE, ["corpus.created"], "d")
    assert (both.state, both.event_types, both.description) == (WebhookState.ACTIVE, ("corpus.created",), "d")
    for paths, state in ((["url"], None), (["scope"], None), ([], None), (["state"], WebhookState.DISABLED)):
        with pytest.raises(InvalidRequest):
            changes(paths, state, [], "")


def test_grace_defaults_to_a_day_and_is_bounded():
    assert grace_seconds(0) == DEFAULT_GRACE_S and grace_seconds(60) == 60
    with pytest.raises(InvalidRequest):
        grace_seconds(8 * 86400)
    with pytest.raises(InvalidRequest):
        grace_seconds(-1)


def test_retries_follow_the_schedule_within_the_jitter_and_repeat_its_last_step():
    schedule = (5.0, 30.0, 120.0)
    assert retry_delay(1, schedule, 0.5) == 5.0
    assert retry_delay(2, schedule, 0.0) == pytest.approx(30.0 * (1 - RETRY_JITTER))
    assert retry_delay(3, schedule, 0.999999) == pytest.approx(120.0 * (1 + RETRY_JITTER), rel=1e-5)
    assert retry_delay(50, schedule, 0.5) == 120.0


def test_a_failing_endpoint_is_retried_until_it_failed_for_too_long_then_disabled_with_why():
    policy = RetryPolicy((5.0, 30.0), disable_after_s=3600.0)
    refused = Attempt(503, 12, answer_error(503))
    first = after_failure(0, None, 9, refused, NOW, policy, 0.5)
    assert (first.failed_attempts, first.failing_since, first.disabled_reason) == (1, NOW, "")
    assert first.next_attempt_time == NOW + datetime.timedelta(seconds=5)
    later = NOW + datetime.timedelta(seconds=3599)
    assert after_failure(7, NOW, 9, refused, later, policy, 0.5).disabled_reason == ""
    ended = after_failure(8, NOW, 9, refused, NOW + datetime.timedelta(hours=1), policy, 0.5)
    assert "no 2xx answer for 1 h" in ended.disabled_reason and "9 attempts at event 9" in ended.disabled_reason
    assert "503" in ended.disabled_reason


def test_only_2xx_delivers_and_a_redirect_is_not_followed():
    assert Attempt(204, 3).delivered and not Attempt(302, 3, answer_error(302)).delivered
    assert "redirects are not followed" in answer_error(301)
    assert not Attempt(0, 10_000, "no answer within 10 s").delivered


def test_a_webhook_is_managed_only_at_its_node_within_the_clearance():
    registrant = Registrant(ROOT, Band.CONFIDENTIAL, "dev", frozenset())
    assert may_manage(Reader(ROOT, Band.CONFIDENTIAL), registrant)
    assert may_manage(Reader(ROOT, Band.RESTRICTED), registrant)
    assert not may_manage(Reader(ROOT, Band.TENANT), registrant)
    assert not may_manage(Reader(ENG, Band.RESTRICTED), registrant)  # below: never sees a wider reach


def test_backlog_series_stay_bounded():
    backlogs = [(str(i), i, float(i)) for i in range(1, 6)]
    kept = bounded_backlogs(backlogs, 2)
    assert kept == [("5", 5, 5.0), ("4", 4, 4.0), ("_other", 6, 3.0)]


def test_a_sealed_secret_opens_only_for_its_tenant_url_and_key():
    sealer = AesGcmSealer(bytes(range(32)))
    sealed = sealer.seal("t", "https://a.example/x", "whsec_abc")
    assert "whsec_abc" not in sealed and sealer.open("t", "https://a.example/x", sealed) == "whsec_abc"
    for tenant, url in (("u", "https://a.example/x"), ("t", "https://b.example/x")):
        with pytest.raises(ValueError):
            sealer.open(tenant, url, sealed)
    with pytest.raises(ValueError):
        AesGcmSealer(bytes(32)).open("t", "https://a.example/x", sealed)
