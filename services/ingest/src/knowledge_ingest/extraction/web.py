"""Web pages (HTML, XHTML) as markdown: headings as ``#`` levels, lists as ``- `` lines, tables
as markdown tables; navigation, headers, footers, sidebars, cookie banners, scripts and styles
left out.

A page that marks its content (``<main>``, ``role="main"`` or ``<article>``) is read by
trafilatura (Apache-2.0), which finds the content inside that mark well. A page that does not is
where trafilatura fails (it kept the navigation, flattened the table and, past a longer
paragraph, dropped the ``h2`` and the table): there the page is cleaned with lxml (the
boilerplate removed by element, role, and class or id words such as ``nav``, ``cookie`` or
``breadcrumb``) and what is left is converted by markdownify (MIT). When trafilatura loses the
headings or tables the marked content has, that content goes the second way too. The document's
``extractor`` says which read it."""

from __future__ import annotations

import copy
import re
from typing import Any, BinaryIO

import lxml.html
from lxml.etree import ParserError
from markdownify import MarkdownConverter

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction.markdown import TextSink

TRAFILATURA, MARKDOWNIFY = "trafilatura", "markdownify"
_MARKER_LINE = re.compile(r"^(\s*)(\[Page[ \t]+\d+\][ \t]*|\[Sheet:.*\][ \t]*)$", re.MULTILINE)
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING_OR_ROW = re.compile(r"^(\s*)(#{1,6}[ \t]|\|)")
_WORD = re.compile(r"[a-z0-9]+")
# Elements that are never content.
_DROPPED_TAGS = frozenset(
    {"head", "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "form", "button"}
    | {"select", "input", "textarea", "nav", "aside", "footer", "dialog", "menu"}
)
_DROPPED_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog"})
# Words in a class or id that mark boilerplate ("site-nav", "cookie-consent", "mw-editsection").
_BOILERPLATE_WORDS = frozenset(
    {
        "nav",
        "navbar",
        "navigation",
        "menu",
        "sidebar",
        "breadcrumb",
        "breadcrumbs",
        "footer",
        "masthead",
        "cookie",
        "cookies",
        "consent",
        "gdpr",
        "skip",
        "share",
        "sharing",
        "social",
        "subscribe",
        "newsletter",
        "related",
        "advert",
        "advertisement",
        "promo",
        "pagination",
        "pager",
        "toc",
        "editsection",
        "catlinks",
        "printfooter",
        "comments",
        "comment",
        "jump",
        "meta",
        "metadata",
        "feedback",
        "widget",
        "likes",
        "labels",
        "button",
        "headerlink",
        "anchor",
        "sitenotice",
    }
)
_HIDDEN_CLASSES = frozenset({"sr-only", "visually-hidden", "screen-reader-text", "hidden", "govuk-visually-hidden"})
_MAX_BOILERPLATE_SHARE = 0.5  # a class word never drops an element holding more of the page's text
# A block whose text is mostly its links' text is a menu, however it is marked: a top bar of
# links, a list of related pages. Only blocks without headings or tables, and short ones.
_LINK_BLOCKS = frozenset({"div", "ul", "ol", "p", "section", "span", "td"})
_MIN_LINK_SHARE = 0.6
_IN_HEADING = "ancestor::h1|ancestor::h2|ancestor::h3|ancestor::h4|ancestor::h5|ancestor::h6"
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))  # zero-width marks of anchor links
_MAX_LINK_BLOCK_CHARS = 400
_PLAIN_TAGS = ["a", "img", "b", "strong", "em", "i", "u", "span", "small", "sup", "sub", "abbr", "mark"]


def extract_html(stream: BinaryIO, sink: TextSink) -> None:
    """Write the page into ``sink``, and which of the two read it into ``sink.reader``."""
    sink.reader = MARKDOWNIFY
    budget = sink.limits.max_chars * 8 + 8  # markup is most of a page's bytes
    data = stream.read(budget + 1)
    if len(data) > budget:
        data = data[:budget]
        sink.warnings.append("the page was cut: it is larger than the text limit allows")
    try:
        page = lxml.html.document_fromstring(data)
    except (ParserError, ValueError, TypeError, RecursionError):
        if data.strip():
            raise _damaged() from None
        return
    cleaned = _cleaned(page)
    body = cleaned.find("body")
    body = body if body is not None else cleaned
    content = _marked_content(body)
    if content is not None:
        markdown = _trafilatura(lxml.html.tostring(cleaned, encoding="unicode"))
        if markdown and _keeps_structure(markdown, content):
            sink.reader = TRAFILATURA
            sink.add(_as_body(markdown.replace("\\_", "_")))  # its escaped underscores split words
            return
    markdown = _markdownify(content if content is not None else body)
    if markdown.strip():
        sink.add(_as_body(markdown))


