"""Scanned PDF pages read by OCR (the real Tesseract that `make setup` installs): the scans are
made here, a text PDF written with fpdf2, rendered by pdfium and wrapped back as image pages."""

from __future__ import annotations

import random

import pypdfium2 as pdfium
import pytest
from fpdf import FPDF
from knowledge_ingest.adapters.extraction import DocumentExtractor, ocr
from knowledge_ingest.domain.extraction import ExtractionLimits
from knowledge_runtime.chunking import split_structural
from PIL import Image

A4 = (595.28, 841.89)
PUMPS = "Zanzibar pump stations are inspected every quarter by a certified technician."
VALVES = "Valves older than twelve years are replaced during the autumn maintenance window."
RESERVOIR = "The northern reservoir opens to visitors on weekdays between nine and four."


def text_pdf(pages: list[str]) -> bytes:
    document = FPDF()
    document.set_font("helvetica", size=12)
    for text in pages:
        document.add_page()
        document.multi_cell(0, 7, text)
    return bytes(document.output())


def scanned_pdf(pages: list[str | Image.Image], *, text_layer: tuple[int, ...] = ()) -> bytes:
    """Each page an image of its text at 200 dpi (no text layer), except the 0-based pages in
    ``text_layer``, written as text; an ``Image`` is placed as the page as it is."""
    rendered = pdfium.PdfDocument(text_pdf([p if isinstance(p, str) else "" for p in pages]))
    document = FPDF(unit="pt")
    for index, page in enumerate(pages):
        document.add_page(format=A4)
        if index in text_layer:
            assert isinstance(page, str)
            document.set_font("helvetica", size=12)
            document.set_xy(56, 56)
            document.multi_cell(480, 16, page)
            continue
        image = page if isinstance(page, Image.Image) else rendered[index].render(scale=200 / 72, grayscale=True).to_pil()
        document.image(image, x=0, y=0, w=A4[0], h=A4[1])
    return bytes(document.output())


def noise_page() -> Image.Image:
    """A photograph-like page of grey noise: something to render, nothing to read."""
    rng = random.Random(7)
    image = Image.new("L", (400, 560))
    image.putdata([rng.randrange(90, 170) for _ in range(400 * 560)])
    return image


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data: extractor.extract(data, "scan.pdf", "application/pdf")


def test_an_image_only_pdf_is_read_by_ocr_page_by_page(extract):
    assert ocr.engine_version() is not None, "tesseract-ocr with English data is installed by make setup"
    result = extract(scanned_pdf([PUMPS, VALVES]))
    assert result.extractable and result.page_count == 2
    assert PUMPS in result.text and VALVES in result.text  # clean scans come back word for word
    assert result.text.index("[Page 1]") < result.text.index(PUMPS) < result.text.index("[Page 2]") < result.text.index(VALVES)
    assert [c.page for c in split_structural(result.text)] == [1, 2]
    assert result.warnings == (f"2 page(s) read by OCR ({ocr.engine_version()}): pages 1-2",)
    assert result.extractor == f"OCR ({ocr.engine_version()}) on every page"


def test_a_mixed_pdf_reads_only_the_pages_without_text_by_ocr(extract, monkeypatch):
    read: list[int] = []
    real = ocr._read_page
    monkeypatch.setattr(ocr, "_read_page", lambda document, index, seconds: read.append(index + 1) or real(document, index, seconds))
    result = extract(scanned_pdf([PUMPS, VALVES, RESERVOIR], text_layer=(1,)))
    assert read == [1, 3]  # page 2 has its text layer
    assert [c.page for c in split_structural(result.text) if "Valves" in c.content] == [2]
    assert RESERVOIR in result.text.split("[Page 3]")[1]
    assert result.extractor == f"pypdf; OCR ({ocr.engine_version()}) on pages 1, 3"
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
    assert "OCR read 1 of the 2 pages without a text layer (the OCR page budget); the others have no text" in budget.warnings
    slow = DocumentExtractor(ExtractionLimits(ocr_page_seconds=0.001), use_unstructured=False).extract(scan, "s.pdf", "")
    assert not slow.extractable
    assert "page 1: OCR stopped after 0.001 s; the page has no text" in slow.warnings


def test_garbage_text_layers_count_as_missing():
    assert ocr.needs_ocr("", has_image=False) and ocr.needs_ocr("\ufffd\ufffd" * 40 + "ab", has_image=False)
    assert ocr.needs_ocr("  3  ", has_image=True)  # a scan with a page number stamped on it
    assert not ocr.needs_ocr("Appendix 3", has_image=False)  # a short page of real text
    assert not ocr.needs_ocr(PUMPS, has_image=True)


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
