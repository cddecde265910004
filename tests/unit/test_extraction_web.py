"""Web pages of ten real-world layouts (tests/data/web, each noting the layout it imitates), with
and without a <main> or <article>: every page keeps its headings as markdown headings and its
table as a markdown table, and loses its navigation, headers, footers, sidebars and banners."""

from __future__ import annotations

from pathlib import Path

import lxml.html
import pytest
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_ingest.extraction.web import MARKDOWNIFY, TRAFILATURA
from knowledge_runtime.chunking import split_structural

PAGES = Path(__file__).parent.parent / "data" / "web"

# page: (headings in order, a table row, words of its navigation and boilerplate)
LAYOUTS = {
    "sphinx-readthedocs.html": (
        ["# Configuration", "## Settings", "## Logging"],
        "| max_pressure | 6.5 | Bar above which the relief valve opens |",
        ["Installation guide", "Changelog archive", "Breadcrumb home", "Previous page button", "Search docs", "¶"],
    ),
    "mkdocs-material.html": (
        ["# Alerts", "## Thresholds", "### Escalation"],
        "| High | above 95% | 5 minutes |",
        ["header title", "Home tab", "Getting started page", "Table of contents", "Edit this page", "footer"],
    ),
    "docusaurus.html": (
        ["# Backups", "## Schedules", "## Restoring"],
        "| Monthly | 12 months | archive |",
        ["brand", "Tutorial navbar", "sidebar entry", "Breadcrumb root", "pagination", "toc entry", "Community"],
    ),
    "mediawiki.html": (
        ["# Lake Vessla", "## Geography", "## Water quality"],
        "| 2025 | 2.1 | Good |",
        ["Jump to", "[edit]", "Personal tools", "Random article", "Privacy policy", "navbox", "category", "Donate"],
    ),
    "news-article.html": (
        ["# Reservoir levels recover after wet autumn", "## How the reservoirs compare"],
        "| Lower Vessla | 38% | 81% |",
        ["Accept all cookies", "masthead", "Sport menu", "Subscribe", "Share", "Related stories", "newsletter"],
    ),
    "confluence-intranet.html": (
        ["# On-call handbook", "## Rota", "## When to escalate", "### Hand-over"],
        "| 50 | Carmen Ruiz | Amira Okafor |",
        ["Spaces menu", "Create page", "sidebar", "page tree", "Edit page", "breadcrumb", "Like this", "Comment"],
    ),
    "github-readme.html": (
        ["# flowmeter", "## Supported gateways", "## Quick start"],
        "| Anybus AB7702 | Modbus RTU | 2.1 |",
        ["Skip to content", "Product menu", "Sign in", "Star button", "Issues tab", "sidebar text", "footer link"],
    ),
    "blog-post.html": (
        ["# Winterising a garden water butt", "## What to do", "## Which butts survive a frost"],
        "| Oak barrel | Yes, if it stays wet |",
        ["site title", "About me menu", "Skip to content", "Leave a reply", "Recent Posts", "colophon", "category"],
    ),
    "government-info.html": (
        ["# Private water supplies: testing", "## How often your supply is tested", "## If your water fails a test"],
        "| Shared or commercial | At least every 5 years | £500 |",
        ["essential cookies", "crown logo", "Benefits menu", "breadcrumb", "phase banner", "useful", "footer"],
    ),
    "release-notes.html": (
        ["# Release notes: Tidewater Scheduler 4.2", "## Supported platforms", "## Fixed issues", "## Known issues"],
        "| Linux kernel | 5.10 | x86-64 and arm64 |",
        ["Home", "About us", "Pricing plans", "Cookie settings", "Was this helpful", "Imprint"],
    ),
}
# No <main> and no role="main" (the news page has one <article>).
WITHOUT_MAIN = {"news-article.html", "confluence-intranet.html", "blog-post.html", "release-notes.html"}


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda page: extractor.extract((PAGES / page).read_bytes(), page, "text/html")


def test_there_are_ten_layouts_each_noting_what_it_imitates():
    assert sorted(path.name for path in PAGES.glob("*.html")) == sorted(LAYOUTS)
    for name in LAYOUTS:
        assert "Layout imitated:" in (PAGES / name).read_text()
    for name in WITHOUT_MAIN:
        assert not lxml.html.fromstring((PAGES / name).read_bytes()).xpath("//main|//*[@role='main']"), name


@pytest.mark.parametrize("page", sorted(LAYOUTS))
def test_a_page_keeps_its_headings_and_table_and_drops_its_navigation(extract, page):
    headings, row, boilerplate = LAYOUTS[page]
    result = extract(page)
    assert result.format == "html" and result.extractor in (TRAFILATURA, MARKDOWNIFY)
    lines = result.text.splitlines()
    found = [line for line in lines if line in headings]
    assert found == headings, result.text  # each heading once, in order, as a markdown heading
    assert row in lines, result.text
    table = lines.index(row)
    assert lines[table - 1].startswith("|") and any(line.startswith(("| --", "|--")) for line in lines)
    for words in boilerplate:
        assert words.lower() not in result.text.lower(), words
    # the chunk holding the table cites the heading above it
    assert [c.section for c in split_structural(result.text) if row in c.content] == [_section_of(lines, table)]


def _section_of(lines: list[str], at: int) -> str:
    return next(line.lstrip("#").strip() for line in reversed(lines[:at]) if line.startswith("#"))


def test_a_page_without_main_is_read_by_markdownify_and_a_marked_one_by_either(extract):
    readers = {page: extract(page).extractor for page in LAYOUTS}
    assert all(readers[page] == MARKDOWNIFY for page in WITHOUT_MAIN - {"news-article.html"})
    assert TRAFILATURA in readers.values()  # trafilatura still reads marked content where it keeps it whole


def test_the_issues_release_notes_page_by_trafilatura_alone_loses_what_it_keeps_here(extract):
    import trafilatura

    data = (PAGES / "release-notes.html").read_bytes()
    alone = trafilatura.extract(data, output_format="markdown", include_tables=True) or ""
    assert "## Supported platforms" not in alone  # what the issue found: the heading is lost
    kept = extract("release-notes.html").text
    assert "## Supported platforms" in kept and "About us" not in kept


def test_code_blocks_and_marker_lookalikes_stay_body_text():
    page = b"""<html><body><h1>Shell</h1><pre># not a heading
| not a row</pre><p>[Page 3]</p></body></html>"""
    text = DocumentExtractor(use_unstructured=False).extract(page, "p.html", "").text
    assert "\\# not a heading" in text and "\\| not a row" in text and "\\[Page 3]" in text
    assert [c.section for c in split_structural(text)] == ["Shell"]
