"""Webhooks on real PostgreSQL and the real ingest gRPC server (content-index and the embedder as
fakes at their ports), delivering to real HTTP receivers on 127.0.0.1 (under the allow-list) that
verify every request with the Standard Webhooks reference library: exactly the events a token
reads, in order, at least once, through an endpoint's downtime, beside a dead endpoint, across a
secret's rotation; never to a private address."""

import asyncio
import time
import uuid

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_runtime.db.pool import Database

from tests.support.ingest import CountingEmbedder, MemoryBlobs, new_corpus, replica, wait_terminal
from tests.support.rpc import error_info
from tests.support.webhooks import Receiver

pytestmark = pytest.mark.integration

ADMIN = ["corpus.create", "corpus.read", "document.upload", "corpus.bind", "webhooks.admin"]


@pytest.fixture
async def parts(migrated_pg):
    admin = await Database.connect(migrated_pg.url())
    yield migrated_pg.url(user="knowledge_ingest"), MemoryBlobs(admin), CountingEmbedder(), admin
    await admin.close()


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make(**options) -> Receiver:
        made.append(Receiver(**options))
        return made[-1]

    yield make
    for receiver in made:
        receiver.stop()


def metadata_of(make_token, tenant: str, scope: str = "/", clearance: str = "RESTRICTED") -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {make_token(tenant, ADMIN, scope=scope, clearance=clearance)}")]


def allowing(*receivers: Receiver, **overrides: str) -> dict[str, str]:
    return {"KNOWLEDGE_WEBHOOK_ALLOW_HOSTS": ",".join(r.allow for r in receivers), **overrides}


async def register(stub, metadata, receiver: Receiver, types=()) -> ingest_pb2.Webhook:
    answer = await stub.CreateWebhook(
        ingest_pb2.CreateWebhookRequest(url=receiver.url, event_types=list(types)), metadata=metadata
    )
    assert answer.secret.startswith("whsec_")
    receiver.secrets.append(answer.secret)
    return answer.webhook


async def recorded(stub, metadata, webhook_id: str, count: int, timeout: float = 30.0) -> None:
    """Until ``count`` deliveries are recorded as acknowledged (the cursor is past them): an API
    change made before that may have the event sent again, as at least once allows."""
    deadline = time.monotonic() + timeout
    request = ingest_pb2.ListWebhookDeliveriesRequest(webhook_id=webhook_id, page_size=1000)
    while sum(d.delivered for d in (await stub.ListWebhookDeliveries(request, metadata=metadata)).deliveries) < count:
        assert time.monotonic() < deadline, f"fewer than {count} deliveries recorded"
        await asyncio.sleep(0.05)


async def ingest_texts(stub, metadata, corpus_id: str, count: int, tag: str) -> list[str]:
    """The document ids of ``count`` texts, each searchable."""
    items = [
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=f"# {tag} {i}\n\nText {tag} {i}.", title=f"{tag}{i}")
        for i in range(count)
    ]
    reply = await stub.BatchIngestTexts(ingest_pb2.BatchIngestTextsRequest(items=items), metadata=metadata)
    jobs = [await wait_terminal(stub, metadata, item.job.job_id, timeout=120) for item in reply.items]
    assert all(job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE for job in jobs)
    return [job.result.document_id for job in jobs]


async def watched(stub, metadata, after: str, count: int, timeout: float = 60.0) -> list[ingest_pb2.Event]:
    """What WatchEvents sends the same token after ``after``: ``count`` events (heartbeats left out)."""
    got: list[ingest_pb2.Event] = []
    call = stub.WatchEvents(ingest_pb2.WatchEventsRequest(after=after), metadata=metadata)
    try:
        async with asyncio.timeout(timeout):
            async for event in call:
                if event.type != "stream.heartbeat":
                    got.append(event)
                    if len(got) == count:
                        return got
    finally:
        call.cancel()
    raise AssertionError("the stream ended")


