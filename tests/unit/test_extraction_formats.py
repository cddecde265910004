"""Extraction of each format into the chunker's markers, with files the tests write with the
real libraries; the text then goes through the structural chunker as ingest will use it."""

from __future__ import annotations

import io
import struct
import zipfile

import docx
import pptx
import pytest
import xlsxwriter
import xlwt
from fpdf import FPDF
from knowledge_ingest.domain.extraction import Extracted
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_runtime.chunking import split_structural
from pptx.util import Inches

from tests.support.documents import LINE, WEB_PAGE, word_document


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)

    def run(data: bytes, filename: str, mime_type: str = "") -> Extracted:
        return extractor.extract(data, filename, mime_type)

    return run


def sections_and_pages(result: Extracted) -> list[tuple[str, int | None]]:
    return [(c.section, c.page) for c in split_structural(result.text)]


# --- PDF ---------------------------------------------------------------------------------


def pdf_with_font_headings() -> bytes:
    pdf = FPDF()
    for chapter in (1, 2, 3):
        pdf.add_page()
        pdf.set_font("helvetica", "B", 20)
        pdf.cell(0, 12, f"Chapter {chapter}", **LINE)
        pdf.set_font("helvetica", "B", 14)
        pdf.cell(0, 10, f"Section {chapter}.1", **LINE)
        pdf.set_font("helvetica", size=11)
        pdf.multi_cell(0, 6, f"Body of chapter {chapter} about topic{chapter}. " * 8, **LINE)
    return bytes(pdf.output())


def test_pdf_gives_page_markers_and_font_size_headings(extract):
    result = extract(pdf_with_font_headings(), "report.pdf", "application/pdf")
    assert (result.format, result.page_count, result.extractable, result.warnings) == ("pdf", 3, True, ())
    assert "[Page 2]\n\n# Chapter 2\n\n## Section 2.1" in result.text
    chunks = split_structural(result.text)
    assert [(c.section, c.page) for c in chunks] == [("Section 1.1", 1), ("Section 2.1", 2), ("Section 3.1", 3)]
    assert "topic2" in chunks[1].content and "topic2" not in chunks[0].content


def test_pdf_heading_written_in_several_runs_is_still_one_heading(extract):
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", "B", 18)
    pdf.cell(pdf.get_string_width("Risk "), 10, "Risk ")
    pdf.set_font("helvetica", "BI", 18)
    pdf.cell(0, 10, "Register", **LINE)  # same line, another font: a second text run
    pdf.set_font("helvetica", size=10)
    pdf.multi_cell(0, 5, "Every risk has an owner and a review date. " * 6, **LINE)
    result = extract(bytes(pdf.output()), "risks.pdf")
    assert result.text.startswith("[Page 1]\n\n# Risk Register\n\nEvery risk has an owner")
    assert sections_and_pages(result) == [("Risk Register", 1)]


def test_pdf_running_header_is_not_a_heading_and_a_wrapped_heading_is_one(extract):
    pdf = FPDF()
    for page in (1, 2, 3):
        pdf.add_page()
        pdf.set_font("helvetica", "B", 14)
        pdf.cell(0, 8, "ACME Quarterly", **LINE)  # on every page, larger than the body
        if page == 1:
            pdf.set_font("helvetica", "B", 20)
            pdf.cell(0, 10, "Results of the", **LINE)
            pdf.cell(0, 10, "third quarter", **LINE)
        pdf.set_font("helvetica", size=10)
        pdf.multi_cell(0, 5, f"Findings on page {page} in plain words. " * 8, **LINE)
    result = extract(bytes(pdf.output()), "q3.pdf")
    assert "# Results of the third quarter" in result.text
    assert "# ACME" not in result.text and result.text.count("ACME Quarterly") == 3
    assert sections_and_pages(result) == [
        ("", 1),
        ("Results of the third quarter", 1),
        ("Results of the third quarter", 2),
        ("Results of the third quarter", 3),
    ]


