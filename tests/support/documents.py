"""Documents the extraction and ingest tests build: real PDF and Word files made on the fly."""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib

import docx
import pypdfium2 as pdfium
from fpdf import FPDF
from PIL import Image

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


def drawn_pdf(content: bytes) -> bytes:
    """A one-page PDF whose content stream is ``content`` as given (Helvetica is ``/F1``): for
    text set in ways fpdf2 does not write (sizes set by the text matrix, kerned pieces)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
            b" /Resources << /Font << /F1 5 0 R >> >> >>"
        ),
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + (
        b"xref\n0 %d\n0000000000 65535 f \n%s" % (len(objects) + 1, table)
        + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, len(out))
    )


def a_docx(text: str = f"{SECRET} handbook") -> bytes:
    document = docx.Document()
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def zip_bomb_docx() -> bytes:
    """A DOCX with 48 MiB of zeros in one entry: past the ratio the directory check allows."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(a_docx()), "r") as source,
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb,
    ):
        for item in source.infolist():
            bomb.writestr(item, source.read(item))
        bomb.writestr("word/media/image1.png", bytes(48 * 1024 * 1024))
    return buffer.getvalue()


def a_docx_lying_about_its_size(padding: int = 256 * 1024 * 1024) -> bytes:
    """A zip bomb the directory check passes: word/document.xml inflates to its XML followed by
    ``padding`` spaces (about 1 KB deflated per MiB), while its local header and central directory
    declare the XML's size and CRC alone. Python's zip reader inflates it all, then keeps the
    declared bytes: the document reads as a valid DOCX."""
    part = "word/document.xml"
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(a_docx())) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            data = source.read(item)
            if item.filename != part:
                bomb.writestr(item, data)
                continue
            xml = data
            with bomb.open(part, "w") as member:  # streamed: the padding is never whole in memory
                member.write(xml)
                spaces = b" " * (1024 * 1024)
                for _ in range(padding // len(spaces)):
                    member.write(spaces)
    raw = bytearray(buffer.getvalue())
    name = part.encode()
    for signature, fixed, crc_at, size_at in ((b"PK\x03\x04", 30, 14, 22), (b"PK\x01\x02", 46, 16, 24)):
        at = raw.find(signature)
        while at >= 0:
            if raw[at + fixed : at + fixed + len(name)] == name:
                struct.pack_into("<I", raw, at + crc_at, zlib.crc32(xml))
                struct.pack_into("<I", raw, at + size_at, len(xml))
            at = raw.find(signature, at + 4)
    return bytes(raw)


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


# --- scans (image-only PDF pages) and a web page -------------------------------------------

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
        image = (
            page if isinstance(page, Image.Image) else rendered[index].render(scale=200 / 72, grayscale=True).to_pil()
        )
        document.image(image, x=0, y=0, w=A4[0], h=A4[1])
    return bytes(document.output())


def noise_page() -> Image.Image:
    """A photograph-like page of grey noise: something to render, nothing to read."""
    rng = random.Random(7)
    image = Image.new("L", (400, 560))
    image.putdata([rng.randrange(90, 170) for _ in range(400 * 560)])
    return image


WEB_PAGE = """<!doctype html><html><head><title>Pump maintenance</title>
<script>var tracking = "do not index me";</script><style>p { color: red }</style></head>
<body><nav><a href="/">Home</a> | <a href="/about">About us</a> | <a href="/contact">Contact sales</a></nav>
<main><article><h1>Pump maintenance guide</h1>
<p>Zanzibar pump stations are inspected every quarter by a certified technician. The inspection
covers valves, seals and the pressure logs kept on site.</p>
<h2>Replacement rules</h2>
<p>Valves older than twelve years are replaced during the autumn maintenance window.</p>
<ul><li>Check the seals monthly.</li><li>Archive the pressure logs for seven years.</li></ul>
<h3>Costs</h3>
<table><tr><th>Part</th><th>Price</th></tr><tr><td>Valve</td><td>120</td></tr><tr><td>Seal</td><td>8</td></tr></table>
<p>[Page 7]</p>
<p>Questions go to the operations desk at extension 4471, open on weekdays.</p>
</article></main>
<footer><p>Copyright 2026 Example Water Ltd. All rights reserved. Cookie settings.</p></footer></body></html>"""
