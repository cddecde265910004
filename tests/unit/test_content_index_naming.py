"""A client's filename and MIME type only ever choose a whitelisted extension."""

import pytest
from knowledge_content_index.domain.naming import (
    DEFAULT_MIME_TYPE,
    EXTENSIONS,
    MIME_EXTENSIONS,
    filename_extension,
    normalise_mime_type,
    safe_extension,
)


@pytest.mark.parametrize(
    ("filename", "extension"),
    [
        ("report.pdf", ".pdf"),
        ("Report.Final.PDF", ".pdf"),
        ("../../etc/passwd", ""),
        ("../../../outside/evil.docx", ".docx"),
        ("a/b\\c", ""),
        ("a\\b\\c.xlsx", ".xlsx"),
        ("evil.exe\x00.pdf", ""),
        ("evil\x00.pdf", ""),
        ("x" * 10_240, ""),
        ("x" * 10_240 + ".pptx", ".pptx"),
        (".pdf", ""),
        ("..pdf", ""),
        ("...", ""),
        ("", ""),
        ("script.sh", ""),
        ("archive.tar.gz", ".gz"),
        ("name.pdf ", ""),
        ("name.p/df", ""),
        ("résumé.TXT", ".txt"),
    ],
)
def test_filenames_yield_only_whitelisted_extensions(filename, extension):
    assert filename_extension(filename) == extension


def test_the_mime_type_picks_the_extension_when_the_name_has_none():
    assert safe_extension("upload", "application/pdf") == ".pdf"
    assert safe_extension("notes.md", "application/pdf") == ".md"
    assert safe_extension("../../x", "text/plain; charset=utf-8") == ".txt"
    assert safe_extension("x", "application/x-unknown") == ""


@pytest.mark.parametrize(
    ("claimed", "stored"),
    [
        ("application/pdf", "application/pdf"),
        ("Text/Plain; charset=UTF-8", "text/plain"),
        ("", DEFAULT_MIME_TYPE),
        ("pdf", DEFAULT_MIME_TYPE),
        ("text/plain\x00evil", DEFAULT_MIME_TYPE),
        ("a/b/c", DEFAULT_MIME_TYPE),
        ("text/" + "x" * 500, DEFAULT_MIME_TYPE),
        (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
    ],
)
def test_mime_types_are_normalised_or_defaulted(claimed, stored):
    assert normalise_mime_type(claimed) == stored


def test_every_mime_extension_is_whitelisted_and_safe():
    assert all(ext.startswith(".") and ext[1:] in EXTENSIONS for ext in MIME_EXTENSIONS.values())
    assert all(e.isascii() and e.isalnum() and e == e.lower() and len(e) <= 10 for e in EXTENSIONS)
