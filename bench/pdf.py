"""PDF reading compared (not part of the test suite): the service's reader (pdfium reads the pages,
pypdf the outline and the pages pdfium leaves to it) against pypdf reading every page, as the
service did before (the baseline of the ratios; its forked helpers read the later pages of a long
PDF on the other cores, as they still do for pypdf's pages).

The documents: the ingest bench's generated 100-page PDF, the extraction tests' PDFs (font-size
headings, a ruled table, a table over two pages), and any PDF files named on the command line
(pypdf's sdist carries about sixty real ones under ``resources/``). For each: seconds per document
(best of ``--repeat``, in this process), the ratio, the characters, headings (``#`` lines) and
tables of each reading, and how many of the baseline's words the service's reading has (a word
hyphenated at a line end, which pdfium joins, counts as two words missed and one gained).

    .venv/bin/python bench/pdf.py [--repeat 3] [FILE.pdf ...]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' document builders

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import DocumentExtractor, pdf_text

from bench.ingest import pdf_pages
from tests.support.documents import regions_report
from tests.unit.test_extraction_formats import pdf_with_font_headings
from tests.unit.test_extraction_pdf_tables import two_page_table

_WORD = re.compile(r"\w+")
HEADING = "\n#"  # a heading line
TABLE = "| --"  # a markdown table's rule under its header


def read(data: bytes, repeat: int, *, pdfium: bool) -> tuple[float, object]:
    """Best seconds of ``repeat`` readings, and the last reading."""
    opened = pdf_text.open_document
    if not pdfium:
        pdf_text.open_document = lambda _source: None  # every page to pypdf
    try:
        extractor = DocumentExtractor(use_unstructured=False)
        best, result = float("inf"), None
        for _ in range(repeat):
            started = time.perf_counter()
            result = extractor.extract_quietly(data, "document.pdf", "application/pdf")
            best = min(best, time.perf_counter() - started)
        return best, result
    finally:
        pdf_text.open_document = opened


def words(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    documents = {
        "bench 100 pages": pdf_pages(100),
        "headings.pdf": pdf_with_font_headings(),
        "regions.pdf": regions_report(),
        "table-2-pages.pdf": two_page_table(repeat_header=False),
    } | {path.name: path.read_bytes() for path in args.files}
    print(
        f"{'document':<40}{'pypdf s':>9}{'now s':>8}{'ratio':>7}{'chars':>15}{'heads':>8}{'tables':>8}"
        f"{'words kept':>12}  extractor now"
    )
    totals = [0.0, 0.0]
    kept_all, base_all = 0, 0
    for name, data in documents.items():
        try:
            before_s, before = read(data, args.repeat, pdfium=False)
            now_s, now = read(data, args.repeat, pdfium=True)
        except ExtractionFailed as failed:
            print(f"{name[:39]:<40}not read: {failed.reason}")
            continue
        totals[0] += before_s
        totals[1] += now_s
        base, mine = words(before.text), words(now.text)
        kept = sum((base & mine).values())
        kept_all, base_all = kept_all + kept, base_all + sum(base.values())
        share = f"{kept / sum(base.values()):.3f}" if base else "-"
        chars = f"{len(before.text)}/{len(now.text)}"
        heads = f"{before.text.count(HEADING)}/{now.text.count(HEADING)}"
        tables = f"{before.text.count(TABLE)}/{now.text.count(TABLE)}"
        print(
            f"{name[:39]:<40}{before_s:>9.3f}{now_s:>8.3f}{now_s / before_s:>7.2f}"
            f"{chars:>15}{heads:>8}{tables:>8}{share:>12}  {now.extractor}"
        )
    print(
        f"all: pypdf {totals[0]:.3f} s, now {totals[1]:.3f} s, ratio {totals[1] / totals[0]:.2f}; "
        f"words kept {kept_all / max(base_all, 1):.4f} of {base_all}"
    )


if __name__ == "__main__":
    main()
