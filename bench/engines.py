"""Extraction engines compared (not part of the test suite): the native readers against the
optional unstructured path, on the documents the extraction tests build (a Word document with
headings, lists and tables; a deck with a title, a table and notes; PDFs with font-size headings
and a ruled table; the two-page table). For each document and engine: seconds per document
(best of ``--repeat``), characters of text, headings (``#`` lines), markdown tables, page markers,
and the known phrases found; the native path is the baseline of the ratios.

unstructured is an optional extra; run this where it is installed (ingest README, "Choice of
engine"). Without it, only the native column is printed.

    .venv/bin/python bench/engines.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' document builders

from knowledge_ingest.extraction import DocumentExtractor, unstructured_path

from tests.support.documents import regions_report, word_document
from tests.unit.test_extraction_formats import pdf_with_font_headings, presentation
from tests.unit.test_extraction_pdf_tables import two_page_table

DOCUMENTS = {
    "handbook.docx": (word_document, ["# Employee handbook", "- Ask your manager", "| Grade | Days | Note |"]),
    "deck.pptx": (presentation, ["Quarterly results", "| Region | Sales |", "Notes: Mention the new office."]),
    "headings.pdf": (pdf_with_font_headings, ["# Chapter 2", "## Section 2.1", "[Page 3]"]),
    "regions.pdf": (regions_report, ["| Region | Revenue | Owner |", "Zanzibar"]),
    "table-2-pages.pdf": (lambda: two_page_table(repeat_header=False), ["| Part | Count | Bin |", "part-45"]),
}


def measure(extractor: DocumentExtractor, name: str, data: bytes, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = extractor.extract_quietly(data, name, "")
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines = {"native": DocumentExtractor(use_unstructured=False)}
    available = unstructured_path.partitioners()
    if available:
        engines["unstructured"] = DocumentExtractor(use_unstructured=None)
    print(f"unstructured reads here: {sorted(available) or 'nothing (not installed)'}")
    print(
        f"{'document':<19}{'engine':<14}{'s/doc':>8}{'× native':>10}{'chars':>7}{'heads':>6}{'tables':>7}"
        f"{'pages':>6}{'found':>7}  extractor"
    )
    for name, (build, phrases) in DOCUMENTS.items():
        data = build()
        baseline = None
        for engine, extractor in engines.items():
            seconds, result = measure(extractor, name, data, args.repeat)
            baseline = baseline or seconds
            lines = result.text.split("\n")
            heads = sum(1 for line in lines if line.startswith("#"))
            tables = sum(1 for line in lines if line.startswith("|") and set(line) <= set("|- :"))
            pages = sum(1 for line in lines if line.startswith("[Page "))
            found = sum(1 for phrase in phrases if phrase in result.text)
            print(
                f"{name:<19}{engine:<14}{seconds:>8.3f}{seconds / baseline:>10.1f}{len(result.text):>7}{heads:>6}"
                f"{tables:>7}{pages:>6}{found:>4}/{len(phrases)}  {result.extractor}"
            )


if __name__ == "__main__":
    main()
