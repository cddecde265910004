"""OCR for PDF pages without a usable text layer (a scan, or a text layer that is empty or
garbage) and for images (``images.py``): pdfium renders the page at 300 dpi in grey, Tesseract (Debian's ``tesseract-ocr`` and
``tesseract-ocr-eng``; the engine measured best here, see the ingest README) reads it in a child
process of its own, one thread, killed past the per-page time limit. Its TSV output gives the
words in blocks, paragraphs and lines; paragraphs become blank-line separated text, so an OCR'd
page flows through the same page, heading and chunking path as any other page. The words' mean
confidence is kept for the document (``OcrTally``)."""

from __future__ import annotations

import csv
import functools
import io
import math
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, cast

from PIL import Image

from knowledge_ingest.extraction.markdown import TextSink

ENGINE = "tesseract"
DPI = 300
MAX_PIXELS = 40_000_000  # an A4 page at 300 dpi is 8.7 million; larger pages are rendered coarser
MIN_TEXT_CHARS = 20  # a page whose text layer has fewer letters and digits is read by OCR
MIN_READABLE_SHARE = 0.6  # ... and so is one where fewer of its characters are readable
MIN_WORD_CONFIDENCE = 30.0  # Tesseract's 0-100; below it a "word" is noise from a picture
MIN_PAGE_CONFIDENCE = 45.0  # the page's words on average: below it, the "text" is a picture's noise
MIN_DPI, MAX_DPI = 50, 1200  # an image's stated resolution outside these is not believed
_BLANK_SPREAD = 8  # a page rendered within this many grey levels is blank: nothing to read
# What a page's text is mostly made of when its font maps are sound; one character at a time, so
# that its complement, counted in one pass, is what is not.
_UNREADABLE = re.compile(r"[^\w\s.,;:!?'\"()\[\]{}%&/+\-–—€$£@#*=<>|]")


class OcrPage(Protocol):
    """What OCR reads and sets on a page."""

    text: str
    extractor: str
    has_image: bool


@dataclass(frozen=True, slots=True)
class OcrOutcome:
    read: list[int]  # 1-based page numbers read by OCR
    unreadable: list[int]  # rendered and read, but no text came out (or time ran out)


def needs_ocr(text: str, has_image: bool = True) -> bool:
    """Whether a page's text layer is missing, mostly not text (a broken font map: pdfium
    still draws the glyphs), or, on a page that draws an image, nearly empty (a scan with a
    stamp); a short text on a page without an image is that page's text."""
    stripped = "".join(text.split())
    letters = sum(map(str.isalnum, stripped))  # in C: a page is thousands of characters
    if not letters:
        return True
    readable = len(stripped) - len(_UNREADABLE.findall(stripped))
    if readable < len(stripped) * MIN_READABLE_SHARE:
        return True
    return has_image and letters < MIN_TEXT_CHARS


@functools.cache
def engine_version() -> str | None:
    """``tesseract 5.3.0``, or None where it is not installed (or has no English data)."""
    binary = shutil.which("tesseract")
    if binary is None:
        return None
    try:
        languages = subprocess.run([binary, "--list-langs"], capture_output=True, text=True, timeout=30)
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if "eng" not in languages.stdout.split():
        return None
    first = (version.stdout or version.stderr).strip().splitlines()
    return first[0].strip() if first else ENGINE


def ocr_pages(stream: BinaryIO, pages: Sequence[OcrPage], sink: TextSink) -> OcrOutcome:
    """Read by OCR the pages whose text layer is not usable, within the page budget and the
    per-page time limit; warnings say what was read and what was not."""
    wanted = [number for number, page in enumerate(pages, start=1) if needs_ocr(page.text, page.has_image)]
    outcome = OcrOutcome(read=[], unreadable=[])
    if not wanted:
        return outcome
    version = engine_version()
    if version is None:
        sink.warnings.append(f"{len(wanted)} page(s) have no text layer and OCR ({ENGINE}) is not installed")
        return outcome
    budget = sink.ocr_pages_left()
    if len(wanted) > budget:
        sink.warnings.append(
            f"OCR read {budget:,} of the {len(wanted):,} pages without a text layer "
            "(the OCR page budget); the others have no text"
        )
        wanted = wanted[:budget]
    import pypdfium2 as pdfium

    stream.seek(0)
    try:
        document = pdfium.PdfDocument(stream)
    except pdfium.PdfiumError:
        sink.warnings.append(f"{len(wanted)} page(s) without a text layer could not be rendered for OCR")
        return outcome
    try:
        for number in wanted:
            sink.check_time()
            page = pages[number - 1]
            image = _render_page(document, number - 1)
            if image is None:
                sink.warnings.append(f"page {number}: OCR found no readable text")
                outcome.unreadable.append(number)
                continue
            if is_blank(image):  # nothing to read, nothing to warn about
                continue
            read = read_image(image, number, sink)
            if read is None:
                outcome.unreadable.append(number)
                continue
            page.text = read
            page.extractor = version
            outcome.read.append(number)
    finally:
        document.close()
    if outcome.read:
        noun = "page" if len(outcome.read) == 1 else "pages"
        sink.warnings.append(f"{len(outcome.read)} page(s) read by OCR ({version}): {noun} {page_ranges(outcome.read)}")
    return outcome


