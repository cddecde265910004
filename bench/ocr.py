"""OCR benchmark (not part of the test suite): seconds per page and character accuracy.

Generated pages of known text (fpdf2, Helvetica 11 pt) are read twice by ingest's extractor:
from their text layer (the baseline, measured in the same run), and as scans (pdfium renders
each page, fpdf2 wraps the image as an image-only page) at 300, 200 and 150 dpi, so every page
is read by OCR. Accuracy is 1 − (character edit distance ÷ length of the known text), on text
with whitespace collapsed. With ``--rapidocr`` (where ``rapidocr_onnxruntime`` is importable)
the same scans are read by RapidOCR too, the engine this choice was measured against.

    .venv/bin/python bench/ocr.py [--pages 5] [--rapidocr]
"""

from __future__ import annotations

import argparse
import random
import re
import time

import pypdfium2 as pdfium
from fpdf import FPDF
from knowledge_ingest.extraction import DocumentExtractor, ocr

WORDS = [
    "pump",
    "station",
    "valve",
    "reservoir",
    "pressure",
    "technician",
    "quarterly",
    "schedule",
    "inspection",
    "archive",
    "northern",
    "district",
    "contract",
    "invoice",
    "budget",
    "4471",
    "2026",
    "approved",
    "replaced",
    "certified",
    "logs",
    "seven",
    "twelve",
    "operations",
    "desk",
    "extension",
    "access",
    "maintenance",
    "window",
    "autumn",
    "weekday",
    "visitors",
]
A4 = (595.28, 841.89)


def known_pages(count: int) -> list[str]:
    rng = random.Random(17)
    pages = []
    for number in range(1, count + 1):
        paragraphs = []
        for _ in range(5):
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 60)))
            paragraphs.append(sentence.capitalize() + ".")
        pages.append(f"Report page {number}\n\n" + "\n\n".join(paragraphs))
    return pages


def text_pdf(pages: list[str]) -> bytes:
    document = FPDF()
    document.set_font("helvetica", size=11)
    for text in pages:
        document.add_page()
        document.multi_cell(0, 6, text)
    return bytes(document.output())


def scans(source: bytes, dpi: int) -> tuple[bytes, list]:
    rendered = pdfium.PdfDocument(source)
    images = [rendered[i].render(scale=dpi / 72, grayscale=True).to_pil() for i in range(len(rendered))]
    document = FPDF(unit="pt")
    for image in images:
        document.add_page(format=A4)
        document.image(image, x=0, y=0, w=A4[0], h=A4[1])
    return bytes(document.output()), images


def distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def accuracy(known: list[str], pages: list[str]) -> float:
    """Over all pages: 1 − edit distance ÷ known length, each page against its known text."""
    errors = total = 0
    for index, reference in enumerate(known):
        reference = " ".join(reference.split())
        read = " ".join(pages[index].split()) if index < len(pages) else ""
        errors += distance(reference, read)
        total += len(reference)
    return max(0.0, 1 - errors / total)


def by_page(text: str) -> list[str]:
    """The extracted text of each page, without its ``[Page N]`` marker."""
    return [part for part in re.split(r"\[Page \d+\]", text)[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--rapidocr", action="store_true")
    args = parser.parse_args()
    print(f"engine: {ocr.engine_version()}, {args.pages} pages of about 270 words each")
    known = known_pages(args.pages)
    source = text_pdf(known)
    extractor = DocumentExtractor(use_unstructured=False)
    started = time.perf_counter()
    baseline = extractor.extract_quietly(source, "text.pdf", "")
    base_s = (time.perf_counter() - started) / args.pages
    print(f"{'reading':<26}{'s/page':>9}{'× text layer':>14}{'accuracy':>10}")
    print(f"{'text layer (baseline)':<26}{base_s:>9.3f}{1:>14.0f}{accuracy(known, by_page(baseline.text)):>10.4f}")
    for dpi in (300, 200, 150):
        scan, images = scans(source, dpi)
        started = time.perf_counter()
        result = extractor.extract_quietly(scan, "scan.pdf", "")
        seconds = (time.perf_counter() - started) / args.pages
        print(
            f"{f'tesseract, {dpi} dpi scan':<26}{seconds:>9.3f}{seconds / base_s:>14.0f}"
            f"{accuracy(known, by_page(result.text)):>10.4f}"
        )
        if args.rapidocr:
            import numpy as np
            from rapidocr_onnxruntime import RapidOCR

            engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
            started = time.perf_counter()
            texts = [
                " ".join(line[1] for line in (engine(np.array(image.convert("RGB")))[0] or [])) for image in images
            ]
            seconds = (time.perf_counter() - started) / args.pages
            print(
                f"{f'rapidocr, {dpi} dpi scan':<26}{seconds:>9.3f}{seconds / base_s:>14.0f}"
                f"{accuracy(known, texts):>10.4f}"
            )


if __name__ == "__main__":
    main()
