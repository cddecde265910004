"""Files of the formats read besides PDF and Office's own, made on the fly with the real libraries:
images drawn with Pillow in DejaVu (installed with Tesseract's fonts), emails composed with the
standard library, OpenDocument files written by odfpy, Office 97-2003 files saved by LibreOffice,
and their hostile cousins."""

from __future__ import annotations

import email
import email.policy
import functools
import io
import struct
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

FONT = "DejaVuSans.ttf"
PUMPS = "Zanzibar pump stations are inspected every quarter."
VALVES = "Valves older than twelve years are replaced in autumn."
RESERVOIR = "The northern reservoir opens on weekdays."
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def text_image(lines: list[str], *, mode: str = "RGB", size: int = 36, width: int = 1600) -> Image.Image:
    """Black text on white (or on transparency for RGBA), one line per entry."""
    font = ImageFont.truetype(FONT, size)
    background = (0, 0, 0, 0) if mode == "RGBA" else "white"
    image = Image.new(mode, (width, 120 + len(lines) * size * 2), background)
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((60, 60 + index * size * 2), line, font=font, fill="black")
    return image


def image_file(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def sideways_jpeg(lines: list[str]) -> bytes:
    """A photo taken sideways: the pixels turned a quarter, the EXIF orientation (6: turn 90°
    clockwise to show) saying how to put it upright."""
    exif = Image.Exif()
    exif[0x0112] = 6
    return image_file(text_image(lines).rotate(90, expand=True), "JPEG", exif=exif, quality=90)


def png_bomb(width: int = 60_000, height: int = 60_000) -> bytes:
    """A decompression bomb: a 1-bit PNG of ``width`` x ``height`` white pixels (3.6 gigapixels:
    3.6 GB decoded to grey) in about 440 KB, its rows deflated as they are made."""
    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    deflate = zlib.compressobj(9)
    block = row * 1000
    data = bytearray()
    for _ in range(height // 1000):
        data += deflate.compress(block)
    data += deflate.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", bytes(data)) + _png_chunk(b"IEND", b"")
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def multi_page_tiff(pages: list[Image.Image], blank_pages: int = 0) -> bytes:
    """A TIFF of ``pages`` (each stored as uncompressed grey), then ``blank_pages`` white 64x64
    pages that all share one strip: 10,000 pages in about 1.4 MB, written directly (Pillow takes a
    minute to save as many)."""
    grey = [page.convert("L") for page in pages]
    blank = Image.new("L", (64, 64), 255)
    strips: list[bytes] = [page.tobytes() for page in grey] + [blank.tobytes()]
    out = bytearray(b"II*\x00\x00\x00\x00\x00")
    offsets = []
    for strip in strips:
        offsets.append(len(out))
        out += strip
    sizes = [page.size for page in grey] + [blank.size] * blank_pages
    strip_of = list(range(len(grey))) + [len(grey)] * blank_pages
    entry_count = 9
    ifd_size = 2 + entry_count * 12 + 4
    first_ifd = len(out) + (len(out) % 2)
    out += b"\x00" * (first_ifd - len(out))
    struct.pack_into("<I", out, 4, first_ifd)
    for index, ((width, height), strip) in enumerate(zip(sizes, strip_of, strict=True)):
        at = first_ifd + index * ifd_size
        following = at + ifd_size if index + 1 < len(sizes) else 0
        entries = [
            (256, 4, width),  # ImageWidth
            (257, 4, height),  # ImageLength
            (258, 3, 8),  # BitsPerSample
            (259, 3, 1),  # Compression: none
            (262, 3, 1),  # PhotometricInterpretation: black is zero
            (273, 4, offsets[strip]),  # StripOffsets
            (277, 3, 1),  # SamplesPerPixel
            (278, 4, height),  # RowsPerStrip
            (279, 4, len(strips[strip])),  # StripByteCounts
        ]
        out += struct.pack("<H", len(entries))
        for tag, kind, value in entries:
            out += (
                struct.pack("<HHII", tag, kind, 1, value)
                if kind == 4
                else struct.pack("<HHIHH", tag, kind, 1, value, 0)
            )
        out += struct.pack("<I", following)
    return bytes(out)


# --- email ---------------------------------------------------------------------------------


def an_email(
    body: str = f"Hello team,\n\n{RESERVOIR}\n",
    *,
    html: str | None = None,
    plain: bool = True,
    attachments: Sequence[tuple[str, str, bytes]] = (),
    subject: str = "Pump inspection =?utf-8?q?r=C3=A9sum=C3=A9?=",
) -> bytes:
    """A MIME message as a mail client writes it: headers (an encoded word in the subject), a
    text/plain body and/or a text/html one, then attachments (name, media type, bytes)."""
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = "Amira Okafor <amira@example.org>"
    message["To"] = "Operations <ops@example.org>, Bo Lind <bo@example.org>"
    message["Cc"] = "Audit <audit@example.org>"
    message["Date"] = "Tue, 01 Dec 2026 10:00:00 +0000"
    message["Message-ID"] = "<inspection-1@example.org>"
    if plain:
        message.set_content(body)
        if html is not None:
            message.add_alternative(html, subtype="html")
    elif html is not None:
        message.set_content(html, subtype="html")
    for name, media_type, data in attachments:
        if media_type == "message/rfc822":  # a forwarded message travels as a message, not bytes
            message.add_attachment(email.message_from_bytes(data, policy=email.policy.default), filename=name)
            continue
        maintype, subtype = media_type.split("/", 1)
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message.as_bytes()


# --- OpenDocument (odfpy writes them as LibreOffice reads them) ----------------------------------


def _odf_bytes(document: Any) -> bytes:
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def _odf_table(name: str, rows: list[list[str]], *, repeat_last_row: int = 1) -> Any:
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import P

    table = Table(name=name)
    table.addElement(TableColumn(numbercolumnsrepeated=max(len(r) for r in rows)))
    for index, cells in enumerate(rows):
        repeated = repeat_last_row if index == len(rows) - 1 else 1
        row = TableRow(numberrowsrepeated=repeated) if repeated > 1 else TableRow()
        for value in cells:
            cell = TableCell()
            cell.addElement(P(text=value))
            row.addElement(cell)
        # ODF marks a row's empty rest as one cell repeated to the sheet's last column
        row.addElement(TableCell(numbercolumnsrepeated=16_000))
        table.addElement(row)
    return table


def an_odt() -> bytes:
    """A text: a title and headings by outline level, paragraphs, a list, a table, and text that
    looks like a marker."""
    from odf.opendocument import OpenDocumentText
    from odf.text import H, List, ListItem, P

    document = OpenDocumentText()
    body = document.text
    body.addElement(H(outlinelevel=1, text="Employee handbook"))
    body.addElement(P(text="Welcome to the company."))
    body.addElement(H(outlinelevel=2, text="Leave"))
    body.addElement(P(text="Leave rules follow."))
    items = List()
    for text in ("Ask your manager", "Record it in the register"):
        item = ListItem()
        item.addElement(P(text=text))
        items.addElement(item)
    body.addElement(items)
    body.addElement(H(outlinelevel=2, text="Allowances"))
    body.addElement(_odf_table("Allowances", [["Grade", "Days"], ["A", "25"], ["B", "30"]]))
    body.addElement(P(text="# not a heading, just text"))
    return _odf_bytes(document)


def an_odp() -> bytes:
    """Two slides: a titled one with a text frame, a table and notes; one without a title."""
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    document = OpenDocumentPresentation()
    layout = PageLayout(name="layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="master", pagelayoutname=layout)
    document.masterstyles.addElement(master)

    def frame(text: str, y: str, cls: str | None = None) -> Any:
        box = Frame(width="20cm", height="3cm", x="1cm", y=y)
        if cls:
            box.setAttrNS(PRESENTATIONNS, "class", cls)
        text_box = TextBox()
        for line in text.split("\n"):
            text_box.addElement(P(text=line))
        box.addElement(text_box)
        return box

    first = Page(masterpagename=master)
    first.addElement(frame("Quarterly pumps review", "1cm", "title"))
    first.addElement(frame(PUMPS, "5cm"))
    table_frame = Frame(width="20cm", height="5cm", x="1cm", y="9cm")
    table_frame.addElement(_odf_table("Costs", [["Part", "Price"], ["Valve", "120"]]))
    first.addElement(table_frame)
    notes = Notes()
    notes.addElement(frame("Mention the autumn window.", "1cm"))
    first.addElement(notes)
    document.presentation.addElement(first)
    second = Page(masterpagename=master)
    second.addElement(frame(VALVES, "5cm"))
    document.presentation.addElement(second)
    return _odf_bytes(document)


def an_ods(repeated_rows: int = 1) -> bytes:
    """Two sheets; the last row of the first repeated ``repeated_rows`` times."""
    from odf.opendocument import OpenDocumentSpreadsheet

    document = OpenDocumentSpreadsheet()
    document.spreadsheet.addElement(
        _odf_table(
            "Regions",
            [["Region", "Revenue"], ["Zanzibar", "4,250"], ["Tasmania", "1,075"]],
            repeat_last_row=repeated_rows,
        )
    )
    document.spreadsheet.addElement(_odf_table("Staff", [["Name", "Role"], ["Amira Okafor", "Engineer"]]))
    return _odf_bytes(document)


def zip_bomb_odt() -> bytes:
    """An ODT with 48 MiB of zeros in one picture entry: past the ratio the archive check allows."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(an_odt())) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            bomb.writestr(item, source.read(item))
        bomb.writestr("Pictures/image1.png", bytes(48 * 1024 * 1024))
    return buffer.getvalue()


# --- RTF -------------------------------------------------------------------------------------

# As WordPad and Word write it: a font and colour table, a style sheet, a picture (hex), a table
# of \cell and \row, an accented letter by code page and one by \u.
AN_RTF = rb"""{\rtf1\ansi\ansicpg1252\deff0\nouicompat{\fonttbl{\f0\fnil\fcharset0 Calibri;}{\f1\fswiss Arial;}}
{\colortbl ;\red0\green0\blue255;}
{\stylesheet{\s0 Normal;}{\s1\b\fs32 heading 1;}{\s2\b\fs26\sbasedon0 heading 2;}}
{\*\generator Riched20 10.0.19041}\viewkind4\uc1
\pard\s1\b\f1\fs32 Pump maintenance\b0\fs22\par
\pard\f0 Zanzibar pump stations are inspected every quarter by a certified technician.\par
{\pict\pngblip\picw10\pich10 89504e470d0a1a0a0000000d49484452}\par
\pard\s2\b\fs26 Costs\b0\fs22\par
\trowd\trgaph108\cellx3000\cellx6000
\intbl Part\cell Price\cell\row
\trowd\trgaph108\cellx3000\cellx6000
\intbl Valve\cell 120\cell\row
\trowd\trgaph108\cellx3000\cellx6000
\intbl Seal\cell 8\cell\row
\pard Ask the caf\'e9 desk or the \u8364? office.\par
}
"""


# --- Office 97-2003 (LibreOffice converts the OOXML files to them, as Office saves them) -------


def a_pptx() -> bytes:
    """Two slides: a title, a text box and a table with speaker notes; then a second titled slide."""
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    first.shapes.title.text = "Quarterly pumps review"
    first.shapes.add_textbox(Inches(1), Inches(1.6), Inches(8), Inches(1)).text_frame.text = PUMPS
    table = first.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(6), Inches(1)).table
    for r, row in enumerate([["Part", "Price"], ["Valve", "120"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    first.notes_slide.notes_text_frame.text = "Mention the autumn window."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Replacement rules"
    second.shapes.add_textbox(Inches(1), Inches(1.6), Inches(8), Inches(1)).text_frame.text = VALVES
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


@functools.cache
def converted_by_libreoffice(data: bytes, source: str, target: str) -> bytes:
    """``data`` (a ``source`` file) saved as ``target`` by headless LibreOffice, as Office would
    save it: the test fixtures of the 97-2003 formats."""
    with tempfile.TemporaryDirectory(prefix="formats-fixture-") as work:
        root = Path(work)
        (root / f"file.{source}").write_bytes(data)
        subprocess.run(
            [
                "soffice",
                "--headless",
                f"-env:UserInstallation={(root / 'profile').as_uri()}",
                "--convert-to",
                target,
                "--outdir",
                str(root),
                str(root / f"file.{source}"),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return (root / f"file.{target}").read_bytes()
