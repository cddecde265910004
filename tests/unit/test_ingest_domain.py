"""Ingest's pure pieces: safe names, progress, result messages, text pages, upload parsing."""

import pytest
from google.api import httpbody_pb2
from knowledge.v1 import ingest_pb2
from knowledge_ingest.domain.documents import JobResult, State, parse_id, progress_of, safe_filename
from knowledge_ingest.domain.errors import (
    CorpusNotFound,
    DocumentNotFound,
    InvalidRequest,
    PageOutOfRange,
)
from knowledge_ingest.domain.text import PAGE_CHARS, paginate
from knowledge_ingest.jobs.upload_stream import upload_source
from knowledge_ingest.jobs.uploads import capped
from knowledge_runtime.chunking import TextChunk
from knowledge_runtime.errors import UploadTooLarge


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("a/b\\c.docx", "c.docx"),
        ("na\x00me.txt", "name.txt"),
        ("Quartalsbericht Ä 2024 (final).xlsx", "Quartalsbericht_Ä_2024__final_.xlsx"),
        ("", "upload"),
        ("...", "upload"),
    ],
)
def test_safe_filename(given, expected):
    assert safe_filename(given) == expected


def test_a_10kb_name_is_bounded_and_keeps_its_extension():
    name = safe_filename("x" * 10_000 + ".pdf")
    assert len(name) <= 255 and name.endswith(".pdf")


def test_progress_moves_with_chunks_embedded():
    assert progress_of(State.QUEUED) == (0.0, "queued")
    assert progress_of(State.EMBEDDING, 0, 10) == (0.2, "embedding 0/10")
    assert progress_of(State.EMBEDDING, 5, 10) == (pytest.approx(0.55), "embedding 5/10")
    ordered = [
        progress_of(State.EXTRACTING)[0],
        progress_of(State.CHUNKING)[0],
        progress_of(State.EMBEDDING, 10, 10)[0],
        progress_of(State.STORING)[0],
        progress_of(State.SEARCHABLE)[0],
    ]
    assert ordered == sorted(ordered) and ordered[-1] == 1.0


def test_four_result_messages_and_the_duplicate():
    messages = {
        JobResult(1, 4).message,
        JobResult(1, 0, extractable=False).message,
        JobResult(1, 4, re_extracted=True).message,
        JobResult(1, 0, re_extracted=True, extractable=False).message,
        JobResult(1, 4, duplicate=True).message,
    }
    assert len(messages) == 5
    assert "4 chunks" in JobResult(1, 4).message and "no text" in JobResult(1, 0, extractable=False).message


@pytest.mark.parametrize("value", ["abc", "-1", "0", "1e3", "9" * 30])
def test_an_id_that_cannot_exist_is_not_found(value):
    with pytest.raises(DocumentNotFound):
        parse_id(value, "document_id")
    with pytest.raises(CorpusNotFound):
        parse_id(value, "corpus_id")


def test_a_missing_id_is_a_bad_request():
    with pytest.raises(InvalidRequest):
        parse_id("", "document_id")


def chunk(i: int, section: str, size: int, page: int | None = None, overlap: int = 0) -> TextChunk:
    return TextChunk(content=f"<{i}>" + "x" * size, section=section, page=page, chunk_index=i, overlap_chars=overlap)


def test_a_short_document_has_one_page_and_no_pagination_fields():
    page = paginate(7, [chunk(0, "A", 100), chunk(1, "A", 100)], 0)
    assert page.page is None and page.page_count is None and page.next_page is None
    assert paginate(7, [chunk(0, "A", 100)], 1).text == "<0>" + "x" * 100
    with pytest.raises(PageOutOfRange) as past:  # OUT_OF_RANGE, as the contract says
        paginate(7, [chunk(0, "A", 100)], 2)
    assert past.value.code == "OUT_OF_RANGE" and past.value.metadata["page_count"] == "1"
    with pytest.raises(InvalidRequest):
        paginate(7, [chunk(0, "A", 100)], -1)


