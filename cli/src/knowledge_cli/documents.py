"""``knowledge corpora|text|documents|delete|tombstones``: corpora and their documents.

``documents --watch`` keeps a corpus's list live (``GET .../documents:watch``), watching again
after the server ends or cuts the stream.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TextIO

from knowledge_cli.client import OK, UNREACHABLE, ApiError, Client
from knowledge_cli.rest_command import print_json


def create_corpus(client: Client, options, out: TextIO) -> int:
    corpus = client.create_corpus(options.name, options.description, platform_wide=options.platform_wide)
    if options.json:
        print_json(out, corpus)
    else:
        out.write(f"{corpus['corpus_id']}\t{corpus['name']}\n")
    return OK


def list_corpora(client: Client, options, out: TextIO) -> int:
    corpora = list(client.list_corpora())
    if options.json:
        print_json(out, corpora)
        return OK
    out.write("corpus_id\tdocuments\tchunks\tname\n")
    out.writelines(
        f"{corpus['corpus_id']}\t{corpus['document_count']}\t{corpus['chunk_count']}\t{corpus['name']}\n"
        for corpus in corpora
    )
    return OK


def delete_corpus(client: Client, options, out: TextIO) -> int:
    deleted = client.delete_corpus(options.corpus, delete_documents=options.documents)
    if options.json:
        print_json(out, deleted)
    else:
        out.write(f"deleted corpus {deleted['corpus_id']} ({deleted.get('deleted_document_count', 0)} documents)\n")
    return OK


def text(client: Client, options, out: TextIO) -> int:
    page = client.document_text(options.document, options.page)
    if options.json:
        print_json(out, page)
        return OK
    out.write(page.get("text", ""))
    if not page.get("text", "").endswith("\n"):
        out.write("\n")
    if page.get("page_count"):
        following = f"; next: --page {page['next_page']}" if page.get("next_page") else ""
        print(f"knowledge: page {page.get('page')} of {page['page_count']}{following}", file=sys.stderr)
    return OK


_DOCUMENTS_HEADER = "document_id\tstate\tstage\tchunks\tfilename\n"
WATCH_RETRY_S = 1.0  # after the server ended or cut a watch (ingest or the database restarted)


def _document_line(document: dict) -> str:
    state = str(document.get("state") or "").removeprefix("DOCUMENT_STATE_").lower()
    stage = document.get("stage") or state
    if document.get("error"):
        stage = f"{stage}: {document['error']}"
    return f"{document['document_id']}\t{state}\t{stage}\t{document.get('chunk_count', 0)}\t{document['filename']}\n"


def list_documents(client: Client, options, out: TextIO) -> int:
    if not options.watch:
        documents = list(client.list_documents(options.corpus))
        if options.json:
            print_json(out, documents)
        else:
            out.write(_DOCUMENTS_HEADER)
            out.writelines(_document_line(d) for d in documents)
        return OK
    return watch_documents(client, options.corpus, out, as_json=options.json, redraw=out.isatty())


def watch_documents(
    client: Client,
    corpus_id: str,
    out: TextIO,
    *,
    as_json: bool = False,
    redraw: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    reconnect: bool = True,
) -> int:
    """The list, live. ``as_json``: each change as the API sends it, one per line. ``redraw`` (a
    terminal): the whole table drawn again after each change. Otherwise the table once the
    snapshot is complete, then one line per change (``removed`` for a document that left the
    corpus). A watch the server ends, or that is cut (the gateway unreachable) once one was
    opened, is started again (a fresh snapshot) unless ``reconnect`` is off."""
    opened = False  # a gateway unreachable from the start is an error to report, not to wait out
    while True:
        listed: dict[str, dict] = {}
        synced = False
        try:
            for change in client.watch_documents(corpus_id):
                opened = True
                if as_json:
                    out.write(json.dumps(change, ensure_ascii=False) + "\n")
                    out.flush()
                    continue
                kind = str(change.get("kind") or "").removeprefix("DOCUMENT_CHANGE_KIND_")
                document_id = str(change.get("document_id") or "")
                if kind in ("SNAPSHOT", "CHANGED") and change.get("document"):
                    listed[document_id] = change["document"]
                elif kind == "REMOVED":
                    listed.pop(document_id, None)
                if kind == "SYNCED":
                    synced = True
                if redraw and synced:
                    out.write("\x1b[H\x1b[J" + _DOCUMENTS_HEADER)
                    out.writelines(_document_line(d) for d in listed.values())
                elif kind == "SYNCED":
                    out.write(_DOCUMENTS_HEADER)
                    out.writelines(_document_line(d) for d in listed.values())
                elif synced and kind == "CHANGED":
                    out.write(_document_line(listed[document_id]))
                elif synced and kind == "REMOVED":
                    out.write(f"{document_id}\tremoved\n")
                out.flush()
        except ApiError as error:
            if not (reconnect and opened and error.exit_code == UNREACHABLE):
                raise
            print(f"knowledge: {error}; watching again", file=sys.stderr)
            sleep(WATCH_RETRY_S)
            continue
        if not reconnect:
            return OK
        print("knowledge: the watch ended; watching again", file=sys.stderr)
        sleep(WATCH_RETRY_S)


def delete(client: Client, options, out: TextIO) -> int:
    deleted = client.delete_document(options.document, options.reason)
    if options.json:
        print_json(out, deleted)
        return OK
    out.write(f"deleted document {deleted['document_id']} ({deleted.get('deleted_chunk_count', 0)} chunks)\n")
    if deleted.get("cancelled_job_id"):
        out.write(f"cancelled its ingestion {deleted['cancelled_job_id']}\n")
    out.write(_tombstone_text(deleted.get("tombstone") or {}))
    return OK


def _tombstone_text(tombstone: dict) -> str:
    """A tombstone as ``knowledge delete`` shows it, one field a line."""
    fields = (
        ("tombstone", "tombstone_id"),
        ("corpus", "corpus_id"),
        ("filename", "filename"),
        ("content hash", "content_hash"),
        ("deleted by", "deleted_by"),
        ("deleted at", "delete_time"),
        ("reason", "reason"),
        ("removal", "removal_state"),
    )
    return "".join(f"  {label}: {tombstone.get(key, '')}\n" for label, key in fields)


_TOMBSTONES_HEADER = "tombstone\tdocument\tcorpus\tchunks\tremoval\tdeleted_at\tdeleted_by\tfilename\treason\n"
# The fields under _TOMBSTONES_HEADER, each with what an absent one shows (proto3 JSON omits zeros).
_TOMBSTONE_COLUMNS = (
    ("tombstone_id", ""),
    ("document_id", ""),
    ("corpus_id", ""),
    ("chunk_count", 0),
    ("removal_state", ""),
    ("delete_time", ""),
    ("deleted_by", ""),
    ("filename", ""),
    ("reason", ""),
)


def tombstones(client: Client, options, out: TextIO) -> int:
    tombstones = list(client.tombstones(options.corpus))
    if options.json:
        print_json(out, tombstones)
        return OK
    out.write(_TOMBSTONES_HEADER)
    out.writelines(
        "\t".join(str(t.get(key, default)) for key, default in _TOMBSTONE_COLUMNS) + "\n" for t in tombstones
    )
    return OK
