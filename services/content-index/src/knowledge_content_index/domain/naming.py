"""What a client's filename and MIME type may contribute to storage: a whitelisted extension.

A blob's file is ``<hex[:2]>/<hex><ext>``; the client's filename only ever chooses ``ext``, and
only from :data:`EXTENSIONS`. Separators of any platform, NUL bytes, dot tricks and absurd
lengths therefore cannot reach a path.
"""

from __future__ import annotations

import re

DEFAULT_MIME_TYPE = "application/octet-stream"

# Extensions a blob file may carry (lowercase, without the dot).
EXTENSIONS = frozenset(
    {
        "pdf",
        "doc",
        "docx",
        "docm",
        "dot",
        "dotx",
        "odt",
        "rtf",
        "epub",
        "ppt",
        "pptx",
        "pptm",
        "pps",
        "ppsx",
        "odp",
        "xls",
        "xlsx",
        "xlsm",
        "xlsb",
        "ods",
        "csv",
        "tsv",
        "txt",
        "text",
        "md",
        "markdown",
        "rst",
        "log",
        "html",
        "htm",
        "xhtml",
        "xml",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "eml",
        "msg",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "webp",
        "tif",
        "tiff",
        "bmp",
        "zip",
        "gz",
    }
)

MIME_EXTENSIONS = {
    "application/pdf": ".pdf",
    "application/msword": ".doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.oasis.opendocument.text": ".odt",
    "application/rtf": ".rtf",
    "application/epub+zip": ".epub",
    "application/vnd.ms-powerpoint": ".ppt",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.oasis.opendocument.presentation": ".odp",
    "application/vnd.ms-excel": ".xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.ms-excel.sheet.binary.macroenabled.12": ".xlsb",
    "application/vnd.oasis.opendocument.spreadsheet": ".ods",
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/html": ".html",
    "application/xhtml+xml": ".xhtml",
    "application/xml": ".xml",
    "text/xml": ".xml",
    "application/json": ".json",
    "message/rfc822": ".eml",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/tiff": ".tiff",
    "application/zip": ".zip",
    "application/gzip": ".gz",
}

# Long enough for any whitelisted extension after a separator; the rest of a name never matters.
_TAIL_CHARS = 64
_SEPARATORS = re.compile(r"[/\\\x00]")
_MIME_TOKEN = r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
_MIME = re.compile(f"{_MIME_TOKEN}/{_MIME_TOKEN}")


def normalise_mime_type(claimed: str) -> str:
    """``type/subtype`` in lowercase without parameters; the default for empty or malformed input."""
    value = claimed.split(";", 1)[0].strip().lower()
    return value if _MIME.fullmatch(value) else DEFAULT_MIME_TYPE


def filename_extension(filename: str) -> str:
    """``.ext`` when the name's last component ends in a whitelisted extension, else ``""``."""
    last = _SEPARATORS.split(filename[-_TAIL_CHARS:])[-1]
    stem, dot, extension = last.rpartition(".")
    extension = extension.lower()
    if dot and stem.strip(". ") and extension in EXTENSIONS:
        return "." + extension
    return ""


def safe_extension(filename: str, mime_type: str) -> str:
    """The extension of a blob's file: from the filename, else from the MIME type, else none."""
    return filename_extension(filename) or MIME_EXTENSIONS.get(normalise_mime_type(mime_type), "")
