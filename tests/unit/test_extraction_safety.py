"""Files that must not crash or hang extraction: each ends in a clear permanent error or in
``extractable=False``, with a message a person can act on and no document text in it."""

from __future__ import annotations

import io
import random
import time
import tracemalloc
import zipfile

import pytest
import xlsxwriter
from knowledge_ingest.domain.extraction import ExtractionFailed, ExtractionLimits
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_runtime.errors import InvalidArgument

from tests.support.documents import SECRET, a_docx, a_docx_lying_about_its_size, a_pdf


@pytest.fixture(scope="module")
def extractor() -> DocumentExtractor:
    return DocumentExtractor(use_unstructured=False)


def failure(extractor: DocumentExtractor, data: bytes, filename: str, mime_type: str = "") -> ExtractionFailed:
    with pytest.raises(ExtractionFailed) as caught:
        extractor.extract(data, filename, mime_type)
    error = caught.value
    assert isinstance(error, InvalidArgument) and error.code == "INVALID_ARGUMENT"
    assert SECRET not in error.message and SECRET not in str(error.metadata)
    return error


def test_encrypted_pdf_is_a_clear_permanent_error(extractor):
    error = failure(extractor, a_pdf(owner_password="owner", user_password="reader"), "locked.pdf")
    assert error.reason == "PDF_ENCRYPTED"
    assert "password" in error.message


def test_pdf_with_only_an_owner_password_is_read(extractor):
    result = extractor.extract(a_pdf(owner_password="owner"), "restricted.pdf", "")
    assert result.extractable and f"{SECRET} page 2" in result.text


def test_corrupt_pdf_is_a_clear_permanent_error(extractor):
    error = failure(extractor, b"%PDF-1.7\n" + random.Random(1).randbytes(3000), "broken.pdf")
    assert (error.reason, error.file_format) == ("FILE_CORRUPT", "pdf")
    assert error.message == "the PDF is damaged and cannot be read"


def test_empty_file_is_not_extractable(extractor):
    result = extractor.extract(b"", "empty.pdf", "application/pdf")
    assert (result.extractable, result.text, result.warnings) == (False, "", ("the file is empty",))


def test_whitespace_only_text_is_not_extractable(extractor):
    result = extractor.extract(b" \n\n\t \n", "blank.txt", "text/plain")
    assert (result.extractable, result.text) == (False, "")
    assert result.warnings == ("no text was found in the file",)


def test_binary_garbage_is_refused_as_unsupported(extractor):
    garbage = random.Random(7).randbytes(20_000)
    error = failure(extractor, garbage, "upload.bin")
    assert error.reason == "UNSUPPORTED_FORMAT"
    assert failure(extractor, garbage, "report.pdf", "application/pdf").reason == "FILE_CORRUPT"


def test_zip_bomb_docx_is_refused_before_parsing(extractor):
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(a_docx())) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            bomb.writestr(item, source.read(item))
        bomb.writestr("word/media/image1.png", bytes(48 * 1024 * 1024))  # 48 MiB of zeros, ~50 KB packed
    assert len(buffer.getvalue()) < 200_000
    error = failure(extractor, buffer.getvalue(), "bomb.docx")
    assert error.reason == "ARCHIVE_TOO_LARGE"
    assert "zip bomb" in error.message


def test_a_zip_bomb_lying_about_its_sizes_is_refused_by_counting_what_inflates(extractor):
    bomb = a_docx_lying_about_its_size(256 * 1024 * 1024)  # declares 1.6 KB, inflates to 256 MiB
    tracemalloc.start()
    started = time.monotonic()
    try:
        error = failure(extractor, bomb, "bomb.docx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (error.reason, error.message) == (
        "ARCHIVE_TOO_LARGE",
        "the document expands to more than its archive declares when unpacked (a zip bomb)",
    )
    assert time.monotonic() - started < 5 and peak < 16 * 1024 * 1024  # never inflated whole


def test_only_the_compression_office_files_use_is_inflated(extractor):
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(a_docx())) as source, zipfile.ZipFile(buffer, "w") as other:
        for item in source.infolist():  # bzip2 inflates without any bound on one call's output
            other.writestr(item.filename, source.read(item), compress_type=zipfile.ZIP_BZIP2)
    assert failure(extractor, buffer.getvalue(), "bzip2.docx").reason == "FILE_CORRUPT"


