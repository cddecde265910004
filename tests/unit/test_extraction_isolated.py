"""Extraction in a child process: the same results, the same clear errors, and a hard stop on
time and memory that costs the file, not the process."""

from __future__ import annotations

import io
import multiprocessing
import subprocess
import sys
import threading
import time

import docx
import pytest
from fpdf import FPDF
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.domain.extraction import (
    GIB,
    MAX_CHILD_MEMORY,
    MIN_CHILD_MEMORY,
    ExtractionFailed,
    ExtractionLimits,
    child_allowance,
)
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_ingest.extraction.isolated import IsolatedExtractor
from knowledge_runtime.settings import Env

from tests.support.documents import a_docx_lying_about_its_size


def handbook() -> bytes:
    document = docx.Document()
    document.add_heading("Leave", 1)
    table = document.add_table(rows=2, cols=2)
    for (r, c), value in {(0, 0): "Grade", (0, 1): "Days", (1, 0): "A", (1, 1): "25"}.items():
        table.cell(r, c).text = value
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_the_child_gives_what_extraction_in_process_gives(tmp_path):
    isolated = IsolatedExtractor(use_unstructured=False)
    expected = DocumentExtractor(use_unstructured=False).extract(handbook(), "h.docx", "")
    assert isolated.extract(handbook(), "h.docx", "") == expected
    path = tmp_path / "blob"
    path.write_bytes(handbook())
    assert isolated.extract(path, "h.docx", "") == expected
    assert multiprocessing.active_children() == []


def test_a_permanent_error_crosses_the_process_boundary_intact():
    pdf = FPDF()
    pdf.set_encryption(owner_password="owner", user_password="reader")
    pdf.add_page()
    with pytest.raises(ExtractionFailed) as caught:
        IsolatedExtractor(use_unstructured=False).extract(bytes(pdf.output()), "locked.pdf", "")
    assert (caught.value.reason, caught.value.file_format) == ("PDF_ENCRYPTED", "pdf")
    assert "password" in caught.value.message


def test_past_the_memory_allowance_the_file_fails_and_the_process_lives():
    isolated = IsolatedExtractor(memory_bytes=64 * 1024 * 1024, use_unstructured=False)
    with pytest.raises(ExtractionFailed) as caught:
        isolated.extract(b"many words " * 3_000_000, "huge.txt", "")
    assert caught.value.reason == "FILE_TOO_COMPLEX"
    assert IsolatedExtractor(use_unstructured=False).extract(b"small", "s.txt", "").text == "small"


def test_a_zip_bomb_lying_about_its_sizes_fails_fast_within_the_childs_memory_cap():
    # Read as the parser reads it, the bomb needs 256 MiB and more at once beside the child's own
    # ~250 MB; the count before any parser reads it needs a piece.
    isolated = IsolatedExtractor(memory_bytes=640 * 1024 * 1024, use_unstructured=False)
    bomb = a_docx_lying_about_its_size(256 * 1024 * 1024)
    started = time.monotonic()
    with pytest.raises(ExtractionFailed) as caught:
        isolated.extract(bomb, "bomb.docx", "")
    assert caught.value.reason == "ARCHIVE_TOO_LARGE" and "zip bomb" in caught.value.message
    assert time.monotonic() - started < 5
    assert multiprocessing.active_children() == []


def test_past_the_time_limit_the_child_is_killed():
    isolated = IsolatedExtractor(ExtractionLimits(), timeout_s=0.001, use_unstructured=False)
    with pytest.raises(ExtractionFailed) as caught:
        isolated.extract(b"many words " * 1_000_000, "slow.txt", "")
    assert caught.value.reason == "EXTRACTION_TIMEOUT"
    assert "0.001 seconds" in caught.value.message
    assert multiprocessing.active_children() == []


def test_the_hard_time_limit_defaults_to_the_soft_one_plus_a_minute():
    assert IsolatedExtractor(ExtractionLimits(max_seconds=30)).timeout_s == 90