def test_pages_break_between_chunks_and_re_emit_the_section():
    chunks = [chunk(i, "Long section", 4000, page=1 + i // 4) for i in range(20)]
    first = paginate(1, chunks, 1)
    assert first.page_count > 1 and first.next_page == 2 and first.previous_page is None
    second = paginate(1, chunks, 2)
    assert second.text.startswith("## Long section (continued)")
    assert second.previous_page == 1
    for number in range(1, first.page_count + 1):
        assert len(paginate(1, chunks, number).text) <= PAGE_CHARS
    everything = "".join(paginate(1, chunks, n).text for n in range(1, first.page_count + 1))
    assert all(f"<{i}>" in everything for i in range(20))
    assert "[Page 2]" in everything
    with pytest.raises(PageOutOfRange):
        paginate(1, chunks, first.page_count + 1)


def test_overlaps_are_not_repeated_in_the_text():
    chunks = [TextChunk("alpha\n\nbeta", "", None, 0), TextChunk("beta\n\ngamma", "", None, 1, overlap_chars=6)]
    assert paginate(1, chunks, 1).text == "alpha\n\nbeta\n\ngamma"


async def collect(stream):
    return b"".join([piece async for piece in stream])


def messages(parts: list[bytes], content_type: str, corpus_id: str = "", filename: str = ""):
    async def stream():
        for index, data in enumerate(parts):
            yield ingest_pb2.UploadDocumentRequest(
                corpus_id=corpus_id if index == 0 else "",
                filename=filename if index == 0 else "",
                http_body=httpbody_pb2.HttpBody(content_type=content_type, data=data),
            )

    return stream()


async def test_a_raw_body_uses_the_query_parameters():
    source = await upload_source(messages([b"hello ", b"world"], "text/plain", corpus_id="3", filename="a.txt"))
    assert (source.corpus_id, source.filename, source.mime_type) == ("3", "a.txt", "text/plain")
    assert await collect(source.chunks) == b"hello world"
    with pytest.raises(InvalidRequest):
        await upload_source(messages([b"x"], "text/plain", corpus_id="3"))


async def test_a_grpc_upload_names_its_corpus_and_file_on_the_first_message_only():
    """The corpus is checked before a byte is stored: a gRPC caller is told so in gRPC's words,
    and a corpus_id on a later message is refused, never ignored."""

    async def later(name: str):
        yield ingest_pb2.UploadDocumentRequest(
            filename="a.txt", http_body=httpbody_pb2.HttpBody(content_type="text/plain", data=b"x")
        )
        yield ingest_pb2.UploadDocumentRequest(**{name: "3"}, http_body=httpbody_pb2.HttpBody(data=b"y"))

    with pytest.raises(InvalidRequest) as missing:
        await upload_source(later("corpus_id"))
    assert missing.value.metadata == {"field": "corpus_id"} and missing.value.reason == "INVALID_REQUEST"
    assert "first message" in missing.value.message and "?corpus_id=" in missing.value.message

    async def renamed():
        yield ingest_pb2.UploadDocumentRequest(
            corpus_id="3", filename="a.txt", http_body=httpbody_pb2.HttpBody(content_type="text/plain", data=b"x")
        )
        yield ingest_pb2.UploadDocumentRequest(corpus_id="4", http_body=httpbody_pb2.HttpBody(data=b"y"))

    source = await upload_source(renamed())
    with pytest.raises(InvalidRequest) as ignored:
        await collect(source.chunks)
    assert ignored.value.metadata == {"field": "corpus_id"} and "first message only" in ignored.value.message


async def test_an_access_list_on_a_later_message_is_refused_not_dropped():
    """Dropped, the list would leave open to the whole corpus a document its uploader meant to close."""

    async def later():
        yield ingest_pb2.UploadDocumentRequest(
            corpus_id="3", filename="a.txt", http_body=httpbody_pb2.HttpBody(content_type="text/plain", data=b"x")
        )
        yield ingest_pb2.UploadDocumentRequest(
            access=ingest_pb2.AccessList(principals=["group:hr"]), http_body=httpbody_pb2.HttpBody(data=b"y")
        )

    source = await upload_source(later())
    assert source.principals is None  # the first message named none
    with pytest.raises(InvalidRequest) as refused:
        await collect(source.chunks)
    assert refused.value.metadata == {"field": "access"} and "first message only" in refused.value.message


def multipart(fields: list[tuple[str, str | None, bytes]], boundary: str = "XyZ") -> bytes:
    out = b""
    for name, filename, data in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        headers = f"Content-Disposition: {disposition}\r\n"
        if filename:
            headers += "Content-Type: application/pdf\r\n"
        out += f"--{boundary}\r\n{headers}\r\n".encode() + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


@pytest.mark.parametrize("piece", [7, 64, 100_000])
async def test_a_multipart_form_streams_its_file(piece):
    payload = bytes(range(256)) * 40
    body = multipart([("corpus_id", None, b"12"), ("file", "scan.pdf", payload)])
    parts = [body[i : i + piece] for i in range(0, len(body), piece)]
    source = await upload_source(messages(parts, "multipart/form-data; boundary=XyZ"))
    assert (source.corpus_id, source.filename, source.mime_type) == ("12", "scan.pdf", "application/pdf")
    assert await collect(source.chunks) == payload


async def test_a_form_must_name_the_corpus_before_the_file():
    body = multipart([("file", "scan.pdf", b"data"), ("corpus_id", None, b"12")])
    with pytest.raises(InvalidRequest) as caught:
        await upload_source(messages([body], "multipart/form-data; boundary=XyZ"))
    assert caught.value.metadata["field"] == "corpus_id"
    with pytest.raises(InvalidRequest):
        await upload_source(messages([multipart([("corpus_id", None, b"1")])], "multipart/form-data; boundary=XyZ"))


@pytest.mark.parametrize("piece", [7, 100_000])  # seen while the file streams, or before it does
async def test_a_form_s_access_list_after_the_file_is_refused_not_dropped(piece):
    """A file part given first (curl -F file=@x -F principals=...) must not leave the document open."""
    body = multipart([("corpus_id", None, b"12"), ("file", "scan.pdf", b"data"), ("principals", None, b'["group:hr"]')])

    async def read() -> bytes:
        parts = [body[i : i + piece] for i in range(0, len(body), piece)]
        return await collect((await upload_source(messages(parts, "multipart/form-data; boundary=XyZ"))).chunks)

    with pytest.raises(InvalidRequest) as caught:
        await read()
    assert caught.value.metadata == {"field": "principals"} and "before the file" in caught.value.message
    before = multipart(
        [("corpus_id", None, b"12"), ("principals", None, b'["group:hr"]'), ("file", "scan.pdf", b"data")]
    )
    source = await upload_source(messages([before, b"epilogue"], "multipart/form-data; boundary=XyZ"))
    assert source.principals == ["group:hr"] and await collect(source.chunks) == b"data"


async def test_the_cap_is_enforced_while_streaming():
    async def endless():
        while True:
            yield b"x" * 1000

    seen = 0
    with pytest.raises(UploadTooLarge):
        async for piece in capped(endless(), 10_000):
            seen += len(piece)
    assert seen == 10_000
