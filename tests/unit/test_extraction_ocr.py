"""Scanned PDF pages read by OCR (the real Tesseract that `make setup` installs): the scans are
made here, a text PDF written with fpdf2, rendered by pdfium and wrapped back as image pages."""

from __future__ import annotations

import pytest
from knowledge_ingest.domain.extraction import ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor, ocr
from knowledge_runtime.chunking import split_structural

from tests.support.documents import PUMPS, RESERVOIR, VALVES, noise_page, scanned_pdf


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data: extractor.extract(data, "scan.pdf", "application/pdf")


def test_an_image_only_pdf_is_read_by_ocr_page_by_page(extract):
    assert ocr.engine_version() is not None, "tesseract-ocr with English data is installed by make setup"
    result = extract(scanned_pdf([PUMPS, VALVES]))
    assert result.extractable and result.page_count == 2
    assert PUMPS in result.text and VALVES in result.text  # clean scans come back word for word
    assert (
        result.text.index("[Page 1]")
        < result.text.index(PUMPS)
        < result.text.index("[Page 2]")
        < result.text.index(VALVES)
    )
    assert [c.page for c in split_structural(result.text)] == [1, 2]
    assert result.warnings == (f"2 page(s) read by OCR ({ocr.engine_version()}): pages 1-2",)
    assert result.extractor == f"OCR ({ocr.engine_version()}) on every page"
    assert result.ocr_page_count == 2 and 80 < result.ocr_confidence <= 100  # Tesseract's mean word confidence


def test_a_mixed_pdf_reads_only_the_pages_without_text_by_ocr(extract, monkeypatch):
    read: list[int] = []
    real = ocr._render_page
    monkeypatch.setattr(ocr, "_render_page", lambda document, index: read.append(index + 1) or real(document, index))
    result = extract(scanned_pdf([PUMPS, VALVES, RESERVOIR], text_layer=(1,)))
    assert read == [1, 3]  # page 2 has its text layer
    assert [c.page for c in split_structural(result.text) if "Valves" in c.content] == [2]
    assert RESERVOIR in result.text.split("[Page 3]")[1]
    assert result.extractor == f"pdfium, pypdf; OCR ({ocr.engine_version()}) on pages 1, 3"
    assert f"2 page(s) read by OCR ({ocr.engine_version()}): pages 1, 3" in result.warnings  # kept on the document


def test_a_page_ocr_cannot_read_ends_with_a_warning_not_a_failure(extract):
    result = extract(scanned_pdf([PUMPS, noise_page()]))
    assert result.extractable and PUMPS in result.text
    assert "page 2: OCR found no readable text" in result.warnings
    assert f"1 page(s) read by OCR ({ocr.engine_version()}): page 1" in result.warnings


def test_the_page_budget_and_the_per_page_time_limit_are_kept():
    scan = scanned_pdf([PUMPS, VALVES])
    budget = DocumentExtractor(ExtractionLimits(max_ocr_pages=1), use_unstructured=False).extract(scan, "s.pdf", "")
    assert PUMPS in budget.text and "Valves" not in budget.text
    assert (
        "OCR read 1 of the 2 pages without a text layer (the OCR page budget); the others have no text"
        in budget.warnings
    )
    slow = DocumentExtractor(ExtractionLimits(ocr_page_seconds=0.001), use_unstructured=False).extract(
        scan, "s.pdf", ""
    )
    assert not slow.extractable
    assert "page 1: OCR stopped after 0.001 s; the page has no text" in slow.warnings


def test_garbage_text_layers_count_as_missing():
    assert ocr.needs_ocr("", has_image=False) and ocr.needs_ocr("\ufffd\ufffd" * 40 + "ab", has_image=False)
    assert ocr.needs_ocr("  3  ", has_image=True)  # a scan with a page number stamped on it
    assert not ocr.needs_ocr("Appendix 3", has_image=False)  # a short page of real text
    assert not ocr.needs_ocr(PUMPS, has_image=True)
    # Either side of the 60% readable share (spaces aside): 7 of 11 characters is text, 6 of 11 is not.
    assert not ocr.needs_ocr("abc,de f" + "\u25a1\ufffd\u25a1\ufffd", has_image=False)
    assert ocr.needs_ocr("abc,d e" + "\u25a1\ufffd\u25a1\ufffd\u25a1", has_image=False)


def test_the_ocr_budget_and_time_limit_are_settings():
    from knowledge_ingest.config import IngestSettings
    from knowledge_runtime.settings import Env, SettingsError

    env = {"KNOWLEDGE_OCR_MAX_PAGES": "12", "KNOWLEDGE_OCR_PAGE_SECONDS": "5"}
    limits = IngestSettings.from_env(Env(env)).extraction_limits()
    assert (limits.max_ocr_pages, limits.ocr_page_seconds) == (12, 5.0)
    defaults = IngestSettings.from_env(Env({})).extraction_limits()
    assert (defaults.max_ocr_pages, defaults.ocr_page_seconds) == (100, 60.0)
    with pytest.raises(SettingsError):
        IngestSettings.from_env(Env({"KNOWLEDGE_OCR_PAGE_SECONDS": "0"}))
