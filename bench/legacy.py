"""What reading Office 97-2003 files through LibreOffice costs (not part of the test suite).

The Word handbook and the two-slide deck the tests use are saved as .doc and .ppt by LibreOffice
(as Office would save them), then each is read ``--repeat`` times by ingest's extractor: as the
.docx / .pptx it came from (the baseline, in the same run) and as the .doc / .ppt, which is
converted by headless LibreOffice with a fresh profile each time (as in the service). Prints the
seconds per document, the ratio to the baseline, and the largest resident size a conversion
reached (LibreOffice's process, from the kernel's accounting of finished children).

    .venv/bin/python bench/legacy.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from knowledge_ingest.extraction import DocumentExtractor, legacy

from tests.support.documents import word_document
from tests.support.formats import a_pptx, converted_by_libreoffice


def seconds(extractor: DocumentExtractor, data: bytes, name: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = extractor.extract_quietly(data, name, "")
        times.append(time.perf_counter() - started)
        assert result.extractable, name
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    if legacy.soffice() is None:
        raise SystemExit("LibreOffice is not installed (make setup)")
    extractor = DocumentExtractor(use_unstructured=False)
    print("| document | OOXML s (baseline) | 97-2003 via LibreOffice s (median, max) | ratio |")
    print("|---|---|---|---|")
    for label, data, source, target in (
        ("Word handbook (title, headings, list, table)", word_document(), "docx", "doc"),
        ("deck (2 slides, table, speaker notes)", a_pptx(), "pptx", "ppt"),
    ):
        old = converted_by_libreoffice(data, source, target)
        base = statistics.median(seconds(extractor, data, f"file.{source}", options.repeat))
        converted = seconds(extractor, old, f"file.{target}", options.repeat)
        median = statistics.median(converted)
        print(f"| {label} | {base:.3f} | {median:.2f} ({max(converted):.2f}) | {median / base:.0f}× |")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\nlargest resident size of a conversion: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
