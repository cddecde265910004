"""A PDF's pages read by pdfium, and those that draw a ruled table by pypdf, forked helpers reading
part of those on other cores when there are many: the same text, warnings and limits as one
process reading them all, whatever a helper does (fails, dies, is too slow), and no helper holds
anything of the child's or outlives the reading."""

from __future__ import annotations

import os
import time

import psutil
import pytest
from fpdf import FPDF
from knowledge_ingest.domain.extraction import ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor, pdf
from knowledge_ingest.extraction.forked import Helper

from tests.support.documents import LINE, ruled_table

PAGES = 40


def long_pdf() -> bytes:
    """Every page a chapter; all but every fifth one also draws a ruled table (read by pypdf)."""
    document = FPDF()
    for page in range(1, PAGES + 1):
        document.add_page()
        document.set_font("helvetica", "B", 18)
        document.cell(0, 10, f"Chapter {page}: valve {page * 7 % 13}", **LINE)
        document.set_font("helvetica", size=11)
        document.multi_cell(0, 5, f"Procedure {page} checks valve {page * 3} and logs the pressure. " * 12, **LINE)
        if page % 5:
            ruled_table(document, [["Valve", "Pressure"], [f"V{page}", f"{page * 11} kPa"], ["V0", "0 kPa"]])
    return bytes(document.output())


RULED_PAGES = PAGES - PAGES // 5


def read(data: bytes | str, limits: ExtractionLimits | None = None):
    return DocumentExtractor(limits or ExtractionLimits(), use_unstructured=False).extract_quietly(
        data, "manual.pdf", "application/pdf"
    )


@pytest.fixture
def one_process(monkeypatch):
    """Reading as before helpers: every page in this process."""

    def run(data: bytes | str, limits: ExtractionLimits | None = None):
        with monkeypatch.context() as patch:
            patch.setattr(pdf, "PARALLEL_MIN_PAGES", 10**9)
            return read(data, limits)

    return run


@pytest.fixture
def helpers(monkeypatch):
    """The helpers created, as they are made (the real ones, counted)."""
    made: list[Helper] = []

    class Counted(Helper):
        def __init__(self, work):
            made.append(self)
            super().__init__(work)

    monkeypatch.setattr(pdf, "Helper", Counted)
    monkeypatch.setattr(pdf, "usable_cores", lambda: 2)  # two readers, whatever the machine
    return made


@pytest.mark.parametrize("source", ["bytes", "file"])
def test_helpers_read_the_same_text_as_one_process(one_process, helpers, tmp_path, source):
    data = long_pdf()
    path = tmp_path / "manual.pdf"
    path.write_bytes(data)
    given = data if source == "bytes" else str(path)
    alone = one_process(given)
    assert helpers == []
    together = read(given)
    assert len(helpers) == 1  # the second half of the pages read by a helper
    assert (together.text, together.warnings, together.page_count) == (alone.text, alone.warnings, PAGES)
    assert "[Page 40]" in together.text and "# Chapter 40: valve 7" in together.text
    assert together.text.count("| Valve | Pressure |") == RULED_PAGES and "| V39 | 429 kPa |" in together.text


def test_pages_without_a_ruled_table_are_read_by_pdfium_the_others_by_pypdf(monkeypatch):
    read_by_pypdf: list[int] = []
    real = pdf._read_page

    def counted(reader, index):
        read_by_pypdf.append(index)
        return real(reader, index)

    monkeypatch.setattr(pdf, "_read_page", counted)
    monkeypatch.setattr(pdf, "PARALLEL_MIN_PAGES", 10**9)  # every pypdf page read in this process
    result = read(long_pdf())
    assert read_by_pypdf == [index for index in range(PAGES) if (index + 1) % 5]
    assert result.text.index("# Chapter 5: valve 9") < result.text.index("# Chapter 6: valve 3")  # in page order


def test_few_pages_for_pypdf_are_read_in_one_process(helpers):
    document = FPDF()
    document.set_font("helvetica", size=11)
    for page in range(pdf.PARALLEL_MIN_PAGES * 2):
        document.add_page()
        document.cell(0, 6, "a page", **LINE)
        if page < pdf.PARALLEL_MIN_PAGES - 1:
            ruled_table(document, [["a", "b"], ["1", "2"], ["3", "4"]])
    read(bytes(document.output()))
    assert helpers == []


@pytest.mark.parametrize("failure", ["raises", "dies", "hangs"])
def test_a_helper_that_fails_has_its_pages_read_here(one_process, helpers, monkeypatch, failure):
    real = pdf._read_part

    def failing(reader, stream, sink, part):  # runs in the helper (forked after the patch)
        if failure == "raises":
            raise RuntimeError("a reader bug")
        if failure == "dies":
            os._exit(3)
        time.sleep(60)
        return real(reader, stream, sink, part)

    monkeypatch.setattr(pdf, "_read_part", failing)
    monkeypatch.setattr(pdf, "HELPER_GRACE_S", 0.5)
    data = long_pdf()
    alone = one_process(data)
    limits = ExtractionLimits(max_seconds=2) if failure == "hangs" else None
    started = time.monotonic()
    together = read(data, limits)
    if failure == "hangs":  # not waited for past the time limit (and the grace): the time limit's cut
        assert time.monotonic() - started < 2 + 0.5 + 1.5
        assert "extraction stopped after 2 seconds" in together.warnings
    else:
        assert (together.text, together.warnings) == (alone.text, alone.warnings)
    assert len(helpers) == 1


def test_the_character_limit_cuts_where_one_process_would(one_process, helpers):
    limits = ExtractionLimits(max_chars=4_000)
    alone, together = one_process(long_pdf(), limits), read(long_pdf(), limits)
    assert (together.text, together.warnings) == (alone.text, alone.warnings)
    assert together.warnings == ("the text was cut at 4,000 characters",)


def test_no_helper_outlives_the_reading():
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    read(long_pdf())
    time.sleep(0.1)
    assert {child.pid for child in psutil.Process().children(recursive=True)} - before == set()


def test_a_helper_holds_no_descriptor_of_its_parent_but_its_own_pipe():
    inherited_read, inherited_write = os.pipe()  # stands for the child's pipe to ingest
    try:
        helper = Helper(lambda: sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
        held = helper.result(10)
    finally:
        os.close(inherited_read)
        os.close(inherited_write)
    assert held is not None and inherited_read not in held and inherited_write not in held
    assert len([fd for fd in held if fd > 2]) == 2  # its pipe, and the listing's own directory


def test_a_helper_result_comes_back_and_one_too_slow_is_killed():
    assert Helper(lambda: {"pages": [1, 2, 3]}).result(10) == {"pages": [1, 2, 3]}
    slow = Helper(lambda: time.sleep(60))
    pid = slow._pid
    assert slow.result(0.2) is None
    assert not psutil.pid_exists(pid)
