"""Each format beyond PDF and Office's own, as a real file through the real stack: content-index,
the embedder (the real model), ingest with its isolated extraction child, search, one PostgreSQL.
Each test asserts the text and its structure as stored, the page of a search hit where the format
has pages, and what the document records of how it was read; the hostile files end in their
refusal, or their warning, within the limits, and the stack goes on."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.extraction import legacy
from knowledge_ingest.extraction.mail import MAX_ATTACHMENTS
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env
from knowledge_search.bootstrap import build_app as search_app
from knowledge_search.config import SearchSettings

from tests.support import rpc
from tests.support.documents import regions_report, word_document
from tests.support.formats import (
    AN_RTF,
    DOCX,
    PUMPS,
    RESERVOIR,
    VALVES,
    a_pptx,
    an_email,
    an_odp,
    an_ods,
    an_odt,
    converted_by_libreoffice,
    image_file,
    multi_page_tiff,
    png_bomb,
    sideways_jpeg,
    text_image,
    zip_bomb_odt,
)
from tests.support.ingest import new_corpus, upload, wait_terminal
from tests.support.real_services import base_env, ingest_env, start_backends

pytestmark = pytest.mark.integration
WEB_PAGES = Path(__file__).parent.parent / "data" / "web"


class Stack:
    def __init__(self, ingest: rpc.IngestStub, search: search_pb2_grpc.SearchServiceStub, admin: Database) -> None:
        self.ingest, self.search, self.admin = ingest, search, admin
        self.metadata: list[tuple[str, str]] = []
        self.corpus_id = ""

    async def ingested(self, data: bytes, filename: str, timeout: float = 180) -> ingest_pb2.IngestJob:
        reply = await upload(self.ingest, self.metadata, self.corpus_id, data, filename)
        return await wait_terminal(self.ingest, self.metadata, reply.job_id, timeout=timeout)

    async def document(self, job: ingest_pb2.IngestJob) -> ingest_pb2.Document:
        request = ingest_pb2.GetDocumentRequest(document_id=job.result.document_id)
        return await self.ingest.GetDocument(request, metadata=self.metadata)

    async def sections(self, job: ingest_pb2.IngestJob) -> list[tuple[str, int | None, str]]:
        rows = await self.admin.fetch(
            "t",
            "SELECT section, page, content FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
            int(job.result.document_id),
        )
        return [(r["section"], r["page"], r["content"]) for r in rows]

    async def hits(self, query: str, job: ingest_pb2.IngestJob) -> list[search_pb2.SearchResult]:
        """The search hits of ``query`` in the job's document, the best first."""
        request = search_pb2.SearchRequest(
            query=query, document_id=job.result.document_id, mode=search_pb2.SEARCH_MODE_HYBRID, top_k=5
        )
        return list((await self.search.Search(request, metadata=self.metadata)).results)


@pytest.fixture(scope="module")
async def stack(migrated_pg, keys_dir, tmp_path_factory, make_token):
    tmp = tmp_path_factory.mktemp("formats")
    apps, addresses = await start_backends(migrated_pg, keys_dir, tmp)
    env = {
        **ingest_env(migrated_pg, keys_dir, tmp, addresses, 0),
        "KNOWLEDGE_CHUNK_MAX_CHARS": "600",
        "KNOWLEDGE_MAX_UPLOAD_BYTES": str(16 * 1024 * 1024),
    }
    ingest = await ingest_app(IngestSettings.from_env(Env(env)))
    search = await search_app(
        SearchSettings.from_env(
            Env(
                {
                    **base_env(migrated_pg, keys_dir, tmp, "search"),
                    "KNOWLEDGE_SEARCH_PORT": "0",
                    "KNOWLEDGE_EMBEDDER_ADDRESS": addresses["embedder"],
                }
            )
        )
    )
    apps += [ingest, search]
    ingest_port, search_port = await ingest.start(), await search.start()
    admin = await Database.connect(migrated_pg.url())
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{ingest_port}") as ingest_channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{search_port}") as search_channel,
    ):
        stack = Stack(rpc.IngestStub(ingest_channel), search_pb2_grpc.SearchServiceStub(search_channel), admin)
        stack.metadata = [("authorization", f"Bearer {make_token('t-formats')}")]
        stack.corpus_id = await new_corpus(stack.ingest, stack.metadata)
        yield stack
    await admin.close()
    for app in reversed(apps):
        await app.stop()


