"""Ruled tables in PDFs arrive as markdown tables in reading position, their words written once;
the PDFs are written here with fpdf2 (tables it draws with rules) and pypdf (turned pages)."""

from __future__ import annotations

import io

import pytest
from fpdf import FPDF
from knowledge_ingest.domain.extraction import Extracted
from knowledge_ingest.extraction import DocumentExtractor, pdf, pdf_tables
from knowledge_runtime.chunking import split_structural
from pypdf import PdfReader, PdfWriter, Transformation
from pypdf.generic import RectangleObject

from tests.support.documents import LINE, regions_report


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)

    def run(data: bytes, filename: str = "report.pdf") -> Extracted:
        return extractor.extract(data, filename, "application/pdf")

    return run


def test_a_ruled_table_is_a_markdown_table_in_its_place(extract):
    result = extract(regions_report())
    assert result.warnings == () and result.page_count == 2
    text = result.text
    assert "| Region | Revenue | Owner |\n| --- | --- | --- |\n" in text
    assert "| Zanzibar | 4,250 | Amira Okafor |" in text  # each cell in its column, the number whole
    # a wrapped cell is one cell, its lines joined
    assert "| Tasmania | 1,075 | Bo with a name long enough to wrap onto a second line inside its cell |" in text
    page_two = text[text.index("[Page 2]") :]
    assert (
        page_two.index("# Revenue by region")
        < page_two.index("Opening words")
        < page_two.index("| Region |")
        < page_two.index("Closing words")
    )


def test_a_tables_words_are_not_also_plain_lines(extract):
    text = extract(regions_report()).text
    for word in ("Zanzibar", "4,250", "Amira", "Tasmania", "Revenue |", "second line"):
        assert text.count(word) == 1, word
    table_lines = [line for line in text.splitlines() if "Zanzibar" in line or "Tasmania" in line]
    assert all(line.startswith("| ") for line in table_lines)


def test_the_table_travels_with_its_section_and_page(extract):
    chunks = split_structural(extract(regions_report()).text)
    holding = [c for c in chunks if "| Zanzibar | 4,250 |" in c.content]
    assert len(holding) == 1
    assert (holding[0].section, holding[0].page) == ("Revenue by region", 2)
    assert "| Region | Revenue | Owner |" in holding[0].content


def test_a_grid_drawn_with_lines_is_a_table_too(extract):
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    pdf.text(20, 20, "Before the grid")
    columns, rows = [20, 70, 120], [30, 40, 50]
    for x in columns:
        pdf.line(x, rows[0], x, rows[-1])
    for y in rows:
        pdf.line(columns[0], y, columns[-1], y)
    for r, cells in enumerate([["Sensor", "Reading"], ["Kiln 7", "1,310"]]):
        for c, cell in enumerate(cells):
            pdf.text(columns[c] + 2, rows[r] + 7, cell)
    pdf.text(20, 65, "After the grid")
    text = extract(bytes(pdf.output())).text
    assert "| Sensor | Reading |\n| --- | --- |\n| Kiln 7 | 1,310 |" in text
    assert text.index("Before the grid") < text.index("| Sensor |") < text.index("After the grid")
    assert text.count("Kiln 7") == 1


def test_merged_and_empty_cells_do_not_fail_the_extraction(extract):
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=10)
    with pdf.table() as table:
        header = table.row()
        header.cell("Quarter")
        header.cell("Sales (both halves)", colspan=2)
        for cells in (["Q1", "", "Hollowmere"], ["", "", ""], ["Q2", "7,700", ""]):
            row = table.row()
            for cell in cells:
                row.cell(cell)
        spanning = table.row()
        spanning.cell("Year total across every column", colspan=3)
    pdf.multi_cell(0, 6, "Text after the odd table.", **LINE)
    result = extract(bytes(pdf.output()))
    assert result.warnings == () and result.extractable
    text = result.text
    assert "| Quarter | Sales (both halves) |" in text
    assert "| Q1 |  | Hollowmere |" in text and "| Q2 | 7,700 |" in text
    assert "| Year total across every column |" in text
    assert text.count("Hollowmere") == 1 and text.index("| Quarter |") < text.index("Text after the odd table.")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 5  # header, separator, Q1, Q2, the spanning row: the all-empty row is dropped


def test_framed_notes_are_not_tables(extract):
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for left, word in ((10, "Left"), (110, "Right")):  # boxes with a title bar: ruled, two rows, one column
        pdf.rect(left, 10, 90, 30)
        pdf.line(left, 20, left + 90, 20)
        pdf.text(left + 2, 17, f"{word} note")
        pdf.text(left + 2, 30, f"{word} framed text")
    pdf.rect(10, 50, 150, 20)
    pdf.text(12, 60, "A lone box")
    text = extract(bytes(pdf.output())).text
    assert "|" not in text
    assert text.index("Left note") < text.index("Left framed text") < text.index("A lone box")
    assert text.count("Right framed text") == 1