def test_pdf_outline_gives_headings_at_their_line_or_the_page_start(extract):
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for part in (1, 2):
        pdf.add_page()
        pdf.start_section(f"Part {part}")  # an outline entry with no text of its own on the page
        pdf.multi_cell(0, 6, f"Opening of part {part}. " * 3, **LINE)
        pdf.start_section(f"Detail {part}", level=1)
        pdf.cell(0, 6, f"Detail {part}", **LINE)  # same size as the body: only the outline knows
        pdf.multi_cell(0, 6, f"Detail text {part}. " * 3, **LINE)
    result = extract(bytes(pdf.output()), "parts.pdf")
    assert result.text.startswith("[Page 1]\n\n# Part 1\n\nOpening of part 1.")
    assert sections_and_pages(result) == [("Part 1", 1), ("Detail 1", 1), ("Part 2", 2), ("Detail 2", 2)]
    assert result.text.count("Detail 1") == 1  # the line became the heading, not both


def test_pdf_without_text_is_not_extractable(extract):
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 50, 50)  # a drawing, no text: like a scan without OCR
    result = extract(bytes(pdf.output()), "scan.pdf")
    assert (result.extractable, result.text, result.page_count) == (False, "", 1)
    assert "OCR" in result.warnings[-1]


def test_pdf_page_limit_cuts_and_warns():
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for page in range(1, 6):
        pdf.add_page()
        pdf.cell(0, 6, f"page body {page}")
    from knowledge_ingest.domain.extraction import ExtractionLimits

    result = DocumentExtractor(ExtractionLimits(max_pages=2), use_unstructured=False).extract(
        bytes(pdf.output()), "long.pdf", ""
    )
    assert [p for _, p in sections_and_pages(result)] == [1, 2]
    assert result.page_count == 5
    assert result.warnings == ("only the first 2 of 5 pages were read",)


# --- DOCX --------------------------------------------------------------------------------


def test_docx_headings_paragraphs_and_tables_in_document_order(extract):
    result = extract(word_document(), "handbook.docx")
    assert (result.format, result.page_count, result.extractable) == ("docx", None, True)
    text = result.text
    assert text.index("# Employee handbook") < text.index("## Allowances") < text.index("| Grade |")
    assert text.index("| Grade |") < text.index("# Closing")
    assert "- Ask your manager" in text
    assert (
        "| Grade | Days | Note |\n| --- | --- | --- |\n| A | 25 | pipe \\| inside |\n| B | 30 | two<br>lines |" in text
    )
    assert "\\# not a heading" in text  # body text cannot fake a heading
    chunks = split_structural(text)
    assert [c.section for c in chunks] == ["Employee handbook", "Leave", "Allowances", "Closing"]
    table_chunk = chunks[2]
    assert "Table 1: allowances by grade" in table_chunk.content and "| B | 30 |" in table_chunk.content


def test_docx_text_boxes_are_read_once(extract):
    from docx.oxml import parse_xml

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    mc = "http://schemas.openxmlformats.org/markup-compatibility/2006"
    wps = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"

    def box(text: str) -> str:
        return f"<w:txbxContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:txbxContent>"

    document = docx.Document()
    paragraph = document.add_paragraph("Body text.")
    paragraph._p.append(
        parse_xml(
            f'<w:r xmlns:w="{w}" xmlns:mc="{mc}" xmlns:wps="{wps}"><mc:AlternateContent>'
            f"<mc:Choice Requires='wps'><w:drawing><wps:txbx>{box('Boxed callout')}</wps:txbx></w:drawing></mc:Choice>"
            f"<mc:Fallback><w:pict>{box('Boxed callout')}</w:pict></mc:Fallback>"
            "</mc:AlternateContent></w:r>"
        )
    )
    buffer = io.BytesIO()
    document.save(buffer)
    assert extract(buffer.getvalue(), "b.docx").text == "Body text.\n\nBoxed callout"


def test_docx_custom_heading_styles_follow_their_base_style(extract):
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    custom = document.styles.add_style("Policy Heading", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 2"]
    document.add_paragraph("Travel policy", style="Policy Heading")
    orphan = document.add_paragraph("Styled with a style the file does not define")
    orphan._p.style = "NoSuchStyle"
    buffer = io.BytesIO()
    document.save(buffer)
    assert (
        extract(buffer.getvalue(), "p.docx").text == "## Travel policy\n\nStyled with a style the file does not define"
    )


def test_word_table_cells_are_in_the_text_even_merged_and_nested(extract):
    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 1)).text = "Merged header"
    table.cell(0, 2).text = "Right"
    inner = table.cell(1, 0).add_table(rows=1, cols=2)
    inner.cell(0, 0).text = "nestedalpha"
    inner.cell(0, 1).text = "nestedbeta"
    table.cell(1, 2).text = "searchablecell"
    buffer = io.BytesIO()
    document.save(buffer)
    text = extract(buffer.getvalue(), "t.docx").text
    assert text.count("Merged header") == 1
    for word in ("Right", "nestedalpha", "nestedbeta", "searchablecell"):
        assert word in text
    assert text.splitlines()[1] == "| --- | --- | --- |"


