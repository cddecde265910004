"""knowledge_client, the platform's Python client, against the real stack through the gateway: the
flow a platform service runs (corpus, upload stream, watch, search, events), and errors decoded
into the catalogue's reasons."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2
from knowledge_client import REASONS, KnowledgeClient, KnowledgeError

from tests.support.contracts import CAP
from tests.support.gateway_api import HANDBOOK

pytestmark = pytest.mark.e2e


async def test_the_python_client_runs_the_platform_team_s_flow(stack, token):
    async with KnowledgeClient(stack["grpc"]["gateway"], token=token("py-client")) as kc:
        corpus = await kc.corpora.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Python Handbook"))
        pieces = [HANDBOOK.encode()[:50], HANDBOOK.encode()[50:]]
        job = await kc.upload(
            corpus.corpus_id, "handbook.md", pieces, content_type="text/markdown", principals=["user:dev", "group:hr"]
        )
        assert (job.status, job.corpus_id) == ("ingesting", corpus.corpus_id)
        async with asyncio.timeout(120):
            async for change in kc.watch_documents(corpus.corpus_id):
                if change.document.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE:
                    break
        assert list(change.document.principals) == ["group:hr", "user:dev"]  # the token's sub is dev
        reply = await kc.search.Search(search_pb2.SearchRequest(query="quokka mentoring", corpus_id=corpus.corpus_id))
        assert reply.results[0].document_id == change.document_id and reply.results[0].filename == "handbook.md"
        streamed = [
            message.WhichOneof("event")
            async for message in kc.query_stream(
                search_pb2.QueryRequest(query="What is quokka mentoring?", corpus_id=corpus.corpus_id)
            )
        ]
        assert streamed[0] == "started" and streamed[-1] == "done" and "delta" in streamed
        async with asyncio.timeout(30):
            async for event in kc.watch_events(""):
                if event.type == "document.searchable" and event.document_id == change.document_id:
                    break

        with pytest.raises(KnowledgeError) as invalid:
            await kc.search.Search(search_pb2.SearchRequest(query=""))
        assert (invalid.value.code, invalid.value.reason, invalid.value.metadata) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            {"field": "query"},
        )
        assert invalid.value.known and invalid.value.request_id
        with pytest.raises(KnowledgeError) as missing:
            await kc.documents.GetDocument(ingest_pb2.GetDocumentRequest(document_id="999999"))
        assert (missing.value.reason, missing.value.metadata) == ("DOCUMENT_NOT_FOUND", {"document_id": "999999"})
        with pytest.raises(KnowledgeError) as too_large:
            await kc.upload(corpus.corpus_id, "big.bin", b"\0" * (CAP + 1))
        assert (too_large.value.reason, too_large.value.metadata) == ("UPLOAD_TOO_LARGE", {"max_bytes": str(CAP)})
    async with KnowledgeClient(stack["grpc"]["gateway"], token=lambda: token("py-client", ttl_s=-120)) as expired:
        with pytest.raises(KnowledgeError) as refused:
            await expired.search.Search(search_pb2.SearchRequest(query="x"))
        assert (refused.value.code, refused.value.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED")
    assert {"TOKEN_EXPIRED", "INVALID_REQUEST", "QUOTA_EXHAUSTED"} <= REASONS