def _marked_content(body: Any) -> Any:
    """The element the page marks as its content: its ``<main>`` (or ``role="main"``), else its
    only ``<article>``; None when it marks none."""
    for path in ("descendant-or-self::main", "descendant-or-self::*[@role='main']"):
        found = body.xpath(path)
        if found:
            return found[0]
    articles = body.xpath("descendant-or-self::article[not(ancestor::article)]")
    return articles[0] if len(articles) == 1 else None


def _trafilatura(data: str) -> str:
    import trafilatura

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
    except (ValueError, TypeError, RecursionError):
        return ""
    return markdown or ""


def _keeps_structure(markdown: str, content: Any) -> bool:
    """Whether trafilatura kept at least half the headings and any of the tables the content has
    (it can drop a heading and a table that follow a long paragraph)."""
    lines = _outside_code(markdown)
    headings = len(content.xpath(".//h1|.//h2|.//h3"))
    if sum(1 for line in lines if line.startswith("#")) * 2 < headings:
        return False
    return not (content.xpath(".//table//td") and not any(line.startswith("|") for line in lines))


def _outside_code(markdown: str) -> list[str]:
    lines, fenced = [], False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _cleaned(root: Any) -> Any:
    """A copy of ``root`` without boilerplate: never-content tags, navigation roles, hidden
    elements, headers outside the content, and elements whose class or id says boilerplate (unless
    they hold the page's title or most of its text)."""
    root = copy.deepcopy(root)
    total = len(root.text_content()) or 1
    doomed = []
    for element in root.iter():
        comment = not isinstance(element.tag, str)  # or a processing instruction
        if comment or (element is not root and _boilerplate(element, total)):
            doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()
    for caption in list(root.iter("caption")):  # a caption read as a table row breaks the table
        table = caption.getparent()
        paragraph = lxml.html.Element("p")
        paragraph.text = " ".join(caption.text_content().split())
        caption.drop_tree()
        if table is not None and table.getparent() is not None:
            table.addprevious(paragraph)
    return root


def _boilerplate(element: Any, total: int) -> bool:
    tag = element.tag.lower()
    if tag in _DROPPED_TAGS or (element.get("role") or "").lower() in _DROPPED_ROLES:
        return True
    if element.get("hidden") is not None or (element.get("aria-hidden") or "").lower() == "true":
        return True
    style = (element.get("style") or "").replace(" ", "").lower()
    if "display:none" in style or "visibility:hidden" in style:
        return True
    classes = (element.get("class") or "").lower().split()
    if _HIDDEN_CLASSES.intersection(classes):
        return True
    if tag == "header" and not element.xpath("ancestor::article|ancestor::main|.//h1"):
        return True
    words = set(_WORD.findall(" ".join([*classes, (element.get("id") or "").lower()])))
    if words & _BOILERPLATE_WORDS and not element.xpath("self::h1|self::h2|self::h3|.//h1"):
        return len(element.text_content()) <= total * _MAX_BOILERPLATE_SHARE
    return tag in _LINK_BLOCKS and not element.xpath(_IN_HEADING) and _mostly_links(element)


def _mostly_links(element: Any) -> bool:
    text = " ".join(element.text_content().split())
    if not text or len(text) > _MAX_LINK_BLOCK_CHARS or element.xpath(".//h1|.//h2|.//h3|.//table|.//pre"):
        return False
    linked = sum(len(" ".join(link.text_content().split())) for link in element.iter("a"))
    return linked >= len(text) * _MIN_LINK_SHARE


def _markdownify(root: Any) -> str:
    html = lxml.html.tostring(root, encoding="unicode")
    converter = _Converter(
        heading_style="ATX",
        bullets="-",
        strip=_PLAIN_TAGS,
        escape_asterisks=False,
        escape_underscores=False,
        escape_misc=False,
        table_infer_header=True,
    )
    return str(converter.convert(html))


class _Converter(MarkdownConverter):
    """markdownify, with a table cell's pipes escaped (a ``|`` in a cell would split it)."""

    def convert_td(self, el: Any, text: str, parent_tags: Any) -> str:
        escaped = text.replace("|", "\\|")
        return str(super().convert_td(el, escaped, parent_tags))  # type: ignore[misc]

    def convert_th(self, el: Any, text: str, parent_tags: Any) -> str:
        escaped = text.replace("|", "\\|")
        return str(super().convert_th(el, escaped, parent_tags))  # type: ignore[misc]


def _as_body(markdown: str) -> str:
    """Markdown as the chunker reads it: page and sheet marker lines escaped (headings and tables
    are meant), and so is a heading- or table-like line inside a code block."""
    lines = []
    fenced = False
    for line in _TRAILING.sub("", markdown).split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif fenced:
            line = _HEADING_OR_ROW.sub(lambda m: m.group(1) + "\\" + m.group(2), line)
        lines.append(line)
    text = _MARKER_LINE.sub(lambda m: m.group(1) + "\\" + m.group(2), "\n".join(lines).translate(_INVISIBLE))
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def _damaged() -> ExtractionFailed:
    return ExtractionFailed(
        "the web page is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format="html"
    )
