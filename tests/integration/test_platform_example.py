"""The client example of docs/platform-index.md, run as written against real ingest and search
gRPC servers over real PostgreSQL (content-index and the embedder as fakes at ingest's ports,
search's query vectors from the same fake): the documentation's code works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.costs import Cost
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.model import EmbeddedQuery
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support.documents import a_pdf
from tests.support.ingest import CountingEmbedder, MemoryBlobs, ingest_app, settings, wire_fakes

pytestmark = pytest.mark.integration
DOC = Path(__file__).resolve().parents[2] / "docs" / "platform-index.md"


def never_extracts(path: Path, filename: str, mime_type: str) -> Extracted:
    raise AssertionError("passages are never extracted")


class SameVectors:
    def __init__(self) -> None:
        self._embedder = CountingEmbedder()

    async def embed_query(self, tenant: str, text: str) -> EmbeddedQuery:
        return EmbeddedQuery(vector=(await self._embedder.embed(tenant, [text]))[0], warnings=(), cost=Cost())


async def test_the_documented_platform_client_indexes_searches_maps_and_removes(
    migrated_pg, verifier, make_token, tmp_path
):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert code is not None
    example: dict = {}
    exec(compile(code.group(1), str(DOC), "exec"), example)  # noqa: S102 (the documentation's own code)
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    admin = await Database.connect(migrated_pg.url())
    ingest = ingest_app(
        wire_fakes(settings(), ingest_db, MemoryBlobs(admin), CountingEmbedder(), never_extracts), verifier
    )
    searches = SearchUseCases(PostgresChunkIndex(search_db), SameVectors())
    search = GrpcApp(
        services=[search_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
        verifier=verifier,
    )
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(a_pdf(pages=3))
    try:
        ingest_port, search_port = await ingest.start(), await search.start()
        citations = await example["main"](
            f"127.0.0.1:{ingest_port}", f"127.0.0.1:{search_port}", make_token("t-example"), pdf
        )
    finally:
        await search.stop()
        await ingest.stop()
        for db in (ingest_db, search_db, admin):
            await db.close()
    assert {(c.object_path, c.page, c.block_id) for c in citations} == {
        ("projects/42/files/report.pdf", page, f"f-1001/{page}/0") for page in (1, 2, 3)
    }
    assert all(c.text == f"Zanzibar page {c.page}" for c in citations)