def test_archive_bounds_on_entries_and_total_size():
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(a_docx())) as source, zipfile.ZipFile(buffer, "w") as many:
        for item in source.infolist():
            many.writestr(item, source.read(item))
        for index in range(30):
            many.writestr(f"extra/part{index}.xml", "<a/>")
    few = DocumentExtractor(ExtractionLimits(max_archive_entries=20), use_unstructured=False)
    assert failure(few, buffer.getvalue(), "many.docx").reason == "ARCHIVE_TOO_LARGE"
    small = DocumentExtractor(ExtractionLimits(max_archive_uncompressed_bytes=10_000), use_unstructured=False)
    error = failure(small, a_docx(), "big.docx")
    assert (error.reason, error.message) == ("ARCHIVE_TOO_LARGE", "the document expands to more than 0 MiB")


def test_damaged_and_foreign_archives(extractor):
    assert failure(extractor, b"PK\x03\x04" + bytes(200), "x.docx").reason == "FILE_CORRUPT"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "hello")
    assert failure(extractor, buffer.getvalue(), "notes.zip").reason == "UNSUPPORTED_FORMAT"


def test_docx_with_broken_xml_is_corrupt(extractor):
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(a_docx()), "r") as source, zipfile.ZipFile(buffer, "w") as broken:
        for item in source.infolist():
            data = source.read(item)
            broken.writestr(item, data[: len(data) // 2] if item.filename == "word/document.xml" else data)
    assert failure(extractor, buffer.getvalue(), "broken.docx").reason == "FILE_CORRUPT"


def test_office_97_and_encrypted_office_files(extractor):
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)
    error = failure(extractor, ole, "old.pub", "application/x-mspublisher")  # no Word or PowerPoint stream
    assert error.reason == "UNSUPPORTED_FORMAT" and ".docx" in error.message
    locked = ole + "EncryptedPackage".encode("utf-16-le") + bytes(100)
    assert failure(extractor, locked, "locked.xlsx").reason == "FILE_ENCRYPTED"


@pytest.mark.parametrize("kind", ["pdf", "docx", "xlsx"])
def test_truncated_files_never_raise_anything_but_a_clear_error(extractor, kind):
    if kind == "pdf":
        whole = a_pdf(pages=3)
    elif kind == "docx":
        whole = a_docx()
    else:
        buffer = io.BytesIO()
        book = xlsxwriter.Workbook(buffer, {"in_memory": True})
        book.add_worksheet("S").write_row(0, 0, [SECRET, 1, 2])
        book.close()
        whole = buffer.getvalue()
    for cut in (16, len(whole) // 3, len(whole) // 2, len(whole) - 40):
        try:
            result = extractor.extract(whole[:cut], f"cut.{kind}", "")
        except ExtractionFailed as error:
            assert error.reason in {"FILE_CORRUPT", "UNSUPPORTED_FORMAT"}
            assert SECRET not in error.message
        else:
            assert result.extractable in (True, False)


def test_character_limit_cuts_the_text_and_warns():
    text = "\n".join(f"line {i} of the file" for i in range(2000)).encode()
    result = DocumentExtractor(ExtractionLimits(max_chars=1000), use_unstructured=False).extract(text, "a.txt", "")
    assert 900 < len(result.text) <= 1000 and result.text.endswith("of the file")
    assert result.warnings == ("the text was cut at 1,000 characters",)


def test_a_single_line_longer_than_the_limit_is_cut_at_a_space():
    result = DocumentExtractor(ExtractionLimits(max_chars=100), use_unstructured=False).extract(
        b"word " * 100, "one-line.txt", ""
    )
    assert result.extractable and 90 <= len(result.text) <= 100 and result.text.endswith("word")


def test_time_limit_stops_extraction_with_a_warning():
    result = DocumentExtractor(ExtractionLimits(max_seconds=1e-9), use_unstructured=False).extract(
        a_pdf(pages=5), "slow.pdf", ""
    )
    assert result.warnings[0] == "extraction stopped after 1e-09 seconds"
    assert result.page_count == 5


def test_limits_are_validated():
    with pytest.raises(ValueError, match="max_chars"):
        ExtractionLimits(max_chars=0)
