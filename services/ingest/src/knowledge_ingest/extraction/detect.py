"""Which format a file is: its bytes first, then its name and media type, never the name alone.

Also the archive guard: OOXML files (DOCX, PPTX, XLSX, XLSB) and OpenDocument files (ODT, ODP,
ODS) are zip archives, and a zip
bomb is refused before any parser inflates it: first from its directory, then by inflating every
entry once, counting, in small pieces (``check_inflation``), since the directory's sizes can lie.
"""

from __future__ import annotations

import re
import struct
import zipfile
import zlib
from typing import BinaryIO

from knowledge_ingest.domain.extraction import ExtractionFailed, ExtractionLimits
from knowledge_ingest.domain.formats import ACCEPTED

_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP_HEADS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
# An encrypted OOXML file is an OLE container holding this stream (the name in UTF-16LE).
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
# The streams that make an OLE container a Word or PowerPoint 97-2003 file (names in UTF-16LE).
_WORD_STREAM = "WordDocument".encode("utf-16-le")
_POWERPOINT_STREAM = "PowerPoint Document".encode("utf-16-le")

_OOXML_PARTS = {
    "word/document.xml": "docx",
    "ppt/presentation.xml": "pptx",
    "xl/workbook.xml": "xlsx",
    "xl/workbook.bin": "xlsb",
}
_ODF_TYPES = {  # an OpenDocument zip's first entry, "mimetype", says which it is (templates alike)
    b"application/vnd.oasis.opendocument.text": "odt",
    b"application/vnd.oasis.opendocument.text-template": "odt",
    b"application/vnd.oasis.opendocument.presentation": "odp",
    b"application/vnd.oasis.opendocument.presentation-template": "odp",
    b"application/vnd.oasis.opendocument.spreadsheet": "ods",
    b"application/vnd.oasis.opendocument.spreadsheet-template": "ods",
}
_ODF_SMALL_PART = 1 << 20  # the mimetype and manifest entries are read whole only up to this size
# What a name or media type says; only believed when the bytes agree. Text claims nothing (any
# bytes no other format's are text); an mbox is claimed only to be refused clearly.
_CLAIMS = {
    **{claim: fmt.key for fmt in ACCEPTED if fmt.key != "text" for claim in (*fmt.extensions, *fmt.media_types)},
    ".mbox": "mbox",
    "application/mbox": "mbox",
}
_HTML_STARTS = (b"<!doctype html", b"<html")
# Formats known by their first bytes alone. BMP's two letters are also checked against the size of
# the header that follows them (``_sniff``).
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"II+\x00", "tiff"),  # BigTIFF
    (b"MM\x00+", "tiff"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"{\\rtf", "rtf"),
)
_BMP_HEADER_SIZES = (12, 40, 52, 56, 64, 108, 124)
# An email's first lines are header fields; these are the ones that tell a message from a text
# that happens to start with "Note: ...": at least ``_MAIL_FIELDS_NEEDED`` of them.
_MAIL_FIELDS = frozenset(
    {"from", "to", "cc", "subject", "date", "message-id", "mime-version", "received", "return-path", "delivered-to"}
)
_MAIL_FIELDS_NEEDED = 3
_HEADER_LINE = re.compile(rb"^([A-Za-z][A-Za-z0-9-]*):[ \t]?")
_MBOX_FROM = re.compile(rb"^From \S+ +\S.*\d\d:\d\d(:\d\d)?.*\d{4}\s*$")
IMAGE_FORMATS = frozenset({"png", "jpeg", "tiff", "webp", "bmp", "gif"})
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then the name's and the extra field's lengths
_INFLATE_PIECE = 1 << 20  # compressed bytes read, and inflated bytes made, at a time
_NAMES = {fmt.key: fmt.label for fmt in ACCEPTED if fmt.key not in ("text", "html", "eml", "rtf")}


def claimed_format(filename: str, mime_type: str) -> str | None:
    """The format the name or the media type claims, the media type first when both do."""
    mime = mime_type.split(";", 1)[0].strip().lower()
    dot = filename.rfind(".")
    extension = filename[dot:].lower() if dot >= 0 else ""
    return _CLAIMS.get(mime) or _CLAIMS.get(extension)


def plain_text(head: bytes, filename: str, mime_type: str) -> bool:
    """What ``detect_format`` reads as text without opening any container: no PDF header, no zip
    or OLE container, no other format's signature, and neither the name nor the media type claims
    a document format."""
    return (
        b"%PDF-" not in head
        and not head.startswith(_ZIP_HEADS)
        and not head.startswith(_OLE)
        and _sniff(head) is None
        and claimed_format(filename, mime_type) is None
    )


