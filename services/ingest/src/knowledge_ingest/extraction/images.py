"""Images (PNG, JPEG, TIFF, WebP, BMP, GIF) through Pillow (HPND), read by OCR as scanned PDF
pages are (``ocr.py``: Tesseract, its page budget and per-page time limit): ``[Page N]`` per page
of a multi-page TIFF, the first frame of any other format, each turned upright by its EXIF
orientation first.

A decompression bomb (a few kilobytes that decode to gigapixels) is refused from the size its
header declares, before any pixel is decoded: ``MAX_IMAGE_PIXELS`` per page, past which the file is
``FILE_TOO_COMPLEX``. Pillow's own check (``Image.MAX_IMAGE_PIXELS``, set to the same constant)
stays as a second guard. A TIFF's pages are counted no further than ``max_pages`` and read no
further than the OCR page budget, so a 10,000-page TIFF costs its first pages and a warning."""

from __future__ import annotations

import math
import struct
import warnings
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import ocr
from knowledge_ingest.extraction.markdown import TextSink

# 50 megapixels: a large camera's photo, or an A4 page scanned at 600 dpi (35 Mpx). Decoded as
# RGBA it is 200 MB, well within an extraction child's address space.
MAX_IMAGE_PIXELS = 50_000_000
NO_TEXT = "no text found in the image by OCR"
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS  # Pillow refuses twice this itself: a second guard
_MULTI_PAGE = frozenset({"TIFF"})  # other formats' frames are an animation: its first frame is read


def extract_image(stream: BinaryIO, sink: TextSink) -> int:
    """Write the image's text, read by OCR, into ``sink``; returns its page count."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(stream)
            pages = _count_pages(image, sink.limits.max_pages)
            _read_pages(image, pages, sink)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise _too_large() from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, struct.error):
        raise ExtractionFailed(
            "the image is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT
        ) from None
    return min(pages, sink.limits.max_pages)


def _count_pages(image: Image.Image, limit: int) -> int:
    """The image's pages, counted no further than ``limit`` + 1 (past it, the count says only
    that there are more): each page's header is read, no pixel decoded."""
    if image.format not in _MULTI_PAGE or not getattr(image, "is_animated", False):
        return 1
    count = 1
    while count <= limit:
        try:
            image.seek(count)
        except EOFError:
            break
        count += 1
    image.seek(0)
    return count


def _read_pages(image: Image.Image, pages: int, sink: TextSink) -> None:
    engine = ocr.engine_version()
    if engine is None:
        sink.warnings.append(f"the image needs OCR and OCR ({ocr.ENGINE}) is not installed; it has no text")
        return
    budget = sink.ocr_pages_left()
    readable = min(pages, sink.limits.max_pages)
    if readable > budget:
        total = f"more than {sink.limits.max_pages:,}" if pages > sink.limits.max_pages else f"{pages:,}"
        sink.warnings.append(
            f"OCR read {budget:,} of the image's {total} pages (the OCR page budget); the others have no text"
        )
    elif pages > readable:
        sink.warnings.append(f"only the first {readable:,} of more than {readable:,} pages were read")
    for number in range(1, min(readable, budget) + 1):
        sink.check_time()
        if number > 1:
            image.seek(number - 1)
        page = _upright_grey(image)
        sink.page(number)
        text = ocr.read_image(page, number, sink)
        if text:
            sink.paragraph(text)
    if sink.ocr_pages:
        noun = "page" if len(sink.ocr_pages) == 1 else "pages"
        sink.warnings.append(
            f"{len(sink.ocr_pages)} page(s) read by OCR ({engine}): {noun} {ocr.page_ranges(sink.ocr_pages)}"
        )
    else:
        sink.warnings.append(NO_TEXT)


def _upright_grey(image: Image.Image) -> Image.Image:
    """The current page in grey, turned by its EXIF orientation, transparency on white, and no
    larger than OCR reads (``ocr.MAX_PIXELS``); its dpi kept for Tesseract."""
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise _too_large()
    dpi = image.info.get("dpi")
    scale = min(1.0, math.sqrt(ocr.MAX_PIXELS / max(width * height, 1)))
    if image.format == "JPEG" and scale < 1.0:
        image.draft("L", (int(width * scale), int(height * scale)))  # decode at a reduced size
    image.load()
    page = ImageOps.exif_transpose(image) or image
    if page.mode in ("RGBA", "LA", "PA") or (page.mode == "P" and "transparency" in page.info):
        rgba = page.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        page = Image.alpha_composite(white, rgba)
    grey = page.convert("L")
    if grey.width * grey.height > ocr.MAX_PIXELS:
        factor = math.sqrt(ocr.MAX_PIXELS / (grey.width * grey.height))
        grey = grey.resize((max(1, int(grey.width * factor)), max(1, int(grey.height * factor))))
        if dpi:
            dpi = (dpi[0] * factor, dpi[1] * factor)
    if dpi:
        grey.info["dpi"] = dpi
    return grey


def _too_large() -> ExtractionFailed:
    return ExtractionFailed(
        f"the image is larger than {MAX_IMAGE_PIXELS // 1_000_000} megapixels (or claims to be: a decompression "
        "bomb); scale it down and upload it again",
        reason=ExtractionFailed.FILE_TOO_COMPLEX,
    )
