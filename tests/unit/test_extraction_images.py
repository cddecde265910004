"""Images read by OCR (the real Tesseract `make setup` installs), drawn here with Pillow: every
format, pages of a TIFF, the EXIF orientation, transparency, an image without text, and the
hostile ones (a decompression bomb, a 10,000-page TIFF) answered within the limits."""

from __future__ import annotations

import time

import pytest
from knowledge_ingest.domain.extraction import ExtractionFailed, ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor, ocr
from knowledge_ingest.extraction.detect import plain_text
from knowledge_ingest.extraction.images import MAX_IMAGE_PIXELS, NO_TEXT
from knowledge_runtime.chunking import split_structural
from PIL import Image

from tests.support.formats import (
    PUMPS,
    RESERVOIR,
    VALVES,
    image_file,
    multi_page_tiff,
    png_bomb,
    sideways_jpeg,
    text_image,
)


@pytest.fixture(scope="module")
def extract():
    assert ocr.engine_version() is not None, "tesseract-ocr with English data is installed by make setup"
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data, filename="scan": extractor.extract(data, filename, "")


def test_a_png_is_read_by_ocr_as_one_page_with_its_confidence(extract):
    result = extract(image_file(text_image([PUMPS, VALVES]), "PNG"), "notice.png")
    assert (result.format, result.page_count, result.extractable) == ("png", 1, True)
    assert result.text == f"[Page 1]\n\n{PUMPS}\n\n{VALVES}"
    assert result.extractor == f"OCR ({ocr.engine_version()}) on every page"
    assert result.ocr_page_count == 1 and 80 < result.ocr_confidence <= 100
    assert result.warnings == (f"1 page(s) read by OCR ({ocr.engine_version()}): page 1",)


@pytest.mark.parametrize(
    ("fmt", "name", "mode"),
    [
        ("JPEG", "jpeg", "RGB"),
        ("WEBP", "webp", "RGB"),
        ("BMP", "bmp", "RGB"),
        ("TIFF", "tiff", "L"),
        ("PNG", "png", "1"),
    ],
)
def test_every_image_format_is_known_by_its_bytes_and_read(extract, fmt, name, mode):
    data = image_file(text_image([PUMPS]).convert(mode), fmt)
    result = extract(data, "upload.bin")  # the name says nothing: the bytes do
    assert result.format == name and PUMPS in result.text


def test_a_gif_is_read_from_its_first_frame(extract):
    frames = [text_image([PUMPS]).convert("P"), text_image([RESERVOIR]).convert("P")]
    data = image_file(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=500)
    result = extract(data, "animation.gif")
    assert (result.format, result.page_count) == ("gif", 1)
    assert PUMPS in result.text and "reservoir" not in result.text


def test_each_page_of_a_tiff_is_a_page(extract):
    result = extract(multi_page_tiff([text_image([PUMPS]), text_image([VALVES]), text_image([RESERVOIR])]))
    assert (result.format, result.page_count, result.ocr_page_count) == ("tiff", 3, 3)
    assert [(c.page, c.content) for c in split_structural(result.text)] == [(1, PUMPS), (2, VALVES), (3, RESERVOIR)]


def test_the_exif_orientation_puts_a_sideways_photo_upright(extract):
    result = extract(sideways_jpeg([PUMPS, VALVES]), "photo.jpg")
    assert PUMPS in result.text and VALVES in result.text


def test_a_transparent_background_reads_as_white(extract):
    result = extract(image_file(text_image([PUMPS], mode="RGBA"), "PNG"), "logo.png")
    assert PUMPS in result.text


def test_an_image_without_text_is_stored_with_a_warning(extract):
    blank = extract(image_file(Image.new("RGB", (800, 600), "white"), "PNG"), "white.png")
    assert not blank.extractable and blank.text == "" and blank.ocr_page_count == 0
    assert blank.warnings == (NO_TEXT,) and "no text found" in NO_TEXT
    assert blank.ocr_confidence == 0.0


def test_a_decompression_bomb_is_refused_before_it_is_decoded(extract):
    bomb = png_bomb()
    assert len(bomb) < 1_000_000  # 3.6 gigapixels in under a megabyte
    started = time.monotonic()
    with pytest.raises(ExtractionFailed) as refused:
        extract(bomb, "bomb.png")
    assert time.monotonic() - started < 5
    assert refused.value.reason == ExtractionFailed.FILE_TOO_COMPLEX
    assert refused.value.file_format == "png" and "megapixels" in refused.value.message
    assert Image.MAX_IMAGE_PIXELS == MAX_IMAGE_PIXELS  # Pillow's own guard, set to the same cap


def test_a_ten_thousand_page_tiff_is_read_up_to_the_ocr_budget_with_a_warning():
    tiff = multi_page_tiff([text_image([PUMPS]), text_image([VALVES])], blank_pages=9_998)
    extractor = DocumentExtractor(ExtractionLimits(max_ocr_pages=1), use_unstructured=False)
    started = time.monotonic()
    result = extractor.extract(tiff, "archive.tiff", "image/tiff")
    assert time.monotonic() - started < 20
    assert PUMPS in result.text and "Valves" not in result.text
    assert result.page_count == 5_000  # counted no further than the page limit
    assert (
        "OCR read 1 of the image's more than 5,000 pages (the OCR page budget); the others have no text"
        in result.warnings
    )


def test_ocr_turned_off_reads_no_image():
    extractor = DocumentExtractor(ExtractionLimits(max_ocr_pages=0), use_unstructured=False)
    result = extractor.extract(image_file(text_image([PUMPS]), "PNG"), "notice.png", "")
    assert not result.extractable and result.ocr_page_count == 0
    assert "OCR read 0 of the image's 1 pages (the OCR page budget); the others have no text" in result.warnings


def test_a_damaged_image_is_corrupt_and_never_read_in_process(extract):
    png = image_file(text_image([PUMPS]), "PNG")
    with pytest.raises(ExtractionFailed) as damaged:
        extract(png[:200], "cut.png")
    assert damaged.value.reason == ExtractionFailed.FILE_CORRUPT
    # an image is never taken for small plain text (read without the isolated child)
    assert not plain_text(png[:1024], "notes.txt", "text/plain")