def read_image(image: Image.Image, number: int, sink: TextSink) -> str | None:
    """Page ``number``'s text by OCR from its greyscale image (recorded on the sink with its
    confidence), or None: blank (nothing to say), or unreadable or too slow (a warning says so).
    Tesseract must be installed (``engine_version``)."""
    if is_blank(image):
        return None
    try:
        read = _tesseract(image, sink.limits.ocr_page_seconds)
    except subprocess.TimeoutExpired:
        sink.warnings.append(
            f"page {number}: OCR stopped after {sink.limits.ocr_page_seconds:g} s; the page has no text"
        )
        return None
    if not read.text.strip():
        sink.warnings.append(f"page {number}: OCR found no readable text")
        return None
    sink.ocr_read(number, engine_version() or ENGINE, read.confidences)
    return read.text


def page_ranges(numbers: list[int]) -> str:
    """1, 2, 3, 5 → "1-3, 5"."""
    ranges: list[list[int]] = []
    for number in sorted(numbers):
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _render_page(document: Any, index: int) -> Image.Image | None:
    """The PDF page in grey at ``DPI`` (coarser for a poster), its dpi in ``info``; None when
    pdfium cannot render it."""
    try:
        page = document[index]
        try:
            width, height = page.get_size()  # points; a poster-sized page is rendered coarser
            scale = min(DPI / 72, math.sqrt(MAX_PIXELS / max(width * height, 1.0)))
            image: Image.Image = page.render(scale=scale, grayscale=True).to_pil()
        finally:
            page.close()
    except Exception:  # noqa: BLE001 - pdfium raises assorted errors on damaged pages
        return None
    image.info["dpi"] = (scale * 72, scale * 72)
    return image


def is_blank(image: Image.Image) -> bool:
    """A page drawn within a few grey levels: nothing to read, nothing to warn about."""
    low, high = cast(tuple[float, float], (image if image.mode == "L" else image.convert("L")).getextrema())
    return high - low <= _BLANK_SPREAD


@dataclass(frozen=True, slots=True)
class OcrText:
    text: str  # "" when the page's words average below MIN_PAGE_CONFIDENCE
    confidences: list[float]  # each word's, where text was kept


def _tesseract(image: Image.Image, seconds: float) -> OcrText:
    """Tesseract's reading of the image, in a process of its own killed past ``seconds``. The
    image's dpi (``info["dpi"]``) is passed on where it is known; else Tesseract estimates it."""
    png = io.BytesIO()
    image.save(png, "PNG", compress_level=1)
    # Only what Tesseract needs; one thread: many threads fight over few shared cores.
    environment = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TESSDATA_PREFIX")}
    environment["OMP_THREAD_LIMIT"] = "1"
    dpi = _dpi(image)
    finished = subprocess.run(
        ["tesseract", "-", "-", *(["--dpi", str(dpi)] if dpi else []), "--psm", "3", "-l", "eng", "tsv"],
        input=png.getvalue(),
        capture_output=True,
        timeout=seconds,
        env=environment,
        check=False,
    )
    if finished.returncode != 0:
        return OcrText("", [])
    return read_tsv(finished.stdout.decode("utf-8", "replace"))


def _dpi(image: Image.Image) -> int | None:
    try:
        dpi = round(float(image.info.get("dpi", (0, 0))[0]))
    except (TypeError, ValueError, IndexError):
        return None
    return dpi if MIN_DPI <= dpi <= MAX_DPI else None


def read_tsv(tsv: str) -> OcrText:
    """Tesseract's TSV as text: words of a line joined by spaces, lines by line breaks, and
    paragraphs (and blocks) by blank lines; words below ``MIN_WORD_CONFIDENCE`` are left out,
    and a page whose words average below ``MIN_PAGE_CONFIDENCE`` has none."""
    paragraphs: dict[tuple[str, str], dict[str, list[str]]] = {}
    confidences: list[float] = []
    kept: list[float] = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5":
            continue
        word = (row.get("text") or "").strip()
        try:
            confidence = float(row.get("conf") or -1)
        except ValueError:
            continue
        if word:
            confidences.append(confidence)
        if not word or confidence < MIN_WORD_CONFIDENCE:
            continue
        kept.append(confidence)
        paragraph = paragraphs.setdefault((row["block_num"], row["par_num"]), {})
        paragraph.setdefault(row["line_num"], []).append(word)
    if not confidences or sum(confidences) / len(confidences) < MIN_PAGE_CONFIDENCE:
        return OcrText("", [])
    text = "\n\n".join("\n".join(" ".join(words) for words in lines.values()) for lines in paragraphs.values())
    return OcrText(text, kept)