def test_docx_content_controls_are_read_and_the_table_of_contents_skipped(extract):
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    body = document.element.body
    toc = parse_xml(
        f"<w:sdt {nsdecls('w')}><w:sdtPr><w:docPartObj><w:docPartGallery w:val='Table of Contents'/>"
        "</w:docPartObj></w:sdtPr><w:sdtContent><w:p><w:r><w:t>Scope .......... 3</w:t></w:r></w:p>"
        "</w:sdtContent></w:sdt>"
    )
    control = parse_xml(
        f"<w:sdt {nsdecls('w')}><w:sdtPr/><w:sdtContent><w:p><w:r><w:t>Inside a content control</w:t></w:r></w:p>"
        "</w:sdtContent></w:sdt>"
    )
    document.add_heading("Scope", 1)
    document.add_paragraph("After the control.")
    body.insert(0, toc)
    body.insert(2, control)
    buffer = io.BytesIO()
    document.save(buffer)
    assert extract(buffer.getvalue(), "c.docx").text == "# Scope\n\nInside a content control\n\nAfter the control."


# --- PPTX --------------------------------------------------------------------------------


def presentation() -> bytes:
    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Quarterly results"
    first.placeholders[1].text = "Revenue grew\nCosts fell"
    first.notes_slide.notes_text_frame.text = "Mention the new office."
    second = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title placeholder
    box = second.shapes.add_textbox(Inches(1), Inches(0.5), Inches(4), Inches(1))
    box.text_frame.text = "Regional split"
    shape = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(4), Inches(1.5))
    for r, row in enumerate([["Region", "Sales"], ["North", "120"], ["South", "80"]]):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def test_pptx_slides_are_pages_with_titles_tables_and_notes(extract):
    result = extract(presentation(), "deck.pptx")
    assert (result.format, result.page_count, result.extractable) == ("pptx", 2, True)
    assert result.text.startswith("[Page 1]\n\n## Quarterly results\n\nRevenue grew\nCosts fell")
    assert "Notes: Mention the new office." in result.text
    assert (
        "[Page 2]\n\n## Slide 2\n\nRegional split\n\n| Region | Sales |\n| --- | --- |\n| North | 120 |" in result.text
    )
    assert sections_and_pages(result) == [("Quarterly results", 1), ("Slide 2", 2)]


# --- Workbooks ---------------------------------------------------------------------------


def workbook() -> bytes:
    buffer = io.BytesIO()
    book = xlsxwriter.Workbook(buffer, {"in_memory": True})
    costs = book.add_worksheet("Costs")
    costs.write_row(2, 1, ["Item", "Price", "Comment"])  # starts at B3: empty lead rows and column
    costs.write_row(3, 1, ["Paper", 2.5, "a | b"])
    costs.write_row(4, 1, ["Ink", 10])
    costs.write(6, 1, "Total")  # after an empty row
    costs.write_formula(6, 2, "=C4+C5", None, 12.5)  # Excel stores the value next to the formula
    costs.write(9, 9, None)
    book.add_worksheet("Empty")
    staff = book.add_worksheet("Staff")
    staff.write_row(0, 0, ["Name", "Start"])
    staff.write_row(1, 0, ["Ada", "line one\nline two"])
    book.close()
    return buffer.getvalue()


def test_xlsx_each_sheet_is_a_table_with_formula_values(extract):
    result = extract(workbook(), "budget.xlsx")
    assert (result.format, result.extractable) == ("xlsx", True)
    assert result.text == (
        "[Sheet: Costs]\n\n## Sheet: Costs\n\n"
        "| Item | Price | Comment |\n| --- | --- | --- |\n| Paper | 2.5 | a \\| b |\n| Ink | 10 |  |\n| Total | 12.5 |  |"
        "\n\n[Sheet: Staff]\n\n## Sheet: Staff\n\n"
        "| Name | Start |\n| --- | --- |\n| Ada | line one<br>line two |"
    )
    assert "C4" not in result.text  # the value, never the formula
    chunks = split_structural(result.text)
    assert [c.section for c in chunks] == ["Sheet: Costs", "Sheet: Staff"]
    assert chunks[0].content.startswith("## Sheet: Costs\n\n| Item | Price | Comment |")


