"""Web pages (HTML, XHTML) through trafilatura (Apache-2.0): the page's main content as markdown,
headings as ``#`` levels, lists as ``- `` lines, tables as markdown tables; navigation, scripts,
styles, headers, footers and other boilerplate left out. A page trafilatura finds no main
content in keeps its visible text as plain lines."""

from __future__ import annotations

import re
from typing import BinaryIO

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction.markdown import TextSink

_MARKER_LINE = re.compile(r"^(\s*)(\[Page[ \t]+\d+\][ \t]*|\[Sheet:.*\][ \t]*)$", re.MULTILINE)
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)


def extract_html(stream: BinaryIO, sink: TextSink) -> None:
    import trafilatura

    budget = sink.limits.max_chars * 8 + 8  # markup is most of a page's bytes
    data = stream.read(budget + 1)
    if len(data) > budget:
        data = data[:budget]
        sink.warnings.append("the page was cut: it is larger than the text limit allows")
    try:
        markdown = trafilatura.extract(
            data,
            output_format="markdown",
            include_tables=True,
            include_formatting=True,
            include_links=False,
            include_images=False,
            include_comments=False,
            with_metadata=False,
            deduplicate=False,
        )
        if not markdown:
            fallback = trafilatura.html2txt(data)
            if fallback and fallback.strip():
                sink.paragraph(fallback)
            return
    except (ValueError, TypeError, RecursionError):
        raise ExtractionFailed(
            "the web page is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format="html"
        ) from None
    # Markdown is what the chunker reads; only lines that would be taken for page or sheet
    # markers are escaped (headings and tables are meant).
    sink.add(_MARKER_LINE.sub(lambda m: m.group(1) + "\\" + m.group(2), _TRAILING.sub("", markdown)))
