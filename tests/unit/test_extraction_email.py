"""Email (.eml) composed with the standard library: subject, header block, body, attachments read
by their own readers, and the limits counted over the whole message."""

from __future__ import annotations

import time

import pytest
from knowledge_ingest.domain.extraction import ExtractionFailed, ExtractionLimits
from knowledge_ingest.domain.metadata import MAX_VALUE_BYTES, check_metadata
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_ingest.extraction.detect import plain_text
from knowledge_ingest.extraction.isolated import IsolatedExtractor
from knowledge_ingest.extraction.mail import MAX_ATTACHMENTS, email_metadata, header_fields
from knowledge_runtime.chunking import split_structural

from tests.support.documents import regions_report, word_document, zip_bomb_docx
from tests.support.formats import DOCX, PUMPS, RESERVOIR, an_email, image_file, text_image


@pytest.fixture(scope="module")
def extract():
    extractor = DocumentExtractor(use_unstructured=False)
    return lambda data, filename="message.eml", mime_type="": extractor.extract(data, filename, mime_type)


def test_subject_header_block_and_body(extract):
    result = extract(an_email("Hello team,\n\n# not a heading\nThe report follows.\n"))
    assert (result.format, result.page_count, result.extractor) == ("eml", None, "email")
    assert result.text == (
        "# Pump inspection résumé\n\n"
        "From: Amira Okafor <amira@example.org>\n"
        "To: Operations <ops@example.org>, Bo Lind <bo@example.org>\n"
        "Cc: Audit <audit@example.org>\n"
        "Date: Tue, 01 Dec 2026 10:00:00 +0000\n\n"
        "Hello team,\n\n\\# not a heading\nThe report follows."
    )
    assert [c.section for c in split_structural(result.text)] == ["Pump inspection résumé"]


def test_the_header_fields_are_one_dictionary_to_hand_on():
    import email
    import email.policy

    message = email.message_from_bytes(an_email(), policy=email.policy.default)
    assert header_fields(message) == {
        "Subject": "Pump inspection résumé",
        "From": "Amira Okafor <amira@example.org>",
        "To": "Operations <ops@example.org>, Bo Lind <bo@example.org>",
        "Cc": "Audit <audit@example.org>",
        "Date": "Tue, 01 Dec 2026 10:00:00 +0000",
    }


EMAIL_METADATA = {
    "email_subject": "Pump inspection résumé",
    "email_from": "Amira Okafor <amira@example.org>",
    "email_to": "Operations <ops@example.org>, Bo Lind <bo@example.org>",
    "email_cc": "Audit <audit@example.org>",
    "email_date": "2026-12-01T10:00:00Z",
}


def test_the_header_fields_are_the_documents_metadata_across_the_child_boundary(extract):
    assert extract(an_email()).metadata == EMAIL_METADATA
    assert check_metadata(EMAIL_METADATA) == EMAIL_METADATA  # keys and values a caller could send
    assert IsolatedExtractor(use_unstructured=False).extract(an_email(), "m.eml", "").metadata == EMAIL_METADATA
    assert extract(b"Plain words.", "notes.txt").metadata == {}


def test_an_attached_messages_headers_are_not_the_documents(extract):
    inner = an_email("Inner.", subject="Forwarded notes")
    assert extract(an_email(attachments=[("notes.eml", "message/rfc822", inner)])).metadata == EMAIL_METADATA


def test_email_metadata_dates_in_utc_unreadable_dates_left_out_and_long_values_cut():
    assert email_metadata({"Date": "Tue, 01 Dec 2026 10:00:00 +0200"}) == {"email_date": "2026-12-01T08:00:00Z"}
    assert email_metadata({"Date": "Tue, 01 Dec 2026 10:00:00 -0000"}) == {"email_date": "2026-12-01T10:00:00Z"}
    assert email_metadata({"Date": "next Tuesday", "Subject": ""}) == {}
    to = ", ".join(f"Person {n} <p{n}@exämple.org>" for n in range(200))
    cut = email_metadata({"To": to})["email_to"]
    assert to.startswith(cut) and len(cut) > 900 and check_metadata({"email_to": cut})
    assert len(f'"{cut}"'.encode()) <= MAX_VALUE_BYTES


def test_an_html_only_body_is_read_by_the_web_reader(extract):
    html = "<html><body><h2>Agenda</h2><ul><li>Valves</li><li>Seals</li></ul></body></html>"
    result = extract(an_email(plain=False, html=html))
    assert "Agenda" in result.text and "Valves" in result.text and "<li>" not in result.text