async def test_a_multi_page_tiff_is_read_by_ocr_and_cited_by_page(stack):
    tiff = multi_page_tiff([text_image([PUMPS]), text_image([VALVES]), text_image([RESERVOIR])])
    job = await stack.ingested(tiff, "inspection-scan.tiff")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    assert [(page, content) for _, page, content in await stack.sections(job)] == [
        (1, PUMPS),
        (2, VALVES),
        (3, RESERVOIR),
    ]
    assert (await stack.hits("valves replaced in autumn", job))[0].page == 2
    assert (await stack.hits("reservoir weekdays", job))[0].page == 3
    document = await stack.document(job)
    assert document.extractor.startswith("OCR (tesseract") and document.extractor.endswith("on every page")
    assert document.ocr_page_count == 3 and 80 < document.ocr_confidence <= 100


async def test_a_sideways_photo_is_read_upright(stack):
    job = await stack.ingested(sideways_jpeg([PUMPS, RESERVOIR]), "whiteboard.jpg")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    hit = (await stack.hits("Zanzibar pump stations", job))[0]
    assert hit.page == 1 and PUMPS in hit.content  # uploaded as text/plain: the bytes decide


async def test_an_image_without_text_is_stored_with_no_text_found(stack):
    job = await stack.ingested(image_file(text_image([]), "PNG"), "blank.png")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    assert not job.result.extractable and job.result.chunk_count == 0
    document = await stack.document(job)
    assert any("no text found" in warning for warning in document.warnings)
    assert document.ocr_confidence == 0


async def test_hostile_images_answer_within_the_limits_and_nothing_else_is_lost(stack):
    started = time.monotonic()
    bomb = await stack.ingested(png_bomb(), "bomb.png")
    assert bomb.state == ingest_pb2.DOCUMENT_STATE_FAILED
    assert "megapixels" in bomb.error and time.monotonic() - started < 60
    tiff = multi_page_tiff([text_image([PUMPS])], blank_pages=9_999)
    started = time.monotonic()
    pages = await stack.ingested(tiff, "ten-thousand-pages.tiff")
    assert time.monotonic() - started < 120
    assert pages.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, pages.error
    assert any("(the OCR page budget)" in warning for warning in pages.result.warnings)
    assert (await stack.hits("Zanzibar pump stations", pages))[0].page == 1
    # the documents before them are still there and searchable
    documents = await stack.ingest.ListDocuments(
        ingest_pb2.ListDocumentsRequest(corpus_id=stack.corpus_id, page_size=100), metadata=stack.metadata
    )
    assert all(d.state != ingest_pb2.DOCUMENT_STATE_FAILED or d.filename == "bomb.png" for d in documents.documents)


async def test_an_email_with_attachments_is_cited_by_section_and_page(stack):
    message = an_email(
        attachments=[
            ("regions.pdf", "application/pdf", regions_report()),
            ("handbook.docx", DOCX, word_document()),
        ]
    )
    job = await stack.ingested(message, "inspection.eml")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    chunks = await stack.sections(job)
    assert chunks[0][0] == "Pump inspection résumé" and "From: Amira Okafor <amira@example.org>" in chunks[0][2]
    assert any(section == "Allowances" and "| B | 30 |" in content for section, _, content in chunks)
    body = (await stack.hits("northern reservoir weekdays", job))[0]
    assert (body.section, body.page) == ("Pump inspection résumé", 0)  # no page: the body has none
    table = (await stack.hits("Zanzibar revenue", job))[0]
    assert (table.section, table.page) == ("Revenue by region", 2)  # the attached PDF's page
    assert (await stack.document(job)).extractor == "email"


async def test_an_email_with_500_attachments_answers_within_the_limits(stack):
    attachments = [(f"note-{n}.txt", "text/plain", f"Audit note {n}: the meter was read.".encode()) for n in range(500)]
    started = time.monotonic()
    job = await stack.ingested(an_email(attachments=attachments), "flood.eml")
    assert time.monotonic() - started < 120
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    assert f"only the first {MAX_ATTACHMENTS} of 500 attachments were read" in job.result.warnings
    contents = " ".join(content for _, _, content in await stack.sections(job))
    assert "Audit note 0:" in contents and f"Audit note {MAX_ATTACHMENTS}:" not in contents


