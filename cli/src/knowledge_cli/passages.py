"""``knowledge passages index|remove|check``: passages by reference, through the REST API.

``index FILE.json`` sends a version of a file's passages, the body of ``POST /passages:index``
without its corpus (``{"document_ref", "content_sha256", "title", "metadata", "passages": [{"fragment",
"text", "metadata"}]}``; ``-`` reads standard input), into the corpus ``--corpus-key`` (created when
unknown) or ``--corpus``, then follows its job (``--no-wait``: prints it and returns).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from knowledge_cli.client import EXIT_CODES, FAILED, OK, USAGE, ApiError, Client
from knowledge_cli.rest_command import common_options, print_json, rest_command
from knowledge_cli.uploads import follow


def _corpus_options(parser) -> None:
    named = parser.add_mutually_exclusive_group(required=True)
    named.add_argument("--corpus-key", help="the corpus's key, e.g. projects/42/production")
    named.add_argument("--corpus", help="the corpus's id")


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    passages = commands.add_parser("passages", help="index, remove or check passages by reference", epilog=epilog)
    verbs = passages.add_subparsers(dest="passages_command", required=True)
    index = verbs.add_parser("index", help="index a version of a file's passages and follow its job", epilog=epilog)
    index.add_argument("file", metavar="FILE.json", help="the version as JSON ('-': standard input)")
    _corpus_options(index)
    index.add_argument("--confidentiality", default="", help="the band of a corpus the key creates (default TENANT)")
    index.add_argument("--no-wait", action="store_true", help="print the job and return at once")
    common_options(index)
    index.set_defaults(run=rest_command(_index))
    remove = verbs.add_parser("remove", help="remove everything under a reference", epilog=epilog)
    remove.add_argument("--ref", required=True, help="the document_ref")
    _corpus_options(remove)
    common_options(remove)
    remove.set_defaults(run=rest_command(_remove))
    check = verbs.add_parser("check", help="whether an index would be admitted now", epilog=epilog)
    check.add_argument("--bytes", type=int, required=True, help="the passages' texts in bytes")
    check.add_argument("--passages", type=int, required=True, help="how many passages")
    check.add_argument("--ref", default="", help="the document_ref, when it may be indexed already")
    _corpus_options(check)
    common_options(check)
    check.set_defaults(run=rest_command(_check))


def _corpus(options) -> dict[str, str]:
    return {"corpus_key": options.corpus_key} if options.corpus_key else {"corpus_id": options.corpus}


def _version(file: str) -> dict:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        body = json.loads(text)
    except (OSError, ValueError) as error:
        raise ApiError(f"cannot read the passages from {file}: {error}", USAGE) from None
    if not isinstance(body, dict):
        raise ApiError(f"{file} must hold a JSON object (document_ref, content_sha256, passages...)", USAGE)
    return body


def _index(client: Client, options, out: TextIO) -> int:
    body = {**_version(options.file), **_corpus(options)}
    if options.confidentiality:
        body["confidentiality"] = options.confidentiality
    indexed = client.index_passages(body)
    if options.no_wait or indexed.get("unchanged") or not indexed.get("job_id"):
        if options.json:
            print_json(out, indexed)
        else:
            done = "unchanged" if indexed.get("unchanged") else indexed.get("job_id", "")
            out.write(f"{indexed.get('document_id', '')}\t{done}\t{body.get('document_ref', '')}\n")
        return OK
    job = follow(client, [indexed["job_id"]], [str(body.get("document_ref", ""))], sys.stderr)[0]
    if options.json:
        print_json(out, {**indexed, "job": job})
    else:
        out.write(f"{indexed['document_id']}\t{job['state'].removeprefix('DOCUMENT_STATE_').lower()}\t")
        out.write(f"{body.get('document_ref', '')}\n")
    return OK if job["state"] == "DOCUMENT_STATE_SEARCHABLE" else FAILED


def _remove(client: Client, options, out: TextIO) -> int:
    removed = client.remove_by_reference(_corpus(options), options.ref)
    if options.json:
        print_json(out, removed)
    else:
        out.write(f"removed {removed.get('removed', 0)} searchable version(s) of {options.ref}\n")
    return OK


def _check(client: Client, options, out: TextIO) -> int:
    checked = client.check_indexing(_corpus(options), options.bytes, options.passages, options.ref)
    if options.json:
        print_json(out, checked)
    elif checked.get("admitted"):
        out.write("admitted\n")
    else:
        reason = str(checked.get("reason", "")).removeprefix("REFUSAL_REASON_")
        out.write(f"refused\t{reason}\t{checked.get('message', '')}\n")
    return OK if checked.get("admitted") else FAILED