def test_small_plain_text_and_markdown_are_read_without_a_child_under_the_same_limits(monkeypatch):
    from knowledge_ingest.extraction import isolated as module

    def no_child(*args, **kwargs):
        raise AssertionError("a child process was started")

    monkeypatch.setattr(module._context, "Process", no_child)
    limits = ExtractionLimits(max_chars=40)
    text = b"# Notes\n\n" + b"Plain words about the leave policy. " * 20
    expected = DocumentExtractor(limits, use_unstructured=False).extract(text, "notes.md", "text/markdown")
    assert IsolatedExtractor(limits, use_unstructured=False).extract(text, "notes.md", "text/markdown") == expected
    assert expected.warnings and len(expected.text) <= 60  # the limit cut it, in-process as in a child
    # a PDF, a claimed document format, or a large text still goes to a child
    for data, name in (
        (b"%PDF-1.7 not really", "a.pdf"),
        (b"text", "a.docx"),
        (b"word " * (module.IN_PROCESS_TEXT_BYTES // 5 + 1), "big.txt"),
    ):
        with pytest.raises(AssertionError, match="child process"):
            IsolatedExtractor(use_unstructured=False).extract(data, name, "")


def test_the_fork_server_starts_with_the_service_not_with_its_first_file():
    """``start`` (an on_start hook of ingest's app) runs the fork server before any file comes, so
    the first file's child does not wait for it to import the parsers."""
    probe = (
        "import asyncio, psutil\n"
        "from knowledge_ingest.extraction.isolated import IsolatedExtractor\n"
        "def servers():\n"
        "    return [c for c in psutil.Process().children() if 'forkserver' in ' '.join(c.cmdline())]\n"
        "before = len(servers())\n"
        "asyncio.run(IsolatedExtractor().start())\n"
        "asyncio.run(IsolatedExtractor().start())\n"
        "print(before, len(servers()))\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["0", "1"]


@pytest.mark.parametrize(
    ("budget", "workers", "children", "each"),
    [
        (6 * GIB, 4, 4, 1.5 * GIB),  # the default budget on two cores: a share per worker
        (6 * GIB, 2, 2, MAX_CHILD_MEMORY),  # a share is never past the cap of one child
        (6 * GIB, 16, 6, MIN_CHILD_MEMORY),  # too many workers for a useful share: fewer at once
        (512 * 1024**2, 4, 1, 512 * 1024**2),  # below the minimum: one child with all of it
        (6 * GIB, 0, 1, MAX_CHILD_MEMORY),  # a replica without workers still reads in one child
    ],
)
def test_the_memory_budget_is_shared_among_the_children(budget, workers, children, each):
    allowance = child_allowance(budget, workers)
    assert (allowance.children, allowance.memory_bytes) == (children, each)


def test_the_children_together_never_pass_the_budget_whatever_the_workers():
    for budget in (256 * 1024**2, GIB, 3 * GIB, 6 * GIB, 7 * GIB + 12345, 64 * GIB):
        for workers in range(70):
            allowance = child_allowance(budget, workers)
            assert allowance.children * allowance.memory_bytes <= budget, (budget, workers)
            assert 1 <= allowance.children <= max(workers, 1)
    with pytest.raises(ValueError):
        child_allowance(0, 4)


def test_the_budget_is_a_setting_and_by_default_four_uploads_stay_far_below_nine_gigabytes():
    default = IngestSettings.from_env(Env({"KNOWLEDGE_INGEST_WORKERS": "4"})).extraction_allowance()
    assert default.children * default.memory_bytes <= 6 * GIB < 9 * 10**9
    small = IngestSettings.from_env(
        Env({"KNOWLEDGE_INGEST_WORKERS": "4", "KNOWLEDGE_EXTRACTION_MEMORY_BUDGET_BYTES": str(2 * GIB)})
    ).extraction_allowance()
    assert (small.children, small.memory_bytes) == (2, GIB)


def test_no_more_children_run_at_once_than_the_allowance():
    isolated = IsolatedExtractor(use_unstructured=False, children=1)
    most, done = 0, threading.Event()

    def watch() -> None:
        nonlocal most
        while not done.is_set():
            most = max(most, len(multiprocessing.active_children()))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    readers = [
        threading.Thread(target=isolated.extract, args=(b"many words " * 400_000, f"{n}.txt", "")) for n in range(3)
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    done.set()
    watcher.join()
    assert most == 1
