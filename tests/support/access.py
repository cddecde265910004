"""The access tests' shared parts: the table of access-list cases that the rule
(runtime.reach.may_read_document) and its SQL twin (document_readable, migration 0062) are both
held to, and the world the leak test reads (tests/integration/test_access_leaks.py): ingest,
search and documents-ai over one PostgreSQL, and a tenant whose shared corpus holds open and
restricted documents."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import message as protobuf_message
from knowledge.v1 import documents_ai_pb2_grpc, ingest_pb2, search_pb2_grpc
from knowledge_documents_ai.bootstrap import build_app as documents_ai_app
from knowledge_documents_ai.config import DocumentsAiSettings
from knowledge_runtime.auth import AUDIT_READ, PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import Env
from knowledge_runtime.system_corpora import OPERATIONAL_PATTERNS, SYSTEM_WRITE
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.adapters.system_corpora import PostgresSystemCorpora
from knowledge_search.agent_usecases import ContextUseCases, PrefetchUseCases
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support import rpc
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    SameVectors,
    ingest_app,
    settings,
    text_extract,
    upload,
    wait_terminal,
    wire_fakes,
)
from tests.support.net import free_port
from tests.support.real_services import base_env

# (the token's sub, its groups claim, the document's access list, whether the token reads it)
CASES: list[tuple[str, list[str], list[str], bool]] = [
    ("ana", [], [], True),  # an empty list: everyone who reaches the corpus
    ("", [], [], True),  # even a token without subject or groups
    ("ana", [], ["user:ana"], True),  # named itself
    ("ana", ["hr"], ["group:hr"], True),  # through a group
    ("ana", ["hr", "it"], ["group:finance", "group:it"], True),  # through one of several groups
    ("ana", ["hr"], ["user:bob", "group:hr"], True),
    ("bob", [], ["user:ana"], False),  # another user's
    ("ana", ["finance"], ["group:hr"], False),  # another group's
    ("", [], ["user:ana"], False),  # no subject: no user principal
    ("", ["hr"], ["group:hr"], True),  # no subject, a group still counts
    ("ana", [], ["group:ana"], False),  # a user is not the group of its name
    ("hr", [], ["group:hr"], False),  # nor a group the user of its name
    ("ana", ["ana"], ["user:hr"], False),
    ("Ana", [], ["user:ana"], False),  # names compare exactly: no case folding
    ("ana ", [], ["user:ana"], False),  # nor trimming
    ("ana", [f"g{i}" for i in range(20)], [f"group:g{i}" for i in range(20, 40)], False),  # 20 groups, none listed
    ("ana", [f"g{i}" for i in range(20)], [f"group:g{i}" for i in range(19, 40)], True),  # the last one listed
    ("service:ingest", [], ["user:ana"], False),  # a service's token is no exception
]

SECRET = "quokkaprivate"  # a word only the restricted documents hold
LISTED = ["user:ana", "group:hr"]
READERS = ("ana", "bob")  # named; in a named group
USERS = {"ana": [], "bob": ["hr"], "carl": ["finance"]}
QUERY = "zebra stripes meadow"  # every document holds these words


@dataclass
class World:
    ingest: rpc.IngestStub
    search: search_pb2_grpc.SearchServiceStub
    docai: documents_ai_pb2_grpc.DocumentsAIServiceStub
    admin: Database
    tenant: str
    tokens: dict = None  # type: ignore[assignment]
    corpus_id: str = ""
    open_id: str = ""
    secret_id: str = ""  # an upload restricted at upload
    secret_job: str = ""
    reference_id: str = ""  # an indexed reference, restricted at IndexPassages
    deleted_id: str = ""  # a restricted document, deleted
    entry_id: str = ""  # a housekeeping entry, restricted by SetDocumentAccess

    @property
    def restricted(self) -> set[str]:
        return {self.secret_id, self.reference_id, self.deleted_id, self.entry_id}

    async def _ingested(self, reply) -> tuple[str, str]:
        job = await wait_terminal(self.ingest, self.tokens["ana"], reply.job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
        return job.result.document_id, reply.job_id

    async def populate(self) -> None:
        ana = self.tokens["ana"]
        self.corpus_id = (
            await self.ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="shared"), metadata=ana)
        ).corpus_id
        self.open_id, _ = await self._ingested(
            await upload(self.ingest, ana, self.corpus_id, f"# Open\n\nThe {QUERY} is open to all.".encode(), "open.md")
        )
        text = f"# Payroll\n\nThe {QUERY} payroll: {SECRET} salaries of the board."
        reply = await upload(self.ingest, ana, self.corpus_id, text.encode(), "private-payroll.md", access=LISTED)
        self.secret_id, self.secret_job = await self._ingested(reply)
        indexed = await self.ingest.IndexPassages(
            ingest_pb2.IndexPassagesRequest(
                corpus_id=self.corpus_id,
                document_ref="hr/private-handbook",
                content_sha256="ab" * 32,
                title="private-handbook",
                passages=[ingest_pb2.Passage(fragment="#p1", text=f"The {QUERY} handbook: {SECRET} grievances.")],
                access=ingest_pb2.AccessList(principals=LISTED),
            ),
            metadata=ana,
        )
        self.reference_id, _ = await self._ingested(indexed)
        doomed = await upload(
            self.ingest,
            ana,
            self.corpus_id,
            f"# Layoffs\n\nThe {QUERY} plan: {SECRET} layoffs.".encode(),
            "private-layoffs.md",
            access=LISTED,
        )
        self.deleted_id, _ = await self._ingested(doomed)
        await self.ingest.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=self.deleted_id), metadata=ana)
        entry = await self.ingest.IngestText(
            ingest_pb2.IngestTextRequest(
                system_corpus=OPERATIONAL_PATTERNS,
                title="private-pattern",
                text=f"When asked about {QUERY}, the {SECRET} escalation path applies.",
            ),
            metadata=ana,
        )
        self.entry_id, _ = await self._ingested(entry)
        changed = await self.ingest.SetDocumentAccess(
            ingest_pb2.SetDocumentAccessRequest(document_id=self.entry_id, principals=LISTED), metadata=ana
        )
        assert list(changed.document.principals) == sorted(LISTED)

    async def readable_counts(self, user: str, *, searchable_only: bool = False) -> int:
        """How many live documents of the shared corpus ``user`` may read: the open ones and those
        naming it or one of its groups (counted here, not by the rule under test)."""
        rows = await self.admin.fetch(
            "t",
            "SELECT principals, state FROM documents WHERE corpus_id = $1 AND deleted_at IS NULL",
            int(self.corpus_id),
        )
        principals = {f"user:{user}", *(f"group:{g}" for g in USERS[user])}
        return sum(
            1
            for r in rows
            if (not r["principals"] or principals & set(r["principals"]))
            and (not searchable_only or r["state"] == "SEARCHABLE")
        )


@asynccontextmanager
async def access_world(migrated_pg, keys_dir, verifier, make_token, tmp: Path) -> AsyncIterator[World]:
    """ingest, search and documents-ai (no embedder, no LLM: a model call fails, after the reads)
    and a tenant whose shared corpus holds open and restricted documents."""
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(
        settings(KNOWLEDGE_EVENTS_HEARTBEAT_S="0.5"), ingest_db, MemoryBlobs(admin), CountingEmbedder(), text_extract
    )
    index = PostgresChunkIndex(search_db)
    searches = SearchUseCases(index, SameVectors(), system_corpora=PostgresSystemCorpora(search_db))
    answers = AnswerUseCases(searches, ExtractiveSynthesiser())
    prefetch = PrefetchUseCases(searches, PostgresSystemCorpora(search_db), deadline_s=30.0)
    apps = [
        ingest_app(ingest, verifier),
        GrpcApp(
            services=[search_spec(SearchServicer(searches, answers, ContextUseCases(answers), prefetch))],
            verifier=verifier,
            scope_resolver=index.reader,
        ),
        await documents_ai_app(
            DocumentsAiSettings.from_env(
                Env(
                    {
                        **base_env(migrated_pg, keys_dir, tmp, "documents-ai"),
                        "KNOWLEDGE_DOCUMENTS_AI_PORT": "0",
                        "KNOWLEDGE_EMBEDDER_ADDRESS": f"127.0.0.1:{free_port()}",
                    }
                )
            )
        ),
    ]
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{await app.start()}") for app in apps]
    world = World(
        ingest=rpc.IngestStub(channels[0]),
        search=search_pb2_grpc.SearchServiceStub(channels[1]),
        docai=documents_ai_pb2_grpc.DocumentsAIServiceStub(channels[2]),
        admin=admin,
        tenant=f"leaks-{uuid.uuid4().hex[:8]}",
    )
    world.tokens = {
        user: rpc.auth(
            make_token(
                world.tenant,
                [*PUBLIC_CAPABILITIES, AUDIT_READ, SYSTEM_WRITE],
                subject=user,
                groups=groups,
                ttl_s=3600,
            )
        )
        for user, groups in USERS.items()
    }
    try:
        await world.populate()
        yield world
    finally:
        for channel in channels:
            await channel.close()
        for app in reversed(apps):
            await app.stop()
        for db in (ingest_db, search_db, admin):
            await db.close()


Call = Callable[[World, list], Awaitable[list[protobuf_message.Message]]]


async def one(reply: Awaitable[protobuf_message.Message]) -> list[protobuf_message.Message]:
    return [await reply]


async def stream_until(
    replies, done: Callable[[protobuf_message.Message], bool], timeout: float = 10.0
) -> list[protobuf_message.Message]:
    """A server stream's messages up to the first ``done`` says ends the part to judge."""
    seen: list[protobuf_message.Message] = []

    async def read() -> None:
        async for message in replies:
            seen.append(message)
            if done(message):
                return

    try:
        await asyncio.wait_for(read(), timeout)
    finally:
        replies.cancel()
    return seen


def events_until_quiet(w: World, md: list) -> Awaitable[list]:
    """Every event of the tenant, until the heartbeat that says the stream has caught up."""
    return stream_until(
        w.ingest.WatchEvents(ingest_pb2.WatchEventsRequest(), metadata=md), lambda e: e.type == "stream.heartbeat"
    )


def snapshot(w: World, md: list) -> Awaitable[list]:
    return stream_until(
        w.ingest.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=w.corpus_id), metadata=md),
        lambda c: c.kind == ingest_pb2.DOCUMENT_CHANGE_KIND_SYNCED,
    )