def test_xls_sheets_through_xlrd(extract):
    book = xlwt.Workbook()
    sheet = book.add_sheet("Legacy")
    for r, row in enumerate([["Code", "Amount"], ["X1", 3], ["X2", 4.25]]):
        for c, value in enumerate(row):
            sheet.write(r, c, value)
    sheet.write(3, 0, "Sum")
    sheet.write(3, 1, xlwt.Formula("B2+B3"))
    buffer = io.BytesIO()
    book.save(buffer)
    result = extract(buffer.getvalue(), "old.xls", "application/vnd.ms-excel")
    assert result.format == "xls"
    assert result.text.startswith(
        "[Sheet: Legacy]\n\n## Sheet: Legacy\n\n| Code | Amount |\n| --- | --- |\n| X1 | 3 |\n| X2 | 4.25 |"
    )
    assert split_structural(result.text)[0].section == "Sheet: Legacy"


def _record(record_id: int, data: bytes = b"") -> bytes:
    """One BIFF12 record: its id's little-endian bytes, a 7-bit varint length, the data."""
    head = bytearray()
    while True:
        head.append(record_id & 0xFF)
        record_id >>= 8
        if not record_id:
            break
    size = len(data)
    while True:
        head.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            break
    return bytes(head) + data


def _wide(text: str) -> bytes:
    return struct.pack("<I", len(text)) + text.encode("utf-16-le")


def xlsb_workbook() -> bytes:
    """A minimal XLSB (no Python library writes them), in the records pyxlsb reads: one sheet,
    a string header row and a row with a number and a formula's cached value."""
    sheet_record, sheets_end, dimension, sheet_data, sheet_data_end = 0x019C, 0x0190, 0x0194, 0x0191, 0x0192
    row, float_cell, string_cell, formula_float, sst, si, sst_end = (
        0x0000,
        0x0005,
        0x0007,
        0x0009,
        0x019F,
        0x0013,
        0x01A0,
    )

    def cell(record_id: int, column: int, value: bytes) -> bytes:
        return _record(record_id, struct.pack("<II", column, 0) + value)

    workbook_bin = _record(sheet_record, struct.pack("<II", 0, 1) + _wide("rId1") + _wide("Ledger")) + _record(
        sheets_end
    )
    sheet_bin = (
        _record(dimension, struct.pack("<IIII", 0, 1, 0, 1))
        + _record(sheet_data)
        + _record(row, struct.pack("<I", 0))
        + cell(string_cell, 0, struct.pack("<I", 0))
        + cell(string_cell, 1, struct.pack("<I", 1))
        + _record(row, struct.pack("<I", 1))
        + cell(float_cell, 0, struct.pack("<d", 7.5))
        + cell(formula_float, 1, struct.pack("<d", 15.0))
        + _record(sheet_data_end)
    )
    strings = [_record(si, b"\x00" + _wide(text)) for text in ("Amount", "Doubled")]
    shared_bin = _record(sst, struct.pack("<II", 2, 2)) + b"".join(strings) + _record(sst_end)
    rels = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Target="worksheets/sheet1.bin"/></Relationships>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/workbook.bin", workbook_bin)
        archive.writestr("xl/_rels/workbook.bin.rels", rels)
        archive.writestr("xl/worksheets/sheet1.bin", sheet_bin)
        archive.writestr("xl/sharedStrings.bin", shared_bin)
    return buffer.getvalue()


def test_xlsb_sheets_through_pyxlsb(extract):
    result = extract(xlsb_workbook(), "ledger.xlsb")
    assert (result.format, result.extractable) == ("xlsb", True)
    assert result.text == "[Sheet: Ledger]\n\n## Sheet: Ledger\n\n| Amount | Doubled |\n| --- | --- |\n| 7.5 | 15 |"
    assert split_structural(result.text)[0].section == "Sheet: Ledger"


