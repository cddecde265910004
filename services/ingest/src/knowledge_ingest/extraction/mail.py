"""Email (``.eml``: RFC 5322 and MIME) through the standard library's ``email`` package: the
subject as the title (``#``), From, To, Cc and Date as a header block, the text/plain body (the
text/html one through the web reader when there is no plain one), then each attachment read by
its own reader under ``## Attachment: name``.

The whole message is one file for the limits: its attachments share its characters, its
deadline and its OCR page budget, and at most ``MAX_ATTACHMENTS`` are read (a warning names how
many were not). An attachment that cannot be read (unsupported, damaged, a zip bomb) is a
warning: the message and its other attachments are kept. An attachment with pages (a PDF)
writes its own ``[Page N]`` markers; since a page marker holds until the next one, attachments
with pages are written after those without, so no page number leaks onto an attachment that has
none. An mbox file (many messages) is refused by ``detect``."""

from __future__ import annotations

import email
import email.policy
import email.utils
from collections.abc import Callable, Mapping
from datetime import UTC
from email.message import EmailMessage, Message
from typing import BinaryIO

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.domain.metadata import fitted_value
from knowledge_ingest.extraction.markdown import LimitReached, TextSink, one_line

MAX_ATTACHMENTS = 50  # read per message; a message with more keeps its first ones and a warning
MAX_MESSAGE_DEPTH = 3  # a message attached to a message attached to ...: deeper ones are skipped
HEADER_FIELDS = ("From", "To", "Cc", "Date")
# The header fields as the document's metadata keys (``metadata.email_from = "..."`` in a filter).
METADATA_KEYS = {
    "Subject": "email_subject",
    "From": "email_from",
    "To": "email_to",
    "Cc": "email_cc",
    "Date": "email_date",
}

# Reads an attachment's bytes (its name and media type as claims) into the sink given; raises
# ExtractionFailed when it cannot. The extractor's, so that every format has one dispatcher.
ReadAttachment = Callable[[bytes, str, str, TextSink], None]


def extract_eml(stream: BinaryIO, sink: TextSink, read_attachment: ReadAttachment) -> None:
    message = email.message_from_binary_file(stream, policy=email.policy.default)
    if not isinstance(message, EmailMessage) or message.defects and not message.keys():
        raise ExtractionFailed(
            "the email is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format="eml"
        )
    fields = header_fields(message)
    sink.metadata.update(email_metadata(fields))  # this message's own: an attached one reads into its part
    sink.heading(1, fields.get("Subject") or "(no subject)")
    sink.paragraph("\n".join(f"{name}: {fields[name]}" for name in HEADER_FIELDS if fields.get(name)))
    _body(message, sink, read_attachment)
    _attachments(message, sink, read_attachment)


def header_fields(message: Message) -> dict[str, str]:
    """Subject, From, To, Cc and Date as a person reads them (encoded words decoded, addresses
    as written), each present one once: the message's metadata, in one place to hand on."""
    fields: dict[str, str] = {}
    for name in ("Subject", *HEADER_FIELDS):
        try:
            value = message.get(name)
        except (ValueError, TypeError, IndexError):  # a header the parser cannot make sense of
            value = None
        if value is not None and one_line(str(value)):
            fields[name] = one_line(str(value))
    return fields


def email_metadata(fields: Mapping[str, str]) -> dict[str, str]:
    """``header_fields`` as document metadata: each under its ``METADATA_KEYS`` key, cut to a
    metadata value's size; the date as an RFC 3339 time in UTC (a filter compares those as
    times), left out when it cannot be read as one."""
    metadata: dict[str, str] = {}
    for name, key in METADATA_KEYS.items():
        value = fields.get(name)
        if value and name == "Date":
            value = _rfc3339(value)
        if value:
            metadata[key] = fitted_value(value)
    return metadata


def _rfc3339(value: str) -> str | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": the time is UTC, where the sender was is unknown
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _body(message: EmailMessage, sink: TextSink, read_attachment: ReadAttachment) -> None:
    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        return
    try:
        content = body.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset or a broken encoding
        payload = body.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return
    if body.get_content_subtype() == "html":
        read_attachment(content.encode("utf-8"), "body.html", "text/html", sink)
    else:
        sink.paragraph(content)


def _attachments(message: EmailMessage, sink: TextSink, read_attachment: ReadAttachment) -> None:
    parts = list(message.iter_attachments())
    if len(parts) > MAX_ATTACHMENTS:
        sink.warnings.append(f"only the first {MAX_ATTACHMENTS} of {len(parts):,} attachments were read")
    read: list[tuple[str, TextSink]] = []
    for number, part in enumerate(parts[:MAX_ATTACHMENTS], start=1):
        sink.check_time()
        name = one_line(part.get_filename() or "") or f"attachment {number}"
        data = _payload(part)
        if data is None:
            continue
        piece = sink.part()
        try:
            read_attachment(data, name, part.get_content_type(), piece)
        except ExtractionFailed as error:
            sink.warnings.append(f"attachment {name}: {error.message}")
            continue
        except LimitReached as stop:  # what it read so far is kept; the limit holds for the rest
            piece.warnings.append(stop.warning)
            read.append((name, piece))
            break
        finally:
            sink.warnings.extend(f"attachment {name}: {warning}" for warning in piece.warnings)
        read.append((name, piece))
    # Attachments without pages first: a page marker holds until the next one.
    for name, piece in sorted(read, key=lambda item: item[1].has_pages()):
        sink.heading(2, f"Attachment: {name}")
        sink.add(piece.text())


def _payload(part: EmailMessage) -> bytes | None:
    """The attachment's bytes; an attached message as its own bytes."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        if isinstance(inner, list) and inner and isinstance(inner[0], Message):
            return inner[0].as_bytes(policy=email.policy.default)
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else None
