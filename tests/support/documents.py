"""Documents the extraction and ingest tests build: real PDF and Word files made on the fly."""

from __future__ import annotations

import io

import docx
from fpdf import FPDF

LINE = {"new_x": "LMARGIN", "new_y": "NEXT"}
REGIONS = [
    ["Region", "Revenue", "Owner"],
    ["Zanzibar", "4,250", "Amira Okafor"],
    ["Tasmania", "1,075", "Bo with a name long enough to wrap onto a second line inside its cell"],
]


SECRET = "Zanzibar"  # document text that must never appear in an error message


def a_pdf(pages: int = 2, **encryption) -> bytes:
    pdf = FPDF()
    if encryption:
        pdf.set_encryption(**encryption)
    pdf.set_font("helvetica", size=11)
    for page in range(pages):
        pdf.add_page()
        pdf.cell(0, 6, f"{SECRET} page {page + 1}")
    return bytes(pdf.output())


def a_docx(text: str = f"{SECRET} handbook") -> bytes:
    document = docx.Document()
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def word_document() -> bytes:
    document = docx.Document()
    document.add_heading("Employee handbook", 0)  # the Title style
    document.add_paragraph("Welcome to the company.")
    document.add_heading("Leave", 1)
    document.add_paragraph("Leave rules follow.")
    document.add_paragraph("Ask your manager", style="List Bullet")
    document.add_heading("Allowances", 2)
    document.add_paragraph("Table 1: allowances by grade")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["Grade", "Days", "Note"], ["A", "25", "pipe | inside"], ["B", "30", "two\nlines"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    table.cell(2, 2).tables  # noqa: B018 - touch: nested content is read through iter_inner_content
    document.add_paragraph("# not a heading, just text")
    document.add_heading("Closing", 1)
    document.add_paragraph("The end.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def ruled_table(pdf: FPDF, rows: list[list[str]]) -> None:
    with pdf.table() as table:
        for cells in rows:
            row = table.row()
            for text in cells:
                row.cell(text)


def regions_report() -> bytes:
    """Page 1 text and rules that make no table; page 2 a heading, a paragraph, the regions
    table, a closing paragraph."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", "B", 18)
    pdf.cell(0, 10, "Overview", **LINE)
    pdf.set_font("helvetica", size=11)
    pdf.multi_cell(0, 6, "The year in brief, with no table on this page. " * 4, **LINE)
    pdf.line(10, 21, 200, 21)  # a rule under the heading, a footer rule and a logo's box: no table
    pdf.line(10, 280, 200, 280)
    pdf.rect(180, 282, 20, 10)
    pdf.add_page()
    pdf.set_font("helvetica", "B", 18)
    pdf.cell(0, 10, "Revenue by region", **LINE)
    pdf.set_font("helvetica", size=11)
    pdf.multi_cell(0, 6, "Opening words before the figures. " * 3, **LINE)
    ruled_table(pdf, REGIONS)
    pdf.multi_cell(0, 6, "Closing words after the figures.", **LINE)
    return bytes(pdf.output())