async def test_opendocument_text_presentation_and_spreadsheet(stack):
    text = await stack.ingested(an_odt(), "handbook.odt")
    assert text.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, text.error
    assert [section for section, _, _ in await stack.sections(text)] == ["Employee handbook", "Leave", "Allowances"]
    hit = (await stack.hits("grade days allowances", text))[0]
    assert hit.section == "Allowances" and "| B | 30 |" in hit.content
    slides = await stack.ingested(an_odp(), "review.odp")
    assert slides.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, slides.error
    hit = (await stack.hits("valves replaced in autumn", slides))[0]
    assert (hit.section, hit.page) == ("Slide 2", 2)
    assert (await stack.hits("Zanzibar pump stations quarterly", slides))[0].page == 1
    sheets = await stack.ingested(an_ods(), "regions.ods")
    assert sheets.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, sheets.error
    hit = (await stack.hits("Amira Okafor engineer", sheets))[0]
    assert hit.section == "Sheet: Staff" and "| Amira Okafor | Engineer |" in hit.content
    assert (await stack.document(sheets)).extractor == "odfpy"


async def test_a_zip_bomb_odt_is_refused_and_the_stack_goes_on(stack):
    started = time.monotonic()
    bomb = await stack.ingested(zip_bomb_odt(), "bomb.odt")
    assert bomb.state == ingest_pb2.DOCUMENT_STATE_FAILED and "zip bomb" in bomb.error
    assert time.monotonic() - started < 60
    after = await stack.ingested(an_ods(), "regions-again.ods")
    assert after.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, after.error


async def test_an_rtf_file_keeps_its_headings_and_table(stack):
    job = await stack.ingested(AN_RTF, "maintenance.rtf")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    assert [section for section, _, _ in await stack.sections(job)] == ["Pump maintenance", "Costs"]
    hit = (await stack.hits("seal price", job))[0]
    assert hit.section == "Costs" and "| Seal | 8 |" in hit.content
    assert (await stack.document(job)).extractor == "striprtf"


@pytest.mark.parametrize(
    ("page", "query", "section", "row", "reader"),
    [
        ("release-notes.html", "minimum linux kernel", "Supported platforms", "| Linux kernel | 5.10 |", "markdownify"),
        ("confluence-intranet.html", "rota week primary", "Rota", "| 49 | Amira Okafor | Bo Lind |", "markdownify"),
        ("government-info.html", "shared supply fee", "How often your supply is tested", "| £500 |", "trafilatura"),
    ],
)
async def test_a_web_page_is_cited_by_its_section_and_keeps_no_navigation(stack, page, query, section, row, reader):
    job = await stack.ingested((WEB_PAGES / page).read_bytes(), page)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    hit = (await stack.hits(query, job))[0]
    assert hit.section == section and row in hit.content and hit.page == 0
    contents = " ".join(content for _, _, content in await stack.sections(job)).lower()
    assert "cookie settings" not in contents and "spaces menu" not in contents and "crown logo" not in contents
    assert (await stack.document(job)).extractor == reader


@pytest.mark.skipif(legacy.soffice() is None, reason="LibreOffice is installed by make setup")
async def test_office_97_files_are_read_through_libreoffice_in_the_child(stack):
    doc = await stack.ingested(converted_by_libreoffice(word_document(), "docx", "doc"), "handbook.doc")
    assert doc.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, doc.error
    hit = (await stack.hits("grade days allowances", doc))[0]
    assert hit.section == "Allowances" and "| B | 30 | two<br>lines |" in hit.content
    ppt = await stack.ingested(converted_by_libreoffice(a_pptx(), "pptx", "ppt"), "review.ppt")
    assert ppt.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, ppt.error
    hit = (await stack.hits("valves replaced in autumn", ppt))[0]
    assert (hit.section, hit.page) == ("Replacement rules", 2)
    assert (await stack.hits("Zanzibar pump stations quarterly", ppt))[0].page == 1
    assert (await stack.document(ppt)).extractor == "LibreOffice, python-pptx"