@pytest.mark.parametrize("turn", [0, 90, 180, 270])
def test_a_table_on_a_turned_or_shifted_page_is_found_where_it_shows(extract, turn):
    source = PdfReader(io.BytesIO(regions_report()))
    writer = PdfWriter()
    page = writer.add_page(source.pages[1])
    width, height = float(page.mediabox.width), float(page.mediabox.height)
    # the content turned against /Rotate, exactly (no rounding), so the page shows upright; and
    # the media box moved off the origin, with the content moved along
    a, b, c, d, e, f = {
        0: (1, 0, 0, 1, 0, 0),
        90: (0, 1, -1, 0, height, 0),
        180: (-1, 0, 0, -1, width, height),
        270: (0, -1, 1, 0, 0, width),
    }[turn]
    dx, dy = 37.0, -55.0
    page.add_transformation(Transformation((a, b, c, d, e + dx, f + dy)))
    box_width, box_height = (height, width) if turn in (90, 270) else (width, height)
    page.mediabox = RectangleObject((dx, dy, dx + box_width, dy + box_height))
    if turn:
        page.rotate(turn)
    buffer = io.BytesIO()
    writer.write(buffer)
    text = extract(buffer.getvalue()).text
    assert "| Zanzibar | 4,250 | Amira Okafor |" in text and text.count("Zanzibar") == 1
    assert text.index("Opening words") < text.index("| Region |") < text.index("Closing words")


def test_pages_whose_rules_make_no_table_are_not_read_twice(extract, monkeypatch):
    opened = []
    real_open = pdf_tables.pdfplumber.open
    monkeypatch.setattr(
        pdf_tables.pdfplumber, "open", lambda *a, **k: opened.append(k.get("pages")) or real_open(*a, **k)
    )
    extract(regions_report())
    assert opened == [[2]]  # page 1's rules could not make a table


def test_a_file_pdfminer_cannot_open_keeps_its_lines(extract, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise ValueError("unreadable")

    monkeypatch.setattr(pdf_tables.pdfplumber, "open", refuse)
    result = extract(regions_report())
    assert "Zanzibar 4,250 Amira Okafor" in result.text and "| Zanzibar |" not in result.text
    assert result.warnings == ("tables could not be read; they are written as lines of text",)


def test_a_table_whose_words_pypdf_did_not_read_goes_where_its_top_is():
    page = pdf._Page(tables=[pdf._Table((10.0, 100.0, 300.0, 160.0), "| a | b |\n| --- | --- |\n| 1 | 2 |")])
    page.runs = [("Above the table", 10.0, 90.0), ("\n", 0.0, 0.0), ("Below the table", 10.0, 175.0)]
    lines = pdf._lines_around_tables(page)
    assert lines == ["Above the table", page.tables[0], "Below the table"]


def two_page_table(*, repeat_header: bool, caption_between: bool = False) -> bytes:
    """A ruled table of 45 rows that fpdf2 breaks over two pages, its header repeated on the
    second page or not; optionally a heading-like caption starts the second page instead."""
    from fpdf.enums import TableHeadingsDisplay

    document = FPDF()
    document.set_font("helvetica", size=11)
    document.add_page()
    document.cell(text="Inventory report", **LINE)
    document.ln(6)
    headings = TableHeadingsDisplay.ON_TOP_OF_EVERY_PAGE if repeat_header else TableHeadingsDisplay.NONE
    rows = [["Part", "Count", "Bin"]] + [[f"part-{i}", str(i * 3), f"B{i % 7}"] for i in range(1, 46)]
    if caption_between:
        with document.table(repeat_headings=headings) as table:
            for cells in rows[:25]:
                row = table.row()
                for text in cells:
                    row.cell(text)
        document.add_page()
        document.cell(text="Table 2: spare parts", **LINE)
        rows = [rows[0], *rows[25:]]
    with document.table(repeat_headings=headings) as table:
        for cells in rows:
            row = table.row()
            for text in cells:
                row.cell(text)
    document.ln(4)
    document.cell(text="End of report.", **LINE)
    return bytes(document.output())


@pytest.mark.parametrize("repeat_header", [True, False])
def test_a_table_continued_on_the_next_page_is_one_table_whose_chunks_repeat_its_header(extract, repeat_header):
    result = extract(two_page_table(repeat_header=repeat_header))
    assert result.page_count == 2
    assert result.text.count("| Part | Count | Bin |") == 1  # one table, its header once
    table = result.text.split("| Part | Count | Bin |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.split("\n") if line.startswith("| part-")]
    assert rows == [f"| part-{i} | {i * 3} | B{i % 7} |" for i in range(1, 46)]  # in order, none lost
    assert result.text.index("| part-45 |") < result.text.index("[Page 2]") < result.text.index("End of report.")
    chunks = split_structural(result.text, max_chars=400)
    parts = [c for c in chunks if "| part-" in c.content]
    assert len(parts) >= 3
    assert all("| Part | Count | Bin |\n| --- | --- | --- |" in c.content for c in parts)


def test_a_caption_between_pages_keeps_two_tables(extract):
    result = extract(two_page_table(repeat_header=True, caption_between=True))
    assert result.text.count("| Part | Count | Bin |") == 2
    assert "[Page 2]\n\nTable 2: spare parts\n\n| Part | Count | Bin |" in result.text
