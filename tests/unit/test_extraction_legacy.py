"""Word and PowerPoint 97-2003 files (saved from .docx and .pptx by LibreOffice, as Office saves
them) read through LibreOffice in the extraction child: the structure of their OOXML cousins, no
link followed, a clear refusal where LibreOffice is missing or the file is damaged."""

from __future__ import annotations

import http.server
import threading

import pytest
from knowledge_ingest.domain.extraction import ExtractionFailed, ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor, legacy
from knowledge_runtime.chunking import split_structural

from tests.support.documents import word_document
from tests.support.formats import PUMPS, VALVES, a_pptx, converted_by_libreoffice

pytestmark = pytest.mark.skipif(legacy.soffice() is None, reason="LibreOffice is installed by make setup")


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data, filename="upload": extractor.extract(data, filename, "")


def test_a_doc_keeps_the_headings_lists_and_tables_of_a_docx(extract):
    result = extract(converted_by_libreoffice(word_document(), "docx", "doc"), "handbook.bin")
    assert (result.format, result.extractor, result.page_count) == ("doc", "LibreOffice, python-docx", None)
    assert "# Employee handbook" in result.text and "- Ask your manager" in result.text
    assert "| Grade | Days | Note |\n| --- | --- | --- |\n| A | 25 | pipe \\| inside |" in result.text
    assert [c.section for c in split_structural(result.text)][:3] == ["Employee handbook", "Leave", "Allowances"]


def test_a_ppt_is_a_page_per_slide_with_titles_tables_and_notes(extract):
    result = extract(converted_by_libreoffice(a_pptx(), "pptx", "ppt"), "review.ppt")
    assert (result.format, result.page_count) == ("ppt", 2)
    chunks = split_structural(result.text)
    assert [(c.section, c.page) for c in chunks] == [("Quarterly pumps review", 1), ("Replacement rules", 2)]
    assert PUMPS in chunks[0].content and "| Valve | 120 |" in chunks[0].content
    assert "Notes: Mention the autumn window." in chunks[0].content and VALVES in chunks[1].content


def test_links_to_the_network_and_to_local_files_are_not_followed(extract, tmp_path):
    requests: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret = tmp_path / "secret.txt"
    secret.write_text("cached")
    rtf = (
        "{\\rtf1\\ansi Linked content follows.\\par "
        f'{{\\field{{\\*\\fldinst {{INCLUDEPICTURE "http://127.0.0.1:{server.server_address[1]}/p.png" \\\\d}}}}'
        "{\\fldrslt {none}}}\\par "
        f'{{\\field{{\\*\\fldinst {{INCLUDETEXT "{secret}"}}}}{{\\fldrslt {{CACHED-TEXT}}}}}}\\par The end.\\par}}'
    )
    doc = converted_by_libreoffice(rtf.encode(), "rtf", "doc")
    requests.clear()
    secret.write_text("SECRET-ON-THE-HOST")
    try:
        result = extract(doc, "linked.doc")
    finally:
        server.shutdown()
    assert "Linked content follows." in result.text
    assert requests == [] and "SECRET-ON-THE-HOST" not in result.text


def test_a_damaged_doc_is_refused_and_a_slow_conversion_is_stopped(extract, monkeypatch):
    doc = converted_by_libreoffice(word_document(), "docx", "doc")
    with pytest.raises(ExtractionFailed) as damaged:
        extract(doc[:4096] + bytes(len(doc) - 4096), "damaged.doc")
    assert damaged.value.reason == "FILE_CORRUPT"
    monkeypatch.setattr(legacy, "CONVERT_SECONDS", 0.01)
    with pytest.raises(ExtractionFailed) as slow:
        DocumentExtractor(ExtractionLimits(), use_unstructured=False).extract(doc, "slow.doc", "")
    assert slow.value.reason == "EXTRACTION_TIMEOUT"


def test_without_libreoffice_a_doc_is_refused_as_before(extract, monkeypatch):
    monkeypatch.setattr(legacy, "soffice", lambda: None)
    with pytest.raises(ExtractionFailed) as refused:
        extract(converted_by_libreoffice(word_document(), "docx", "doc"), "old.doc")
    assert refused.value.reason == "UNSUPPORTED_FORMAT" and ".docx" in refused.value.message