def test_large_sheet_is_cut_at_the_row_limit():
    from knowledge_ingest.domain.extraction import ExtractionLimits

    buffer = io.BytesIO()
    book = xlsxwriter.Workbook(buffer, {"in_memory": True})
    sheet = book.add_worksheet("Big")
    for r in range(50):
        sheet.write_row(r, 0, [f"r{r}", r])
    book.close()
    extractor = DocumentExtractor(ExtractionLimits(max_rows_per_sheet=10), use_unstructured=False)
    result = extractor.extract(buffer.getvalue(), "big.xlsx", "")
    assert "| r9 | 9 |" in result.text and "r10" not in result.text
    assert result.warnings == ("a sheet was cut at 10 rows",)


def openpyxl_report() -> bytes:
    """A workbook as a program writes it (openpyxl stores formulas without cached values)."""
    import datetime as dt

    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Budget"
    sheet.append(["Item", "Amount", "Due"])
    sheet.append(["Paper", 2, dt.date(2024, 1, 2)])
    sheet.append(["Ink", 3.5, "=C2+30"])
    sheet["C3"].number_format = "yyyy-mm-dd"
    sheet.append(["Total", "=SUM(B2:B3)", None])
    sheet.append(["Share", "=B2/B4", None])
    sheet.append(["Elsewhere", "=Rates!A1*2", "=NOSUCHFUNCTION(1)"])
    sheet.append(["Summary", "='Q1 data'!B3+Later!A1", "=[other.xlsx]Data!A1"])
    sheet.append(["Broken", "=B2/0", None])
    sheet.append(["Region", "Q1", None])
    sheet.merge_cells("A9:A10")
    sheet["A9"], sheet["B9"], sheet["B10"] = "North", 10, 12
    quarter = book.create_sheet("Q1 data")
    quarter.append(["Month", "Sales"])
    quarter.append(["Jan", 40])
    quarter.append(["Feb", "=B2*2"])  # itself a formula without a cached value
    book.create_sheet("Later").append([7])  # a sheet after the one that refers to it
    wide = book.create_sheet("Wide")
    wide.append(["Name", *[f"m{i}" for i in range(1, 26)]])
    wide.append(["Ada", *range(1, 26)])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def test_xlsx_formulas_without_cached_values_are_evaluated_else_shown(extract):
    result = extract(openpyxl_report(), "report.xlsx")
    rows = result.text.split("\n")
    assert "| Total | 5.5 |  |" in rows  # =SUM(B2:B3), computed: openpyxl stored no value
    assert "| Ink | 3.5 | 2024-02-01 |" in rows  # a date formula keeps its date format
    assert any(row.startswith("| Share | 0.36363636") for row in rows)  # depends on another formula
    assert "| Broken | #DIV/0! |  |" in rows  # what Excel shows
    # Other sheets of the workbook are read (before and after this one, formulas there too).
    assert "| Summary | 87 | =[other.xlsx]Data!A1 |" in rows
    assert "| Feb | 80 |" in rows
    # A missing sheet, another workbook and an unknown function: the formula, never empty.
    assert "| Elsewhere | =Rates!A1*2 | =NOSUCHFUNCTION(1) |" in rows
    assert "3 formulas could not be evaluated and show their text" in result.warnings
    assert "| North | 10 |  |" in rows and "| North | 12 |  |" in rows  # a merged cell in each row


def test_sheet_name_is_a_heading_in_the_text_and_the_chunk_it_starts(extract):
    result = extract(openpyxl_report(), "report.xlsx")
    assert "[Sheet: Budget]\n\n## Sheet: Budget\n\n| Item | Amount | Due |" in result.text
    chunks = split_structural(result.text, max_chars=400)
    budget = [c for c in chunks if c.section == "Sheet: Budget"]
    assert budget[0].content.startswith("## Sheet: Budget\n\n| Item | Amount | Due |")
    assert all(c.content.count("| Item | Amount | Due |") == 1 for c in budget)  # split: header repeated