def _sniff(head: bytes) -> str | None:
    """The format the first bytes alone say, for the formats that have a signature."""
    for magic, fmt in _MAGIC:
        if head.startswith(magic):
            return fmt
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "webp"
    if head.startswith(b"BM") and len(head) >= 18 and struct.unpack_from("<I", head, 14)[0] in _BMP_HEADER_SIZES:
        return "bmp"
    return _mail(head)


def _mail(head: bytes) -> str | None:
    """ "eml" for a message's header block, "mbox" for a mailbox's first ``From `` line."""
    lines = head.lstrip(b"\xef\xbb\xbf").replace(b"\r\n", b"\n").split(b"\n")
    if _MBOX_FROM.match(lines[0]):
        return "mbox"
    names: set[str] = set()
    for line in lines[:-1]:  # the last may be cut short
        if not line.strip():
            break
        if line[:1] in (b" ", b"\t"):  # a folded header's continuation
            continue
        match = _HEADER_LINE.match(line)
        if match is None:
            return None
        names.add(match.group(1).decode("ascii").lower())
    return "eml" if len(names & _MAIL_FIELDS) >= _MAIL_FIELDS_NEEDED else None


def detect_format(stream: BinaryIO, filename: str, mime_type: str, limits: ExtractionLimits) -> str:
    """One of ``Extracted.format``'s values, or ExtractionFailed (unsupported, encrypted, bomb)."""
    stream.seek(0)
    head = stream.read(1024)
    stream.seek(0)
    claim = claimed_format(filename, mime_type)
    at = head.find(b"%PDF-")
    if at == 0 or (at > 0 and claim == "pdf"):  # a PDF header may follow a little junk
        return "pdf"
    if head.startswith(_ZIP_HEADS):
        return _zip_format(stream, claim, limits)
    if head.startswith(_OLE):
        return _ole_format(stream, claim)
    sniffed = _sniff(head)
    if sniffed == "mbox" or (sniffed is None and claim == "mbox"):
        raise ExtractionFailed(
            "mbox files hold many messages; save each message as an .eml file and upload those",
            reason=ExtractionFailed.UNSUPPORTED_FORMAT,
            file_format="mbox",
        )
    if sniffed is not None:
        return sniffed
    if claim == "eml" and _HEADER_LINE.match(head):  # named a message: fewer header fields will do
        return "eml"
    if claim in _NAMES and _looks_binary(head):
        raise ExtractionFailed(
            f"the file is not a valid {_NAMES[claim]} file", reason=ExtractionFailed.FILE_CORRUPT, file_format=claim
        )
    if _looks_html(head, claim):
        return "html"
    return "text"


def _looks_html(head: bytes, claim: str | None) -> bool:
    """A page that says it is HTML (doctype or root element), or is named or typed so and
    starts with markup; ``<?xml`` only with such a claim (XHTML)."""
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith(_HTML_STARTS):
        return True
    return claim == "html" and start.startswith(b"<") and not _looks_binary(head)


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    controls = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13))
    return controls / len(head) > 0.1


def _zip_format(stream: BinaryIO, claim: str | None, limits: ExtractionLimits) -> str:
    try:
        with zipfile.ZipFile(stream) as archive:
            infos = archive.infolist()
            check_archive(infos, limits)
            check_inflation(stream, infos)
            names = {info.filename for info in infos}
            opendocument = _opendocument_format(archive, claim)
    except (zipfile.BadZipFile, zlib.error):
        raise ExtractionFailed(
            "the file is a damaged zip archive", reason=ExtractionFailed.FILE_CORRUPT, file_format=claim or ""
        ) from None
    finally:
        stream.seek(0)
    for part, fmt in _OOXML_PARTS.items():
        if part in names:
            return fmt
    if opendocument is not None:
        return opendocument
    raise ExtractionFailed(
        "the file is a zip archive but not a Word, PowerPoint, Excel or OpenDocument document",
        reason=ExtractionFailed.UNSUPPORTED_FORMAT,
    )


def _opendocument_format(archive: zipfile.ZipFile, claim: str | None) -> str | None:
    """odt, odp or ods from the "mimetype" entry (or, without one, a claim and a content.xml);
    FILE_ENCRYPTED when the manifest says its parts are encrypted. The archive's entries have
    been checked (``check_archive``, ``check_inflation``) before anything is read here."""
    names = {info.filename: info for info in archive.infolist()}
    kind = names.get("mimetype")
    fmt = None
    if kind is not None and kind.file_size <= _ODF_SMALL_PART:
        fmt = _ODF_TYPES.get(archive.read(kind).strip())
    elif "content.xml" in names and claim in ("odt", "odp", "ods"):
        fmt = claim
    manifest = names.get("META-INF/manifest.xml")
    if fmt is not None and manifest is not None and manifest.file_size <= _ODF_SMALL_PART:
        if b"encryption-data" in archive.read(manifest):
            raise ExtractionFailed(
                "the document is password-protected; remove the password and upload it again",
                reason=ExtractionFailed.FILE_ENCRYPTED,
                file_format=fmt,
            )
    return fmt