def test_a_plain_body_is_preferred_to_its_html_alternative(extract):
    result = extract(an_email("Plain words.", html="<p>HTML words.</p>"))
    assert "Plain words." in result.text and "HTML words" not in result.text


def test_attachments_are_read_by_their_readers_as_sections(extract):
    result = extract(
        an_email(
            attachments=[
                ("regions.pdf", "application/pdf", regions_report()),
                ("handbook.docx", DOCX, word_document()),
                ("notice.png", "image/png", image_file(text_image([PUMPS]), "PNG")),
            ]
        )
    )
    text = result.text
    assert "## Attachment: handbook.docx" in text and "| Grade | Days | Note |" in text
    assert "| Zanzibar | 4,250 | Amira Okafor |" in text
    chunks = split_structural(text)
    # the body and the attachments without pages have none; the PDF's pages are its own
    assert all(c.page is None for c in chunks if RESERVOIR in c.content or "Grade" in c.content)
    assert [c.page for c in chunks if "Zanzibar | 4,250" in c.content] == [2]
    assert [c.page for c in chunks if PUMPS in c.content] == [1]  # the image: one page, read by OCR
    assert result.ocr_page_count == 1 and result.ocr_confidence > 80
    assert result.extractor.startswith("email; OCR (tesseract") and result.extractor.endswith("of its attachments")
    assert "attachment notice.png: 1 page(s) read by OCR" in " ".join(result.warnings)


def test_an_unreadable_attachment_is_a_warning_and_the_rest_is_kept(extract):
    result = extract(
        an_email(
            attachments=[
                ("bomb.docx", DOCX, zip_bomb_docx()),
                ("data.bin", "application/octet-stream", bytes(range(256)) * 40),
                ("handbook.docx", DOCX, word_document()),
            ]
        )
    )
    assert RESERVOIR in result.text and "| Grade | Days | Note |" in result.text
    assert "bomb.docx" not in result.text.replace("## Attachment: handbook.docx", "")
    assert any(w.startswith("attachment bomb.docx:") and "zip bomb" in w for w in result.warnings)
    assert any(w.startswith("attachment data.bin:") for w in result.warnings)


def test_five_hundred_attachments_are_read_up_to_the_cap_with_a_warning(extract):
    attachments = [(f"note-{n}.txt", "text/plain", f"Note number {n} of the audit.".encode()) for n in range(500)]
    started = time.monotonic()
    result = extract(an_email(attachments=attachments))
    assert time.monotonic() - started < 30
    assert f"only the first {MAX_ATTACHMENTS} of 500 attachments were read" in result.warnings
    assert f"## Attachment: note-{MAX_ATTACHMENTS - 1}.txt" in result.text
    assert f"note-{MAX_ATTACHMENTS}.txt" not in result.text


def test_the_limits_count_over_the_whole_message():
    attachments = [(f"part-{n}.txt", "text/plain", (f"Paragraph {n}. " * 50).encode()) for n in range(10)]
    extractor = DocumentExtractor(ExtractionLimits(max_chars=3_000), use_unstructured=False)
    result = extractor.extract(an_email(attachments=attachments), "m.eml", "")
    assert len(result.text) <= 3_000
    assert "the text was cut at 3,000 characters" in result.warnings


def test_an_attached_message_is_read_nested(extract):
    inner = an_email("The inner message mentions the reservoir.", subject="Forwarded notes")
    result = extract(an_email(attachments=[("notes.eml", "message/rfc822", inner)]))
    assert "## Attachment: notes.eml" in result.text and "# Forwarded notes" in result.text
    assert "The inner message mentions the reservoir." in result.text


def test_an_email_is_known_by_its_headers_and_an_mbox_is_refused(extract):
    assert extract(an_email(), "upload.txt", "text/plain").format == "eml"
    assert not plain_text(an_email()[:1024], "upload.txt", "")  # read in the isolated child
    assert extract(b"Note: bring the keys.\nThe reservoir opens at nine.", "note.txt").format == "text"
    mbox = b"From amira@example.org Tue Dec  1 10:00:00 2026\n" + an_email() + b"\n"
    with pytest.raises(ExtractionFailed) as refused:
        extract(mbox, "archive")
    assert refused.value.reason == "UNSUPPORTED_FORMAT" and ".eml" in refused.value.message