async def test_200_texts_give_exactly_their_events_in_order_each_verified(parts, verifier, make_token, receivers):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    receiver = receivers()
    async with replica(url, verifier, blobs, embedder, **allowing(receiver)) as stub:
        webhook = await register(stub, metadata, receiver)
        assert webhook.state == ingest_pb2.WEBHOOK_STATE_ACTIVE and webhook.cursor == "0"
        corpus_id = await new_corpus(stub, metadata)
        documents = await ingest_texts(stub, metadata, corpus_id, 200, "many")
        arrived = await receiver.wait_for(201)
        events = await watched(stub, metadata, webhook.cursor, 201)
        await asyncio.sleep(0.5)  # nothing more comes
        deliveries = await stub.ListWebhookDeliveries(
            ingest_pb2.ListWebhookDeliveriesRequest(webhook_id=webhook.webhook_id, page_size=5), metadata=metadata
        )
        now = await stub.GetWebhook(ingest_pb2.GetWebhookRequest(webhook_id=webhook.webhook_id), metadata=metadata)
    assert receiver.unverified == [] and all(r.verified_by == [0] for r in receiver.received)
    assert receiver.ids() == arrived == [e.event_id for e in events]  # each once, in the watch's order
    bodies = [r.event for r in receiver.received]
    assert bodies[0]["type"] == "corpus.created" and bodies[0]["corpus_id"] == corpus_id
    assert sorted(b["document_id"] for b in bodies[1:]) == sorted(documents)
    assert {b["type"] for b in bodies[1:]} == {"document.searchable"}
    assert [b["cursor"] for b in bodies] == [e.cursor for e in events]
    assert bodies[5]["chunk_count"] == 1 and bodies[5]["event_id"] == receiver.received[5].webhook_id
    assert now.cursor == events[-1].cursor and now.failed_attempts == 0
    newest = deliveries.deliveries[0]
    assert newest.delivered and newest.status_code == 200 and newest.cursor == events[-1].cursor
    assert newest.attempt == 1 and newest.error == "" and deliveries.next_page_token


# The receiver's downtime in the test; the is a minute. The retry schedule's first steps
# are short here (KNOWLEDGE_WEBHOOK_RETRY_SCHEDULE_S) so the test waits seconds, not minutes: the
# waits are settings, the rule that the next event waits for the failing one is the same.
DOWN_S = 15.0