def check_archive(infos: list[zipfile.ZipInfo], limits: ExtractionLimits) -> None:
    """Refuse a zip whose entries, size or compression ratio could exhaust the process."""
    if len(infos) > limits.max_archive_entries:
        raise ExtractionFailed(
            f"the document archive has more than {limits.max_archive_entries:,} entries",
            reason=ExtractionFailed.ARCHIVE_TOO_LARGE,
        )
    uncompressed = sum(info.file_size for info in infos)
    compressed = sum(info.compress_size for info in infos)
    if uncompressed > limits.max_archive_uncompressed_bytes:
        raise ExtractionFailed(
            f"the document expands to more than {limits.max_archive_uncompressed_bytes // 2**20:,} MiB",
            reason=ExtractionFailed.ARCHIVE_TOO_LARGE,
        )
    if uncompressed > limits.archive_ratio_floor_bytes and uncompressed > limits.max_archive_ratio * max(compressed, 1):
        raise ExtractionFailed(
            f"the document expands more than {limits.max_archive_ratio}-fold when unpacked (a zip bomb)",
            reason=ExtractionFailed.ARCHIVE_TOO_LARGE,
        )


def check_inflation(stream: BinaryIO, infos: list[zipfile.ZipInfo]) -> None:
    """Inflate every entry once, counting, and refuse one that inflates past the size the
    directory declares for it. Why: the parsers read entries through Python's zip reader, which
    asks zlib for up to a gigabyte in one call whatever the directory says and only then cuts the
    result to the declared size, so a falsified size passes ``check_archive`` and still inflates
    gigabytes in the reading process. Here at most a piece is inflated at a time; an entry that
    is honest about its size is then read by the parsers within the bounds ``check_archive`` set."""
    for info in infos:
        if info.compress_type == zipfile.ZIP_STORED:
            continue  # nothing to inflate: a stored entry is read as it lies, within the file
        if info.flag_bits & 0x1:
            raise ExtractionFailed(
                "the document is password-protected; remove the password and upload it again",
                reason=ExtractionFailed.FILE_ENCRYPTED,
            )
        if info.compress_type != zipfile.ZIP_DEFLATED:  # never in an Office file; bz2 and lzma inflate unbounded
            raise ExtractionFailed(
                "the document archive uses a compression method Office documents do not use",
                reason=ExtractionFailed.FILE_CORRUPT,
            )
        if _inflated_size(stream, info, stop_past=info.file_size) > info.file_size:
            raise ExtractionFailed(
                "the document expands to more than its archive declares when unpacked (a zip bomb)",
                reason=ExtractionFailed.ARCHIVE_TOO_LARGE,
            )


def _inflated_size(stream: BinaryIO, info: zipfile.ZipInfo, stop_past: int) -> int:
    """How many bytes the entry's deflated data inflates to, counted no further than ``stop_past``
    plus a piece; zlib.error or BadZipFile when the data is damaged."""
    stream.seek(info.header_offset)
    header = stream.read(_LOCAL_HEADER.size)
    if len(header) < _LOCAL_HEADER.size:
        raise zipfile.BadZipFile("truncated local header")
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(header)
    if signature != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local header")
    stream.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    left, size = info.compress_size, 0
    while left > 0 and not inflater.eof and size <= stop_past:
        piece = stream.read(min(left, _INFLATE_PIECE))
        if not piece:
            break
        left -= len(piece)
        while piece and not inflater.eof and size <= stop_past:
            size += len(inflater.decompress(piece, _INFLATE_PIECE))
            piece = inflater.unconsumed_tail
    return size


def _ole_format(stream: BinaryIO, claim: str | None) -> str:
    data = stream.read()
    stream.seek(0)
    if _ENCRYPTED_PACKAGE in data:
        raise ExtractionFailed(
            "the document is password-protected; remove the password and upload it again",
            reason=ExtractionFailed.FILE_ENCRYPTED,
            file_format=claim or "",
        )
    if claim == "xls" or b"W\x00o\x00r\x00k\x00b\x00o\x00o\x00k" in data:
        return "xls"
    if _WORD_STREAM in data or claim == "doc":  # a damaged one is LibreOffice's to refuse
        return "doc"
    if _POWERPOINT_STREAM in data or claim == "ppt":
        return "ppt"
    kind = _NAMES.get(claim or "", "Office 97-2003")
    raise ExtractionFailed(
        f"{kind} files of this kind are not supported; save the file as .docx, .pptx or .xlsx and upload it again",
        reason=ExtractionFailed.UNSUPPORTED_FORMAT,
        file_format=claim or "",
    )
