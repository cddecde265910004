"""The optional unstructured path: its elements become the same markers as the native path.

The conversion is tested with stand-in elements (unstructured is not in the default install);
the real partitioners (marked ``unstructured``) run where the extra is installed: ``make test``
runs them in ``.venv-unstructured`` (``make test-unstructured``) with
``KNOWLEDGE_TEST_UNSTRUCTURED=1``, where a path that is not usable fails instead of skipping; the
main venv skips them with the reason."""

from __future__ import annotations

import io
import os
import socket
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import docx
import pytest
from knowledge_ingest.domain.extraction import ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor, isolated, unstructured_path
from knowledge_ingest.extraction.isolated import IsolatedExtractor
from knowledge_ingest.extraction.markdown import TextSink
from knowledge_runtime.chunking import split_structural
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.extraction_child import report_preloaded

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Metadata:
    page_number: int | None = None
    category_depth: int | None = None
    text_as_html: str | None = None


@dataclass
class Element:
    category: str
    text: str = ""
    metadata: Metadata = field(default_factory=Metadata)


def write(elements: list[Element]) -> str:
    sink = TextSink(ExtractionLimits())
    unstructured_path.write_elements(elements, sink)
    return sink.text()


def test_elements_become_headings_pages_and_tables():
    table = "<table><tr><th>Region</th><th>Sales</th></tr><tr><td>North | East</td><td>1<br/>2</td></tr></table>"
    text = write(
        [
            Element("Header", "ACME Corp", Metadata(page_number=1)),
            Element("Title", "Annual report", Metadata(page_number=1, category_depth=0)),
            Element("NarrativeText", "Revenue grew.", Metadata(page_number=1)),
            Element("Title", "Figures", Metadata(page_number=1)),  # no depth: ##
            Element("FigureCaption", "Table 2: sales by region", Metadata(page_number=1)),
            Element("Table", "Region Sales North East 1 2", Metadata(page_number=1, text_as_html=table)),
            Element("PageBreak", "", Metadata(page_number=1)),
            Element("Title", "Outlook", Metadata(page_number=2, category_depth=2)),
            Element("ListItem", "Hire more", Metadata(page_number=2)),
            Element("UncategorizedText", "# looks like a heading", Metadata(page_number=2)),
        ]
    )
    assert text == (
        "[Page 1]\n\n# ACME Corp\n\n# Annual report\n\nRevenue grew.\n\n## Figures\n\n"
        "Table 2: sales by region\n\n| Region | Sales |\n| --- | --- |\n| North \\| East | 1<br>2 |\n\n"
        "[Page 2]\n\n### Outlook\n\n- Hire more\n\n\\# looks like a heading"
    )
    chunks = split_structural(text)
    assert [(c.section, c.page) for c in chunks] == [("Annual report", 1), ("Figures", 1), ("Outlook", 2)]
    assert chunks[1].content.startswith("## Figures\n\nTable 2: sales by region\n\n| Region |")


def test_a_table_without_html_keeps_its_text_and_elements_without_pages_get_no_marker():
    text = write([Element("Title", "Budget"), Element("Table", "a b c"), Element("NarrativeText", "After.")])
    assert text == "## Budget\n\na b c\n\nAfter."


def test_lone_surrogates_from_a_broken_font_map_do_not_reach_storage():
    text = write([Element("NarrativeText", "bad \ud835 glyph")])
    assert text == "bad ? glyph"
    text.encode("utf-8")


def test_html_table_conversion():
    assert unstructured_path.html_table("<table><tr><td>x</td></tr></table>") == "| x |\n| --- |"
    assert unstructured_path.html_table("no table") == ""


def test_the_native_path_is_used_when_unstructured_is_not_usable(monkeypatch):
    monkeypatch.setattr(unstructured_path, "partitioners", dict)
    document = docx.Document()
    document.add_heading("Native", 1)
    buffer = io.BytesIO()
    document.save(buffer)
    assert DocumentExtractor().extract(buffer.getvalue(), "n.docx", "").text == "# Native"


def test_a_failing_partitioner_falls_back_to_the_native_path(monkeypatch):
    def broken(stream):
        raise RuntimeError("spaCy model download failed")

    monkeypatch.setattr(unstructured_path, "partitioners", lambda: {"docx": broken})
    document = docx.Document()
    document.add_paragraph("still read")
    buffer = io.BytesIO()
    document.save(buffer)
    assert DocumentExtractor().extract(buffer.getvalue(), "n.docx", "").text == "still read"


# Where the optional path is installed (make test-unstructured) it must be usable: no skip there.
_REQUIRED = os.environ.get("KNOWLEDGE_TEST_UNSTRUCTURED") == "1"
_skip_without_it = pytest.mark.skipif(
    not _REQUIRED and "docx" not in unstructured_path.partitioners(),
    reason="the optional unstructured path is not installed (make test-unstructured runs these)",
)


def unstructured_test(test):
    """A test of the real partitioners: marked ``unstructured`` (what make test-unstructured selects)."""
    return pytest.mark.unstructured(_skip_without_it(test))