async def test_a_receiver_down_then_back_gets_every_event_after_it_returns_in_order(
    parts, verifier, make_token, receivers
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-down-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    receiver = receivers()
    schedule = allowing(receiver, KNOWLEDGE_WEBHOOK_RETRY_SCHEDULE_S="0.2,0.5,1,2")
    async with replica(url, verifier, blobs, embedder, **schedule) as stub:
        webhook = await register(stub, metadata, receiver)
        corpus_id = await new_corpus(stub, metadata)
        await receiver.wait_for(1, acknowledged=True)
        # First it answers 503 (the same event comes again and again), then it is gone.
        receiver.status = 503
        await ingest_texts(stub, metadata, corpus_id, 30, "down")
        await asyncio.sleep(1.5)
        receiver.stop()
        await asyncio.sleep(DOWN_S)
        retried = await stub.GetWebhook(ingest_pb2.GetWebhookRequest(webhook_id=webhook.webhook_id), metadata=metadata)
        receiver.status = 200
        back = time.time()
        receiver.start()
        acknowledged = await receiver.wait_for(31, acknowledged=True)
        events = await watched(stub, metadata, webhook.cursor, 31)
        attempts = await stub.ListWebhookDeliveries(
            ingest_pb2.ListWebhookDeliveriesRequest(webhook_id=webhook.webhook_id, page_size=1000), metadata=metadata
        )
    assert acknowledged == [e.event_id for e in events]  # all, in order
    assert [r.webhook_id for r in receiver.acknowledged()] == acknowledged  # each acknowledged once
    assert all(r.arrived >= back for r in receiver.acknowledged()[1:])  # the downtime's after it returned
    refused = [r for r in receiver.received if r.answered == 503]
    assert len(refused) >= 3 and {r.webhook_id for r in refused} == {events[1].event_id}  # one event, again
    assert all(r.verified_by == [0] for r in receiver.received) and receiver.unverified == []
    assert retried.failed_attempts >= 5 and retried.failing_since.seconds > 0
    assert retried.state == ingest_pb2.WEBHOOK_STATE_ACTIVE and retried.cursor == events[0].cursor
    failed = [a for a in attempts.deliveries if not a.delivered]
    assert {a.status_code for a in failed} == {503, 0}
    assert any("connection failed" in a.error for a in failed) and any("503" in a.error for a in failed)
    assert max(a.attempt for a in failed) == retried.failed_attempts


async def test_a_receiver_that_never_answers_delays_no_other_endpoint(parts, verifier, make_token, receivers):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-hang-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    dead, alive = receivers(hang=True), receivers()
    async with replica(
        url, verifier, blobs, embedder, **allowing(dead, alive, KNOWLEDGE_WEBHOOK_TIMEOUT_S="60")
    ) as stub:
        await register(stub, metadata, dead)
        await register(stub, metadata, alive)
        corpus_id = await new_corpus(stub, metadata)
        await ingest_texts(stub, metadata, corpus_id, 20, "hang")
        written = time.time()
        await alive.wait_for(21, timeout=20)
        took = time.time() - written
    assert took < 10  # the live endpoint had everything at once, while the dead one held its first
    assert len(dead.ids()) == 1 and dead.ids()[0] == alive.ids()[0]


async def test_a_rotated_secret_verifies_with_both_secrets_during_the_grace_period(
    parts, verifier, make_token, receivers
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-rotate-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    receiver = receivers()
    async with replica(url, verifier, blobs, embedder, **allowing(receiver)) as stub:
        webhook = await register(stub, metadata, receiver)
        await new_corpus(stub, metadata)
        await receiver.wait_for(1)
        await recorded(stub, metadata, webhook.webhook_id, 1)
        rotated = await stub.RotateWebhookSecret(
            ingest_pb2.RotateWebhookSecretRequest(webhook_id=webhook.webhook_id, grace_seconds=3), metadata=metadata
        )
        receiver.secrets.append(rotated.secret)
        await new_corpus(stub, metadata)
        await receiver.wait_for(2)
        await asyncio.sleep(3.5)  # the grace period is over
        await new_corpus(stub, metadata)
        await receiver.wait_for(3)
        shown = await stub.GetWebhook(ingest_pb2.GetWebhookRequest(webhook_id=webhook.webhook_id), metadata=metadata)
    assert rotated.secret != receiver.secrets[0] and rotated.webhook.HasField("previous_secret_expire_time")
    assert [r.verified_by for r in receiver.received] == [[0], [0, 1], [1]]
    assert receiver.unverified == []
    assert receiver.secrets[0] not in str(shown) and rotated.secret not in str(shown)


async def test_an_endpoint_registered_with_a_narrower_scope_receives_none_of_the_events_outside_it(
    parts, verifier, make_token, receivers
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-reach-{uuid.uuid4().hex[:8]}"
    root = metadata_of(make_token, tenant)
    eng, sales = (
        metadata_of(make_token, tenant, "workspace:eng", "TENANT"),
        metadata_of(make_token, tenant, "workspace:sales"),
    )
    root_hook, eng_hook = receivers(), receivers()
    async with replica(url, verifier, blobs, embedder, **allowing(root_hook, eng_hook)) as stub:
        corpora = {}
        for name, band in (("handbook", "TENANT"), ("salaries", "CONFIDENTIAL"), ("runbooks", ""), ("pipeline", "")):
            made = await stub.CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name=name, confidentiality=band), metadata=root
            )
            corpora[name] = made.corpus_id
        for name, node in (("runbooks", "workspace:eng"), ("pipeline", "workspace:sales")):
            await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=corpora[name], scope=node), metadata=root)
        await register(stub, root, root_hook)
        eng_webhook = await register(stub, eng, eng_hook)
        assert eng_webhook.scope == "workspace:eng" and eng_webhook.clearance == "TENANT"
        documents = {}
        for name, writer in (("handbook", root), ("salaries", root), ("runbooks", eng), ("pipeline", sales)):
            (documents[name],) = await ingest_texts(stub, writer, corpora[name], 1, name)
        await root_hook.wait_for(2)
        await eng_hook.wait_for(2)
        eng_watch = await watched(stub, eng, eng_webhook.cursor, 2)
        await asyncio.sleep(1.0)  # anything else would have come by now
    by_document = {v: k for k, v in documents.items()}
    assert [by_document[r.event["document_id"]] for r in root_hook.received] == ["handbook", "salaries"]
    assert sorted(by_document[r.event["document_id"]] for r in eng_hook.received) == ["handbook", "runbooks"]
    assert eng_hook.ids() == [e.event_id for e in eng_watch]  # what GET /events sends the same token


