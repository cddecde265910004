"""pdfium's reading of a PDF page (``pdf_text``): the line sizes headings are found by, as pypdf
measured them; a word hyphenated at a line end joined; and the pages it leaves to pypdf (a ruled
table's, one whose words it reads in pieces), which pypdf then reads as before."""

from __future__ import annotations

import io

import pytest
from fpdf import FPDF
from knowledge_ingest.domain.extraction import ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor, pdf, pdf_text

from tests.support.documents import LINE, drawn_pdf, regions_report

# A heading set at size 1 and drawn at 18 by the text matrix, a body line drawn at 11, a line at
# 6 drawn twice as large by the graphics state: what is drawn counts, not the size set.
SIZED = drawn_pdf(
    b"BT /F1 1 Tf 18 0 0 18 72 700 Tm (Big Heading) Tj ET "
    b"BT /F1 1 Tf 11 0 0 11 72 650 Tm (body text that runs on for a while) Tj ET "
    b"q 2 0 0 2 0 0 cm BT /F1 6 Tf 36 300 Td (scaled by cm) Tj ET Q"
)


def extract(data: bytes):
    return DocumentExtractor(ExtractionLimits(), use_unstructured=False).extract_quietly(
        data, "report.pdf", "application/pdf"
    )


def by_pdfium(data: bytes, index: int = 0) -> pdf_text.PageText | None:
    document = pdf_text.open_document(data)
    assert document is not None
    try:
        return pdf_text.read_page(document, index)
    finally:
        document.close()


def by_pypdf(data: bytes, index: int = 0):
    return pdf._read_page(pdf.open_pdf(io.BytesIO(data)), index)[0]


@pytest.fixture
def pypdf_only(monkeypatch):
    """Extraction as it was before pdfium read pages: every page by pypdf."""

    def run(data: bytes):
        with monkeypatch.context() as patch:
            patch.setattr(pdf_text, "open_document", lambda _source: None)
            return extract(data)

    return run


def test_line_sizes_are_the_drawn_sizes_pypdf_measures():
    read = by_pdfium(SIZED)
    assert read is not None
    assert (
        read.sizes
        == by_pypdf(SIZED).sizes
        == {"BigHeading": 18.0, "bodytextthatrunsonforawhile": 11.0, "scaledbycm": 12.0}
    )
    assert read.weights == {18.0: 10, 11.0: 27, 12.0: 10}
    assert "# Big Heading" in extract(SIZED).text


def test_a_word_hyphenated_at_a_line_end_is_joined():
    data = drawn_pdf(b"BT /F1 11 Tf 72 700 Td (the pressure of the re-) Tj 0 -14 Td (lief valve rises) Tj ET")
    assert "the pressure of the relief valve rises" in extract(data).text
    assert "re-\nlief" in by_pypdf(data).text  # pypdf leaves the word cut


def test_words_read_in_pieces_are_left_to_pypdf(pypdf_only):
    words = b"north buona vista drive metropolis tower singapore road suite lines".split() * 3
    kerned = b" ".join(b"[(%s) -250 (%s)] TJ ( ) Tj" % (word[:-1], word[-1:]) for word in words)
    data = drawn_pdf(b"BT /F1 11 Tf 72 700 Td " + kerned + b" ET")
    assert by_pdfium(data) is None
    assert extract(data).text == pypdf_only(data).text


def test_a_page_with_a_ruled_table_is_left_to_pypdf_and_one_with_stray_rules_is_not(pypdf_only):
    data = regions_report()  # page 1: two rules and a box, no table; page 2: a ruled table
    first = by_pdfium(data, 0)
    assert first is not None and "The year in brief" in first.text
    assert by_pdfium(data, 1) is None
    both = extract(data).text
    assert "| Zanzibar | 4,250 | Amira Okafor |" in both
    assert both[both.index("[Page 2]") :] == pypdf_only(data).text[pypdf_only(data).text.index("[Page 2]") :]


def test_the_same_text_as_pypdf_on_a_plain_document(pypdf_only):
    document = FPDF()
    for page in range(1, 6):
        document.add_page()
        document.set_font("helvetica", "B", 16)
        document.cell(0, 10, f"Chapter {page}: valves", **LINE)
        document.set_font("helvetica", size=11)
        document.multi_cell(0, 5, f"Procedure {page} checks valve {page * 3} and logs the pressure. " * 9, **LINE)
    data = bytes(document.output())
    ours, before = extract(data).text, pypdf_only(data).text
    assert ours.split() == before.split()
    assert ours.count("# Chapter") == 5