def requires_unstructured(test):
    """An ``unstructured_test`` run offline (no model or data downloaded on first use). Only for a
    test whose partitioning runs in this process: ``offline`` patches this process's sockets, not
    those of an extraction child."""
    return unstructured_test(pytest.mark.usefixtures("offline")(test))


@pytest.fixture
def offline(monkeypatch):
    """Records every network connection this process attempts (refused), and fails the test on one:
    unstructured downloads its spaCy model on first use and pings analytics unless told not to."""
    attempts = []
    connect = socket.socket.connect

    def refuse(self, address):
        if self.family == socket.AF_UNIX:  # the extraction child's fork server
            return connect(self, address)
        attempts.append(address)
        raise OSError("no network in this test")

    def resolve(host, *args, **kwargs):
        attempts.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    yield
    assert attempts == [], f"network connections attempted: {attempts}"


@requires_unstructured
def test_real_unstructured_docx_offline():
    document = docx.Document()
    document.add_heading("Benefits", 1)
    document.add_paragraph("Employees receive the following benefits every year.")
    table = document.add_table(rows=2, cols=2)
    for (r, c), value in {(0, 0): "Plan", (0, 1): "Days", (1, 0): "Standard", (1, 1): "25"}.items():
        table.cell(r, c).text = value
    buffer = io.BytesIO()
    document.save(buffer)
    result = DocumentExtractor(use_unstructured=True).extract(buffer.getvalue(), "b.docx", "")
    assert result.extractor == "unstructured"  # not the native fallback after a failure of it
    assert "# Benefits" in result.text
    assert "| Plan | Days |\n| --- | --- |\n| Standard | 25 |" in result.text


@requires_unstructured
def test_real_unstructured_pptx_offline():
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    slide.shapes.title.text = "Regional sales"
    shape = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    for (r, c), value in {(0, 0): "Region", (0, 1): "Sales", (1, 0): "North", (1, 1): "120"}.items():
        shape.table.cell(r, c).text = value
    buffer = io.BytesIO()
    deck.save(buffer)
    result = DocumentExtractor(use_unstructured=True).extract(buffer.getvalue(), "s.pptx", "")
    assert result.extractor == "unstructured"
    assert result.text.startswith("[Page 1]\n\n# Regional sales")
    assert "| Region | Sales |\n| --- | --- |\n| North | 120 |" in result.text
    assert result.page_count == 1


@unstructured_test  # the partitioning runs in the extraction child: not covered by `offline`
def test_the_service_child_reads_through_unstructured_when_it_is_installed():
    """The configuration the service runs: ingest's isolated extractor with its default (use it when
    usable) reads DOCX and PPTX through unstructured in its child, and says so; PDF stays native
    (the extra installs no PDF partitioner: that needs unstructured's own [pdf] extra)."""
    document = docx.Document()
    document.add_heading("Leave", 1)
    document.add_paragraph("Every employee has 25 days of leave.")
    buffer = io.BytesIO()
    document.save(buffer)
    result = IsolatedExtractor().extract(buffer.getvalue(), "leave.docx", "")
    assert result.extractor == "unstructured"
    assert result.text == "# Leave\n\nEvery employee has 25 days of leave."
    assert sorted(unstructured_path.partitioners()) == ["docx", "pptx"]


def pinned(requirement: str) -> tuple[str, str]:
    """The canonical name and the exact version of a ``name==version`` requirement."""
    parsed = Requirement(requirement)
    (specifier,) = parsed.specifier
    assert specifier.operator == "==", requirement
    return canonicalize_name(parsed.name), specifier.version


def pins(path: Path) -> dict[str, str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return dict(pinned(line) for line in filter(None, lines))


def test_the_optional_venv_pins_what_the_main_one_pins():
    """.venv-unstructured (constraints-unstructured.txt) runs the same versions of every package it
    shares with the main venv, but filelock (unstructured 0.27 needs filelock<4), and pins the extra."""
    main, optional = pins(ROOT / "constraints.txt"), pins(ROOT / "constraints-unstructured.txt")
    differ = {name: (main[name], version) for name, version in optional.items() if main.get(name, version) != version}
    assert set(differ) == {"filelock"}, differ
    extra = tomllib.loads((ROOT / "services/ingest/pyproject.toml").read_text())["project"]["optional-dependencies"]
    for requirement in extra["unstructured"]:
        name, version = pinned(requirement)
        assert optional[name] == version


@unstructured_test  # the loading runs in a fork-server child: not covered by `offline`
def test_the_fork_server_loads_the_optional_path_once_for_every_child():
    """Each file's child is forked with unstructured and its spaCy model already loaded (about 11 s
    per file when every child loaded them itself)."""
    receiver, sender = isolated._context.Pipe(duplex=False)
    child = isolated._context.Process(target=report_preloaded, args=(sender,), daemon=True)
    child.start()
    sender.close()
    try:
        assert receiver.poll(120)
        assert receiver.recv() == {"spacy": True, "partitioners": True}
    finally:
        child.join(10)