async def test_a_private_target_is_refused_at_creation_and_at_connect_time(
    parts, verifier, make_token, receivers, monkeypatch
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-fence-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    receiver = receivers()
    answers = {"hooks.example": ["93.184.216.34"]}  # public when it is registered

    async def lookup(host: str, port: int) -> list[str]:
        return answers.get(host, ["127.0.0.1"])

    monkeypatch.setattr("knowledge_ingest.clients.fenced.lookup", lookup)
    async with replica(url, verifier, blobs, embedder, **allowing(receiver)) as stub:
        for target in (
            "https://127.0.0.1:9/hook",  # loopback (the allow-list names only the receiver's port)
            "https://10.1.2.3/hook",
            "https://169.254.169.254/latest/meta-data",  # link-local: cloud metadata
            "https://localhost/hook",
            "http://hooks.example/hook",  # plain http to a host the operator did not allow
            "ftp://hooks.example/hook",
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.CreateWebhook(ingest_pb2.CreateWebhookRequest(url=target), metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, target
            assert error_info(refused.value).reason == "URL_REFUSED", target
        # DNS rebinding: public when registered, the receiver's loopback address when connected to.
        webhook = (
            await stub.CreateWebhook(
                ingest_pb2.CreateWebhookRequest(url=f"https://hooks.example:{receiver.port}/hook"), metadata=metadata
            )
        ).webhook
        answers["hooks.example"] = ["127.0.0.1"]
        await new_corpus(stub, metadata)
        attempts = await until_attempted(stub, metadata, webhook.webhook_id)
    assert receiver.received == []
    assert attempts[0].status_code == 0 and not attempts[0].delivered
    assert "loopback" in attempts[0].error


async def until_attempted(stub, metadata, webhook_id: str, timeout: float = 20.0) -> list[ingest_pb2.WebhookDelivery]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = await stub.ListWebhookDeliveries(
            ingest_pb2.ListWebhookDeliveriesRequest(webhook_id=webhook_id), metadata=metadata
        )
        if listed.deliveries:
            return list(listed.deliveries)
        await asyncio.sleep(0.1)
    raise AssertionError("no attempt was made")


async def test_webhooks_are_managed_by_their_node_paused_resumed_filtered_replayed_and_deleted(
    parts, verifier, make_token, receivers
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-admin-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    receiver = receivers()
    async with replica(url, verifier, blobs, embedder, **allowing(receiver)) as stub:
        await new_corpus(stub, metadata)  # an event before the webhook: not sent unless replayed
        await watched(stub, metadata, "", 1)  # numbered (the webhook starts after the newest numbered)
        webhook = await register(stub, metadata, receiver, types=["corpus.created", "corpus.created"])
        assert list(webhook.event_types) == ["corpus.created"] and webhook.created_by == "dev"
        get = ingest_pb2.GetWebhookRequest(webhook_id=webhook.webhook_id)

        # A corpus created at the root (its event sent), then bound to a workspace.
        bound = await new_corpus(stub, metadata)
        await receiver.wait_for(1, acknowledged=True)
        await recorded(stub, metadata, webhook.webhook_id, 1)
        await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=bound, scope="workspace:eng"), metadata=metadata)

        # Only webhooks.admin tokens of its node with a clearance that allows it see it.
        for other in (metadata_of(make_token, tenant, "workspace:eng"), metadata_of(make_token, tenant, "/", "TENANT")):
            with pytest.raises(grpc.aio.AioRpcError) as hidden:
                await stub.GetWebhook(get, metadata=other)
            assert error_info(hidden.value).reason == "WEBHOOK_NOT_FOUND"
            assert (await stub.ListWebhooks(ingest_pb2.ListWebhooksRequest(), metadata=other)).webhooks == []
        reader = [("authorization", f"Bearer {make_token(tenant, ['corpus.read'])}")]
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.ListWebhooks(ingest_pb2.ListWebhooksRequest(), metadata=reader)
        assert error_info(missing.value).reason == "CAPABILITY_MISSING"
        listed = await stub.ListWebhooks(ingest_pb2.ListWebhooksRequest(), metadata=metadata)
        assert [w.webhook_id for w in listed.webhooks] == [webhook.webhook_id]

        paused = await update(stub, metadata, webhook.webhook_id, state=ingest_pb2.WEBHOOK_STATE_PAUSED)
        assert paused.state == ingest_pb2.WEBHOOK_STATE_PAUSED
        await new_corpus(stub, metadata)
        await asyncio.sleep(1.5)
        assert len(receiver.ids()) == 1  # nothing while paused
        await update(stub, metadata, webhook.webhook_id, state=ingest_pb2.WEBHOOK_STATE_ACTIVE)
        await receiver.wait_for(2, acknowledged=True)  # resumed where it was
        await recorded(stub, metadata, webhook.webhook_id, 2)

        replayed = await stub.ReplayWebhook(
            ingest_pb2.ReplayWebhookRequest(webhook_id=webhook.webhook_id, after=""), metadata=metadata
        )
        assert replayed.webhook.cursor == "0"
        await receiver.wait_requests(4)
        await asyncio.sleep(0.5)
        # From the start, judged now: the first corpus's event (before the webhook) and the one
        # made while paused; not the bound corpus's, whose workspace the root token cannot read.
        firsts = receiver.first_arrivals()
        assert receiver.ids()[2:] == [firsts[2], firsts[1]]

        for bad in (
            ingest_pb2.CreateWebhookRequest(url=receiver.url, event_types=["document.nothing"]),
            ingest_pb2.CreateWebhookRequest(url=receiver.url, description="x" * 501),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as invalid:
                await stub.CreateWebhook(bad, metadata=metadata)
            assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as masked:
            await stub.UpdateWebhook(
                ingest_pb2.UpdateWebhookRequest(
                    webhook_id=webhook.webhook_id, update_mask=field_mask_of(["url"]), webhook=ingest_pb2.Webhook()
                ),
                metadata=metadata,
            )
        assert masked.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "update_mask" in masked.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as ahead:
            await stub.ReplayWebhook(
                ingest_pb2.ReplayWebhookRequest(webhook_id=webhook.webhook_id, after="999"), metadata=metadata
            )
        assert ahead.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        deleted = await stub.DeleteWebhook(
            ingest_pb2.DeleteWebhookRequest(webhook_id=webhook.webhook_id), metadata=metadata
        )
        assert deleted.webhook_id == webhook.webhook_id
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await stub.GetWebhook(get, metadata=metadata)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        count = len(receiver.received)
        await new_corpus(stub, metadata)
        await asyncio.sleep(1.0)
        assert len(receiver.received) == count


async def update(stub, metadata, webhook_id: str, **fields) -> ingest_pb2.Webhook:
    answer = await stub.UpdateWebhook(
        ingest_pb2.UpdateWebhookRequest(webhook_id=webhook_id, webhook=ingest_pb2.Webhook(**fields)), metadata=metadata
    )
    return answer.webhook


def field_mask_of(paths: list[str]):
    from google.protobuf import field_mask_pb2

    return field_mask_pb2.FieldMask(paths=paths)


async def test_an_endpoint_failing_too_long_is_disabled_with_an_event_and_enabled_again(
    parts, verifier, make_token, receivers
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-disable-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    failing, watcher = receivers(status=500), receivers()
    quick = allowing(
        failing, watcher, KNOWLEDGE_WEBHOOK_RETRY_SCHEDULE_S="0.3", KNOWLEDGE_WEBHOOK_DISABLE_AFTER_S="1.5"
    )
    async with replica(url, verifier, blobs, embedder, **quick) as stub:
        webhook = await register(stub, metadata, failing)
        await register(stub, metadata, watcher, types=["webhook.disabled"])
        await new_corpus(stub, metadata)
        arrived = await watcher.wait_for(1, timeout=30)
        disabled = watcher.received[0].event
        shown = await stub.GetWebhook(ingest_pb2.GetWebhookRequest(webhook_id=webhook.webhook_id), metadata=metadata)
        tried = failing.ids()
        await asyncio.sleep(1.0)
        assert failing.ids() == tried  # a disabled webhook is sent nothing
        failing.status = 200
        await update(stub, metadata, webhook.webhook_id, state=ingest_pb2.WEBHOOK_STATE_ACTIVE)
        await failing.wait_for(2, acknowledged=True)
        events = await watched(stub, metadata, webhook.cursor, 2)
    assert len(arrived) == 1 and disabled["type"] == "webhook.disabled"
    assert disabled["webhook_id"] == webhook.webhook_id and "no 2xx answer" in disabled["reason"]
    assert "500" in disabled["reason"] and disabled["corpus_id"] == ""
    assert shown.state == ingest_pb2.WEBHOOK_STATE_DISABLED and shown.disabled_reason == disabled["reason"]
    assert len(tried) >= 3 and set(tried) == {events[0].event_id}
    assert [e.type for e in events] == ["corpus.created", "webhook.disabled"]  # GET /events has it too
    # Enabled again: the event it stopped at, then the rest (its own webhook.disabled among them).
    assert [r.webhook_id for r in failing.acknowledged()] == [e.event_id for e in events]


async def test_two_replicas_never_send_to_one_endpoint_at_once_and_keep_its_order(
    parts, verifier, make_token, receivers
):
    url, blobs, embedder, _ = parts
    tenant = f"t-hooks-replicas-{uuid.uuid4().hex[:8]}"
    metadata = metadata_of(make_token, tenant)
    receiver = receivers()
    async with (
        replica(url, verifier, blobs, embedder, **allowing(receiver)) as one,
        replica(url, verifier, blobs, embedder, **allowing(receiver)) as two,
    ):
        webhook = await register(one, metadata, receiver)
        corpora = await asyncio.gather(*(new_corpus(stub, metadata) for stub in [one, two] * 20))
        await receiver.wait_for(40)
        events = await watched(two, metadata, webhook.cursor, 40)
    assert sorted(corpora) == sorted(r.event["corpus_id"] for r in receiver.received)
    assert receiver.ids() == [e.event_id for e in events] and receiver.most_in_flight == 1