def test_wide_sheet_is_split_into_column_groups_repeating_the_key_column(extract):
    result = extract(openpyxl_report(), "report.xlsx")
    wide = result.text.split("## Sheet: Wide", 1)[1]
    tables = [block for block in wide.split("\n\n") if block.startswith("|")]
    assert len(tables) == 3  # 26 columns: the key and 11, 11 and 3 more
    assert [t.split("\n")[0].split(" | ")[0] for t in tables] == ["| Name"] * 3
    assert all(t.split("\n")[2].startswith("| Ada | ") for t in tables)
    assert "Columns 2–12 of 26 (with column 1)" in wide and "| m25 |" in tables[2]
    assert max(t.split("\n")[0].count("|") for t in tables) <= 13


# --- Text --------------------------------------------------------------------------------


def test_text_is_utf8_with_invalid_bytes_replaced_and_nul_dropped(extract):
    result = extract("# Notes\n\ncaf\u00e9 ".encode() + b"\xff ok\x00 done\r\n", "notes.md", "text/markdown")
    assert result.format == "text"
    assert result.text == "# Notes\n\ncaf\u00e9 \ufffd ok done"
    assert split_structural(result.text)[0].section == "Notes"


def test_windows_1252_text_is_read_as_such_with_a_warning(extract):
    result = extract("Caf\u00e9 cr\u00e8me \u2013 10\u20ac, r\u00e9union \u00e0 Paris".encode("cp1252"), "export.csv")
    assert result.text == "Caf\u00e9 cr\u00e8me \u2013 10\u20ac, r\u00e9union \u00e0 Paris"
    assert result.warnings == ("the text is not UTF-8; it was read as Windows-1252",)


def test_text_that_starts_with_a_page_marker_is_still_text(extract):
    result = extract(b"[Page 1]\nMinutes of the meeting.", "minutes.txt")
    assert result.extractable and split_structural(result.text)[0].page == 1


def test_utf16_text_with_a_bom_is_decoded(extract):
    result = extract("hello w\u00f6rld".encode("utf-16"), "w.txt")  # the codec writes the BOM
    assert result.text == "hello w\u00f6rld"


def test_a_path_reads_the_same_as_bytes(extract, tmp_path):
    path = tmp_path / "deck.bin"  # the name says nothing: the bytes decide
    path.write_bytes(presentation())
    result = DocumentExtractor(use_unstructured=False).extract(path, "deck.bin", "application/octet-stream")
    assert result.format == "pptx"
    assert result == extract(presentation(), "deck.pptx")


def test_the_name_does_not_decide_the_format(extract):
    assert extract(pdf_with_font_headings(), "notes.txt", "text/plain").format == "pdf"
    quoting = extract(b"A note that quotes a header: %PDF-1.7 and goes on.", "note.txt")
    assert quoting.format == "text"  # "%PDF-" past the start counts only for a file that claims to be a PDF
    assert extract(b"\r\n" + pdf_with_font_headings(), "late-header.pdf").format == "pdf"
    result = extract(b"just words, named like a PDF", "fake.pdf", "application/pdf")
    assert (result.format, result.text) == ("text", "just words, named like a PDF")


# --- Web pages ---------------------------------------------------------------------------


@pytest.mark.parametrize(("filename", "mime_type"), [("page.html", "text/html"), ("page", ""), ("index.htm", "")])
def test_html_is_structured_text_without_boilerplate(extract, filename, mime_type):
    result = extract(WEB_PAGE.encode(), filename, mime_type)
    assert result.format == "html" and result.extractor == "trafilatura"
    text = result.text
    assert text.startswith("# Pump maintenance guide\n\nZanzibar pump stations")
    assert "## Replacement rules" in text and "### Costs" in text
    assert "- Check the seals monthly.\n- Archive the pressure logs for seven years." in text
    assert "| Part | Price |\n|---|---|\n| Valve | 120 |\n| Seal | 8 |" in text
    for boilerplate in ("About us", "Contact sales", "do not index me", "color: red", "Cookie settings"):
        assert boilerplate not in text
    assert "\\[Page 7\\]" in text  # body text that looks like a marker is escaped, never a page
    chunks = split_structural(text)
    assert [c.section for c in chunks] == ["Pump maintenance guide", "Replacement rules", "Costs"]
    assert all(c.page is None for c in chunks)


def test_html_without_main_content_keeps_its_visible_text(extract):
    result = extract(b"<html><body><div>Opening hours: nine to four.</div></body></html>", "hours.html")
    assert result.format == "html" and "Opening hours: nine to four." in result.text
