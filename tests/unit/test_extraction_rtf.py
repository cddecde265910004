"""RTF as WordPad and Word write it: headings from the style sheet, paragraphs, tables, code-page
and Unicode letters; pictures and control words left out."""

from __future__ import annotations

import pytest
from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_runtime.chunking import split_structural

from tests.support.formats import AN_RTF


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data, filename="upload": extractor.extract(data, filename, "")


def test_headings_paragraphs_and_a_table(extract):
    result = extract(AN_RTF, "maintenance.doc")  # Word saves RTF under .doc too: the bytes decide
    assert (result.format, result.extractor, result.page_count) == ("rtf", "striprtf", None)
    assert result.text == (
        "# Pump maintenance\n\n"
        "Zanzibar pump stations are inspected every quarter by a certified technician.\n\n"
        "## Costs\n\n| Part | Price |\n| --- | --- |\n| Valve | 120 |\n| Seal | 8 |\n\n"
        "Ask the café desk or the € office."
    )
    assert [c.section for c in split_structural(result.text)] == ["Pump maintenance", "Costs"]


def test_without_a_style_sheet_the_text_is_paragraphs(extract):
    result = extract(rb"{\rtf1\ansi Opening hours:\par nine to four.\par}", "hours.rtf")
    assert result.text == "Opening hours:\n\nnine to four."


def test_a_declared_code_page_is_used(extract):
    result = extract(rb"{\rtf1\ansi\ansicpg1251 \'cf\'f0\'e8\'e2\'e5\'f2\par}", "greeting.rtf")
    assert result.text == "Привет"


def test_a_damaged_rtf_ends_cleanly(extract):
    try:
        result = extract(AN_RTF[: len(AN_RTF) * 2 // 3], "cut.rtf")
    except ExtractionFailed as error:
        assert error.reason == "FILE_CORRUPT"
    else:
        assert "Zanzibar" in result.text  # what stands before the cut is kept
