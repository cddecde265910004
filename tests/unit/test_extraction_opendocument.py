"""OpenDocument files written with odfpy: a text's headings, lists and tables, a presentation's
slides as pages, a spreadsheet's sheets; their bombs and damage refused before or while parsing."""

from __future__ import annotations

import io
import time
import zipfile

import pytest
from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_runtime.chunking import split_structural

from tests.support.formats import PUMPS, VALVES, an_odp, an_ods, an_odt, zip_bomb_odt


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data, filename="upload": extractor.extract(data, filename, "")


def test_a_text_keeps_its_headings_lists_and_tables_in_order(extract):
    result = extract(an_odt(), "handbook.bin")  # known by its mimetype entry, not its name
    assert (result.format, result.page_count, result.extractor) == ("odt", None, "odfpy")
    assert result.text == (
        "# Employee handbook\n\nWelcome to the company.\n\n## Leave\n\nLeave rules follow.\n\n"
        "- Ask your manager\n- Record it in the register\n\n## Allowances\n\n"
        "| Grade | Days |\n| --- | --- |\n| A | 25 |\n| B | 30 |\n\n\\# not a heading, just text"
    )
    assert [c.section for c in split_structural(result.text)] == ["Employee handbook", "Leave", "Allowances"]


def test_a_presentation_is_a_page_per_slide_with_titles_tables_and_notes(extract):
    result = extract(an_odp(), "review.odp")
    assert (result.format, result.page_count) == ("odp", 2)
    chunks = split_structural(result.text)
    assert [(c.section, c.page) for c in chunks] == [("Quarterly pumps review", 1), ("Slide 2", 2)]
    assert PUMPS in chunks[0].content and "| Valve | 120 |" in chunks[0].content
    assert "Notes: Mention the autumn window." in chunks[0].content
    assert VALVES in chunks[1].content


def test_a_spreadsheet_is_a_table_per_sheet(extract):
    result = extract(an_ods(), "regions.ods")
    assert result.format == "ods"
    assert "[Sheet: Regions]\n\n## Sheet: Regions\n\n| Region | Revenue |" in result.text
    assert "| Zanzibar | 4,250 |" in result.text and "[Sheet: Staff]" in result.text
    assert [c.section for c in split_structural(result.text)] == ["Sheet: Regions", "Sheet: Staff"]
    assert "|  |" not in result.text  # the 16,000 empty repeated cells of each row are not written


def test_a_row_repeated_a_million_times_is_cut_at_the_row_limit(extract):
    started = time.monotonic()
    result = extract(an_ods(repeated_rows=1_000_000), "repeated.ods")
    assert time.monotonic() - started < 20
    assert "a sheet was cut at 200,000 rows" in result.warnings


def test_a_zip_bomb_odt_is_refused_before_parsing(extract):
    started = time.monotonic()
    with pytest.raises(ExtractionFailed) as refused:
        extract(zip_bomb_odt(), "bomb.odt")
    assert refused.value.reason == "ARCHIVE_TOO_LARGE" and time.monotonic() - started < 5


def changed_odt(part: str, change) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(an_odt())) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for item in source.infolist():
            data = source.read(item)
            out.writestr(item, change(data) if item.filename == part else data)
    return buffer.getvalue()


def test_encrypted_and_damaged_opendocument_files(extract, capfd):
    locked = changed_odt(
        "META-INF/manifest.xml",
        lambda xml: xml.replace(
            b"</manifest:manifest>",
            b'<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/>'
            b"</manifest:file-entry></manifest:manifest>",
        ),
    )
    with pytest.raises(ExtractionFailed) as refused:
        extract(locked, "locked.odt")
    assert refused.value.reason == "FILE_ENCRYPTED"
    with pytest.raises(ExtractionFailed) as broken:
        extract(changed_odt("content.xml", lambda xml: xml[: len(xml) // 2]), "broken.odt")
    assert broken.value.reason == "FILE_CORRUPT"
    assert "Welcome" not in capfd.readouterr().out  # odfpy prints a part it cannot parse: never the text
