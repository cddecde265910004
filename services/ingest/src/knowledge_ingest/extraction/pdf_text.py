"""A PDF page's text as pdfium reads it, for ``pdf.py``: its lines and each line's font size (for
headings), in C at about a millisecond and a half a page, a third of what pypdf's content-stream
interpreter costs in Python. pdfium also joins a word that a line end hyphenated.

A page whose paths draw enough horizontal and vertical rules to hold a table is left to pypdf
(``None``): the table search places pdfplumber's tables by the positions of the text pieces that
pypdf's visitor reports. The rules are counted as ``RuleCounter`` counts them for pypdf, from
pdfium's path segments; a segment list counts every side that pypdf's operators draw, or more,
so a page pypdf would find ruled is never read here.

pdfium puts a space where two glyphs stand apart. On some text layers (OCR layers whose glyphs
are placed one by one) that cuts words into pieces, "Nort h Buon a Vist a", where pypdf reads
them whole (pypdf's own sample ``indirect-rotation.pdf``); a page whose words come out as many
one-letter pieces is left to pypdf too. In prose, one word in twenty or so is a single letter.
"""

from __future__ import annotations

import ctypes
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from knowledge_ingest.extraction.pdf_tables import MAX_STROKES, MIN_RULES, RuleCounter

# pdfium's segments per pypdf operator at most (a rectangle: a move, three lines and a closing
# line): past this many, pypdf's own count is over MAX_STROKES, a drawing, not a table.
_SEGMENTS_PER_OPERATOR = 5
_SEGMENT_OPERATORS = {
    pdfium_c.FPDF_SEGMENT_MOVETO: b"m",
    pdfium_c.FPDF_SEGMENT_LINETO: b"l",
    pdfium_c.FPDF_SEGMENT_BEZIERTO: b"c",
}
_LINE = re.compile(r"[^\r\n]+")
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters
MIN_WORDS_JUDGED = 20  # fewer words say too little about how they were read
MAX_ONE_LETTER_SHARE = 0.3  # more of a page's words than this a single letter: read in pieces
_SPACES = re.compile(r"\s+")
# pdfium's marks for a hyphen it found at a line end (the word is joined across the break).
_SOFT_HYPHENS = str.maketrans("", "", "\ufffe\x02")


@dataclass
class PageText:
    text: str
    sizes: dict[str, float] = field(default_factory=dict)  # line key (no whitespace) → its font size
    weights: Counter[float] = field(default_factory=Counter)  # font size → characters


def open_document(source: Any) -> pdfium.PdfDocument | None:
    """The document, or None where pdfium cannot open it (pypdf reads every page then)."""
    try:
        return pdfium.PdfDocument(source)
    except Exception:  # noqa: BLE001 - whatever pdfium cannot open, pypdf may
        return None


def read_page(document: pdfium.PdfDocument, index: int) -> PageText | None:
    """Page ``index``'s text and line sizes; None for a page that may draw a ruled table, whose
    words pdfium reads in pieces, or that pdfium cannot read (pypdf reads those)."""
    try:
        page = document[index]
    except Exception:  # noqa: BLE001 - pdfium raises assorted errors on damaged pages; pypdf tries it
        return None
    try:
        if _may_hold_table(page):
            return None
        textpage = page.get_textpage()
        try:
            read = _text(textpage)
        finally:
            textpage.close()
        return None if _in_pieces(read.text) else read
    except Exception:  # noqa: BLE001 - as above
        return None
    finally:
        page.close()


def _may_hold_table(page: pdfium.PdfPage) -> bool:
    """Whether the page's paths (a form's too) draw enough horizontal and vertical rules to hold
    a table, counted until they do; a drawing of more segments than pypdf's bound on strokes
    allows, whatever its rules, does not (pypdf would not look for a table in it either)."""
    rules = RuleCounter()
    segments = 0
    x, y = ctypes.c_float(), ctypes.c_float()
    for item in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_PATH,)):
        for number in range(max(pdfium_c.FPDFPath_CountSegments(item), 0)):
            segments += 1
            if segments > MAX_STROKES * _SEGMENTS_PER_OPERATOR:
                return False
            segment = pdfium_c.FPDFPath_GetPathSegment(item, number)
            operator = _SEGMENT_OPERATORS.get(pdfium_c.FPDFPathSegment_GetType(segment))
            if operator is None or not pdfium_c.FPDFPathSegment_GetPoint(segment, ctypes.byref(x), ctypes.byref(y)):
                continue
            rules(operator, (x.value, y.value), None, None)
            if pdfium_c.FPDFPathSegment_GetClose(segment):
                rules(b"h", (), None, None)
            # Not ``rules.ruled``: its bound on strokes would count pdfium's segments, more than pypdf's operators.
            if min(rules.rules["h"], rules.rules["v"]) >= MIN_RULES:
                return True
    return False


def _in_pieces(text: str) -> bool:
    """Whether pdfium read the page's words in pieces (more one-letter words than prose has)."""
    words = _WORD.findall(text)
    return len(words) >= MIN_WORDS_JUDGED and sum(len(word) == 1 for word in words) > len(words) * MAX_ONE_LETTER_SHARE


def _text(textpage: pdfium.PdfTextPage) -> PageText:
    raw = textpage.get_text_range()
    read = PageText(raw.translate(_SOFT_HYPHENS).replace("\r\n", "\n").replace("\r", "\n"))
    matrix = pdfium_c.FS_MATRIX()
    for line in _LINE.finditer(raw):
        key = _SPACES.sub("", line.group().translate(_SOFT_HYPHENS))
        if not key:
            continue
        size = _line_size(textpage, line, matrix)
        if not size:
            continue
        read.sizes[key] = max(read.sizes.get(key, 0.0), size)
        read.weights[size] += len(key)
    return read


def _line_size(textpage: pdfium.PdfTextPage, line: re.Match[str], matrix: Any) -> float:
    """The font size the line is set in, as drawn (the size times the text matrix's scale), to
    half a point: its first and last characters that are not spaces where they agree, else the
    size two of those and its middle one share (a line of mixed sizes); 0 where pdfium gives none."""
    text, start = line.group(), line.start()
    first = start + len(text) - len(text.lstrip())
    last = start + len(text.rstrip()) - 1
    sizes = [_char_size(textpage, first, matrix), _char_size(textpage, last, matrix)]
    if sizes[0] != sizes[1]:
        sizes.append(_char_size(textpage, (first + last) // 2, matrix))
    found = Counter(size for size in sizes if size > 0)
    return found.most_common(1)[0][0] if found else 0.0


def _char_size(textpage: pdfium.PdfTextPage, position: int, matrix: Any) -> float:
    """The drawn font size of the character at ``position`` of the page's text; 0 where pdfium
    gives none (a character it inserted, a line break)."""
    char = pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage, position)
    if char < 0 or not pdfium_c.FPDFText_GetMatrix(textpage, char, ctypes.byref(matrix)):
        return 0.0
    return round(pdfium_c.FPDFText_GetFontSize(textpage, char) * math.hypot(matrix.c, matrix.d) * 2) / 2
