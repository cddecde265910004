"""The formats an upload may be: what each is called, the names and media types that claim it.

One list for everyone who says what is accepted: extraction believes a name or media type only
when the bytes agree (``extraction.detect``), the OpenAPI description and the ``knowledge upload``
help list it, and the ingest README's format table follows it (a test holds them together). The
format itself always comes from the bytes; a name outside this list is not refused for that."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Format:
    key: str  # Extracted.format
    label: str
    extensions: tuple[str, ...]
    media_types: tuple[str, ...] = ()


ACCEPTED: tuple[Format, ...] = (
    Format("pdf", "PDF", (".pdf",), ("application/pdf",)),
    Format("docx", "Word", (".docx",), ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",)),
    Format("doc", "Word 97-2003", (".doc",), ("application/msword",)),
    Format(
        "pptx",
        "PowerPoint",
        (".pptx",),
        ("application/vnd.openxmlformats-officedocument.presentationml.presentation",),
    ),
    Format("ppt", "PowerPoint 97-2003", (".ppt",), ("application/vnd.ms-powerpoint",)),
    Format("xlsx", "Excel", (".xlsx", ".xlsm"), ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",)),
    Format("xlsb", "Excel binary", (".xlsb",), ("application/vnd.ms-excel.sheet.binary.macroenabled.12",)),
    Format("xls", "Excel 97-2003", (".xls",), ("application/vnd.ms-excel",)),
    Format("odt", "OpenDocument text", (".odt",), ("application/vnd.oasis.opendocument.text",)),
    Format("odp", "OpenDocument presentation", (".odp",), ("application/vnd.oasis.opendocument.presentation",)),
    Format("ods", "OpenDocument spreadsheet", (".ods",), ("application/vnd.oasis.opendocument.spreadsheet",)),
    Format("rtf", "RTF", (".rtf",), ("application/rtf", "text/rtf")),
    Format("eml", "email", (".eml",), ("message/rfc822",)),
    Format("html", "web page", (".html", ".htm", ".xhtml"), ("text/html", "application/xhtml+xml")),
    Format("png", "PNG", (".png",), ("image/png",)),
    Format("jpeg", "JPEG", (".jpg", ".jpeg"), ("image/jpeg",)),
    Format("tiff", "TIFF", (".tif", ".tiff"), ("image/tiff",)),
    Format("webp", "WebP", (".webp",), ("image/webp",)),
    Format("bmp", "BMP", (".bmp",), ("image/bmp",)),
    Format("gif", "GIF", (".gif",), ("image/gif",)),
    # Text claims nothing: any bytes that are no other format's are read as text.
    Format("text", "text", (".txt", ".md", ".markdown", ".csv", ".json"), ("text/plain", "text/markdown")),
)


def accepted_extensions() -> list[str]:
    return [extension for fmt in ACCEPTED for extension in fmt.extensions]


def accepted_summary() -> str:
    """The formats in a sentence's words: "PDF, Word, ... and text"."""
    labels = [fmt.label for fmt in ACCEPTED]
    return ", ".join(labels[:-1]) + " and " + labels[-1]
