"""``knowledge corpora|upload|search|query|documents|text|delete|tombstones|context|prefetch|usage|tenants``: the REST API from a terminal or a script.

The base URL comes from ``--url`` or ``KNOWLEDGE_URL``; the token from ``--token`` or
``KNOWLEDGE_TOKEN``, or, for the local stack, ``--tenant T`` mints a development token with the
local key. Results go to stdout (``--json`` prints the API's JSON instead); messages to stderr.
Exit codes (``knowledge_cli.client.EXIT_CODES``): 0 ok, 1 server error or failed operation,
2 usage/configuration or invalid request, 3 not found, 4 auth, 5 conflict, 6 too large,
7 rate limited, 8 unreachable, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from knowledge_cli.client import (
    AUTH,
    DEFAULT_URL,
    EXIT_CODES,
    FAILED,
    INTERRUPTED,
    OK,
    UNREACHABLE,
    USAGE,
    ApiError,
    Client,
)

TERMINAL_STATES = {"DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"}
POLL_INTERVAL_S = 0.5
BAR_WIDTH = 24


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"REST base URL (default: $KNOWLEDGE_URL or {DEFAULT_URL})")
    parser.add_argument("--token", help="bearer token (default: $KNOWLEDGE_TOKEN)")
    parser.add_argument("--tenant", help="local stack only: mint a development token for this tenant")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answers")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")


def _retrieval_scope(parser: argparse.ArgumentParser) -> None:
    """What search and query look in, and how many hits they take."""
    parser.add_argument("--corpus", default="")
    parser.add_argument("--document", default="")
    parser.add_argument("--top-k", type=int, default=0)


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    corpora = commands.add_parser("corpora", help="create or list corpora", epilog=epilog)
    actions = corpora.add_subparsers(dest="corpora_command", required=True)
    create = actions.add_parser("create", help="create a corpus", epilog=epilog)
    create.add_argument("name")
    create.add_argument("--description", default="")
    create.add_argument(
        "--platform-wide",
        action="store_true",
        help="readable by every tenant (GENERAL only; a platform.admin token of the platform tenant)",
    )
    _common(create)
    create.set_defaults(run=_run(_corpora_create))
    listing = actions.add_parser("list", help="list the tenant's corpora", epilog=epilog)
    _common(listing)
    listing.set_defaults(run=_run(_corpora_list))
    drop = actions.add_parser("delete", help="delete a corpus (with --documents: and its documents)", epilog=epilog)
    drop.add_argument("corpus")
    drop.add_argument("--documents", action="store_true", help="delete its documents too (else refused if any)")
    _common(drop)
    drop.set_defaults(run=_run(_corpora_delete))

    upload = commands.add_parser(
        "upload", help="upload files (or fetch web pages by URL) and follow their ingestion", epilog=epilog
    )
    upload.add_argument(
        "files",
        nargs="+",
        metavar="FILE|URL",
        help="a file to upload, or an http(s) URL for the service to fetch (POST /urls)",
    )
    upload.add_argument("--corpus", required=True, help="target corpus id")
    upload.add_argument("--no-wait", action="store_true", help="print the job ids and return at once")
    upload.add_argument(
        "--cancel-on-interrupt",
        action="store_true",
        help="on Ctrl-C cancel the jobs still running (default: they go on in the background)",
    )
    _common(upload)
    upload.set_defaults(run=_run(_upload))

    search = commands.add_parser("search", help="hybrid search over the tenant's documents", epilog=epilog)
    search.add_argument("query")
    _retrieval_scope(search)
    search.add_argument("--mode", choices=("hybrid", "vector", "lexical"), default="")
    _common(search)
    search.set_defaults(run=_run(_search))

    query = commands.add_parser("query", help="a cited answer to a question", epilog=epilog)
    query.add_argument("question")
    _retrieval_scope(query)
    _common(query)
    query.set_defaults(run=_run(_query))

    text = commands.add_parser("text", help="a page of a document's text", epilog=epilog)
    text.add_argument("document")
    text.add_argument("--page", type=int, default=0, help="1-based page (default 1)")
    _common(text)
    text.set_defaults(run=_run(_text))

    documents = commands.add_parser(
        "documents", help="the documents of a corpus with their states (--watch: live)", epilog=epilog
    )
    documents.add_argument("--corpus", required=True, help="the corpus id")
    documents.add_argument(
        "--watch",
        action="store_true",
        help="keep the list up to date as documents are added, ingested, moved or deleted (Ctrl-C ends)",
    )
    _common(documents)
    documents.set_defaults(run=_run(_documents))

    delete = commands.add_parser("delete", help="delete a document (prints its tombstone)", epilog=epilog)
    delete.add_argument("document")
    delete.add_argument("--reason", default="", help="why, recorded on the tombstone")
    _common(delete)
    delete.set_defaults(run=_run(_delete))

    tombstones = commands.add_parser(
        "tombstones", help="what deleted documents were (GET /tombstones; an audit.read token)", epilog=epilog
    )
    tombstones.add_argument("--corpus", default="", help="only this corpus's")
    _common(tombstones)
    tombstones.set_defaults(run=_run(_tombstones))

    context = commands.add_parser(
        "context", help="facts with their evidence for an agent (POST /context): the rendered block", epilog=epilog
    )
    context.add_argument("query")
    context.add_argument("--top-k", type=int, default=0)
    _common(context)
    context.set_defaults(run=_run(_context))

    prefetch = commands.add_parser(
        "prefetch", help="the suggested context for a chat message (POST /prefetch)", epilog=epilog
    )
    prefetch.add_argument("message")
    _common(prefetch)
    prefetch.set_defaults(run=_run(_prefetch))
    usage = commands.add_parser("usage", help="the tenant's usage and quotas in one month", epilog=epilog)
    usage.add_argument("--period", default="", help="the month as YYYY-MM (default: the current one, UTC)")
    _common(usage)
    usage.set_defaults(run=_run(_usage))

    tenants = commands.add_parser(
        "tenants", help="a tenant's enablement and quotas (a platform.admin token)", epilog=epilog
    )
    tenant_actions = tenants.add_subparsers(dest="tenants_command", required=True)
    show = tenant_actions.add_parser("get", help="show a tenant's settings", epilog=epilog)
    show.add_argument("name", help="the tenant")
    _common(show)
    show.set_defaults(run=_run(_tenants_get))
    put = tenant_actions.add_parser(
        "set", help="set a tenant's settings (a quota not given is unlimited)", epilog=epilog
    )
    put.add_argument("name", help="the tenant")
    state = put.add_mutually_exclusive_group(required=True)
    state.add_argument("--enable", dest="enabled", action="store_true")
    state.add_argument("--disable", dest="enabled", action="store_false")
    for quota in QUOTA_FIELDS:
        put.add_argument(f"--{quota.replace('_', '-')}", dest=quota, type=float if "cost" in quota else int)
    _common(put)
    put.set_defaults(run=_run(_tenants_set))


def _run(command: Callable[[Client, argparse.Namespace, TextIO], int]) -> Callable[[argparse.Namespace], int]:
    def run(options: argparse.Namespace) -> int:
        try:
            token = _token(options)
            url = options.url or os.environ.get("KNOWLEDGE_URL") or DEFAULT_URL
            if not url.startswith(("http://", "https://")):
                raise ApiError(f"the URL {url!r} is not http(s)", USAGE)
            with Client(url, token, timeout_s=options.timeout) as client:
                return command(client, options, sys.stdout)
        except ApiError as error:
            print(f"knowledge: {error}", file=sys.stderr)
            if error.refusal_words:  # a refusal of the closed set, in words for a person
                print(f"knowledge: {error.refusal_words}", file=sys.stderr)
            return error.exit_code
        except KeyboardInterrupt:
            print("knowledge: interrupted", file=sys.stderr)
            return INTERRUPTED

    return run


def _token(options: argparse.Namespace) -> str:
    if options.token:
        return options.token
    if options.tenant:
        return _dev_token(options.tenant)
    token = os.environ.get("KNOWLEDGE_TOKEN", "").strip()
    if not token:
        raise ApiError("no token: pass --token, set KNOWLEDGE_TOKEN, or --tenant T for the local stack", USAGE)
    return token


def _dev_token(tenant: str) -> str:
    from knowledge_runtime.auth import ADMIN_CAPABILITIES, PUBLIC_CAPABILITIES

    from knowledge_cli.devtoken import mint_local_token

    try:  # the local stack's token: the public capabilities and the importing ones
        return mint_local_token(tenant, capabilities=[*PUBLIC_CAPABILITIES, *ADMIN_CAPABILITIES])
    except FileNotFoundError as error:
        raise ApiError(str(error), AUTH) from None


def _print_json(out: TextIO, value) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


# -- corpora -------------------------------------------------------------------------------------
def _corpora_create(client: Client, options, out: TextIO) -> int:
    corpus = client.create_corpus(options.name, options.description, platform_wide=options.platform_wide)
    if options.json:
        _print_json(out, corpus)
    else:
        out.write(f"{corpus['corpus_id']}\t{corpus['name']}\n")
    return OK


def _corpora_list(client: Client, options, out: TextIO) -> int:
    corpora = list(client.list_corpora())
    if options.json:
        _print_json(out, corpora)
        return OK
    out.write("corpus_id\tdocuments\tchunks\tname\n")
    out.writelines(
        f"{corpus['corpus_id']}\t{corpus['document_count']}\t{corpus['chunk_count']}\t{corpus['name']}\n"
        for corpus in corpora
    )
    return OK


# -- upload --------------------------------------------------------------------------------------
def _is_url(argument: str) -> bool:
    return argument.lower().startswith(("http://", "https://"))


def _upload(client: Client, options, out: TextIO) -> int:
    for argument in options.files:
        if not _is_url(argument) and not Path(argument).is_file():
            raise ApiError(f"{argument}: no such file", USAGE)
    jobs: list[tuple[str, dict]] = []  # what each job is shown as (a file's name, a URL), its handle
    for argument in options.files:
        if _is_url(argument):
            jobs.append((argument, client.ingest_url(argument, options.corpus)))
        else:
            jobs.append((Path(argument).name, client.upload(Path(argument), options.corpus)))
        if options.no_wait or options.json:
            continue
        print(
            f"knowledge: {jobs[-1][0]} {'to be fetched' if _is_url(argument) else 'stored'}, job {jobs[-1][1]['job_id']}",
            file=sys.stderr,
        )
    if options.no_wait:
        if options.json:
            _print_json(out, [handle for _, handle in jobs])
        else:
            out.writelines(f"{handle['job_id']}\t{name}\n" for name, handle in jobs)
        return OK
    try:
        finals = follow(client, [handle["job_id"] for _, handle in jobs], [name for name, _ in jobs], sys.stderr)
    except KeyboardInterrupt:
        running = [h["job_id"] for _, h in jobs]
        if options.cancel_on_interrupt:
            for job_id in running:
                try:
                    client.cancel_job(job_id)
                except ApiError:
                    pass
            print(f"knowledge: interrupted; cancelled jobs {', '.join(running)}", file=sys.stderr)
        else:
            print(f"knowledge: interrupted; jobs {', '.join(running)} go on in the background", file=sys.stderr)
        return INTERRUPTED
    if options.json:
        _print_json(out, finals)
    failed = 0
    for name, job in zip((name for name, _ in jobs), finals):
        result = job.get("result") or {}
        if job["state"] == "DOCUMENT_STATE_SEARCHABLE":
            if not options.json:
                out.write(
                    f"{result.get('document_id', '')}\t{result.get('chunk_count', 0)}\t{name}\t"
                    f"{result.get('message', '')}\n"
                )
                for warning in result.get("warnings", []):  # what extraction could not read
                    print(f"knowledge: {name}: warning: {warning}", file=sys.stderr)
        else:
            failed += 1
            reason = job.get("error") or job["stage"]
            print(f"knowledge: {name}: {reason}", file=sys.stderr)
    return FAILED if failed else OK


def follow(
    client: Client,
    job_ids: list[str],
    names: list[str],
    stream: TextIO,
    *,
    interval_s: float = POLL_INTERVAL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict]:
    """Polls every job until it is terminal, drawing one progress line per job; the last states.

    The first poll after completion carries the job's result (delivered once), so it is kept.
    """
    latest: dict[str, dict] = {}
    results: dict[str, dict] = {}
    drawn = 0
    tty = stream.isatty()
    printed: dict[str, str] = {}
    while True:
        for job_id in job_ids:
            if job_id in latest and latest[job_id]["state"] in TERMINAL_STATES:
                continue
            job = client.job(job_id)
            if job.get("result"):
                results[job_id] = job["result"]
            latest[job_id] = job
        lines = [progress_line(name, latest[job_id]) for job_id, name in zip(job_ids, names)]
        if tty:
            if drawn:
                stream.write(f"\x1b[{drawn}F")
            stream.write("".join(f"\x1b[2K{line}\n" for line in lines))
            drawn = len(lines)
        else:
            for job_id, line in zip(job_ids, lines):
                stage = latest[job_id]["stage"]
                if printed.get(job_id) != stage:  # a line per stage change, not per poll
                    stream.write(line + "\n")
                    printed[job_id] = stage
        stream.flush()
        if all(latest[j]["state"] in TERMINAL_STATES for j in job_ids):
            return [{**latest[j], "result": results.get(j) or latest[j].get("result")} for j in job_ids]
        sleep(interval_s)


def progress_line(name: str, job: dict) -> str:
    fraction = min(max(float(job.get("progress") or 0.0), 0.0), 1.0)
    filled = round(fraction * BAR_WIDTH)
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    return f"[{bar}] {fraction * 100:5.1f}% {job.get('stage') or ''} {name}"


# -- retrieval -----------------------------------------------------------------------------------
def _search(client: Client, options, out: TextIO) -> int:
    answer = client.search(
        options.query, corpus_id=options.corpus, document_id=options.document, top_k=options.top_k, mode=options.mode
    )
    if options.json:
        _print_json(out, answer)
        return OK
    out.write(f"relevance: {_relevance(answer.get('relevance'))}\n")
    for warning in answer.get("warnings", []):
        print(f"knowledge: {warning}", file=sys.stderr)
    for rank, hit in enumerate(answer.get("results", []), start=1):
        where = _where(hit)
        out.write(f"{rank}. {hit['filename']}{where} (document {hit['document_id']}, score {hit['fused_score']:.4f})\n")
        out.write("   " + " ".join(hit.get("content", "").split())[:300] + "\n")
    return OK


def _query(client: Client, options, out: TextIO) -> int:
    answer = client.query(options.question, corpus_id=options.corpus, document_id=options.document, top_k=options.top_k)
    if options.json:
        _print_json(out, answer)
        return OK
    out.write((answer.get("answer") or "(no answer: nothing relevant was found)") + "\n")
    citations = answer.get("citations", [])
    if citations:
        out.write("\n")
    for number, citation in enumerate(citations, start=1):
        out.write(f"[{number}] {citation['filename']}{_where(citation)} (document {citation['document_id']})\n")
        out.write("    " + " ".join(citation.get("excerpt", "").split())[:300] + "\n")
    print(f"knowledge: relevance {_relevance(answer.get('relevance'))}", file=sys.stderr)
    if answer.get("fallback_message"):
        print(f"knowledge: {answer['fallback_message']}", file=sys.stderr)
    return OK


def _context(client: Client, options, out: TextIO) -> int:
    answer = client.context(options.query, top_k=options.top_k)
    if options.json:
        _print_json(out, answer)
        return OK
    context = answer.get("context") or {}
    out.write(context.get("rendered", ""))
    for why in (context.get("metadata") or {}).get("degradations", []):
        print(f"knowledge: degraded: {why}", file=sys.stderr)
    return OK


def _prefetch(client: Client, options, out: TextIO) -> int:
    answer = client.prefetch(options.message)
    if options.json:
        _print_json(out, answer)
        return OK
    out.write(answer.get("rendered") or "")
    if not answer.get("rendered"):
        print("knowledge: no suggested context", file=sys.stderr)
    for why in answer.get("degradations", []):
        print(f"knowledge: degraded: {why}", file=sys.stderr)
    return OK


def _where(hit: dict) -> str:
    parts = []
    if hit.get("page"):
        parts.append(f"p. {hit['page']}")
    if hit.get("section"):
        parts.append(f"§ {hit['section']}")
    return (", " + ", ".join(parts)) if parts else ""


def _relevance(value) -> str:
    return str(value or "RELEVANCE_UNSPECIFIED").removeprefix("RELEVANCE_").lower()


# -- documents -----------------------------------------------------------------------------------
def _text(client: Client, options, out: TextIO) -> int:
    page = client.document_text(options.document, options.page)
    if options.json:
        _print_json(out, page)
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


def _documents(client: Client, options, out: TextIO) -> int:
    if not options.watch:
        documents = list(client.list_documents(options.corpus))
        if options.json:
            _print_json(out, documents)
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


def _delete(client: Client, options, out: TextIO) -> int:
    deleted = client.delete_document(options.document, options.reason)
    if options.json:
        _print_json(out, deleted)
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


def _tombstones(client: Client, options, out: TextIO) -> int:
    tombstones = list(client.tombstones(options.corpus))
    if options.json:
        _print_json(out, tombstones)
        return OK
    out.write(_TOMBSTONES_HEADER)
    out.writelines(
        "\t".join(str(t.get(key, default)) for key, default in _TOMBSTONE_COLUMNS) + "\n" for t in tombstones
    )
    return OK


def _corpora_delete(client: Client, options, out: TextIO) -> int:
    deleted = client.delete_corpus(options.corpus, delete_documents=options.documents)
    if options.json:
        _print_json(out, deleted)
    else:
        out.write(f"deleted corpus {deleted['corpus_id']} ({deleted.get('deleted_document_count', 0)} documents)\n")
    return OK


# -- usage and tenants ----------------------------------------------------------------
QUOTA_FIELDS = ("max_documents", "max_bytes", "max_chunks", "max_embedding_tokens_per_month", "max_llm_cost_per_month")
# (label, usage field, the quota it is read against)
USAGE_ROWS = (
    ("documents", "document_count", "max_documents"),
    ("stored bytes", "stored_bytes", "max_bytes"),
    ("chunks", "chunk_count", "max_chunks"),
    ("embedding tokens", "embedding_tokens", "max_embedding_tokens_per_month"),
    ("embedding cost", "embedding_cost", ""),
    ("LLM tokens", "llm_tokens", ""),
    ("LLM cost", "llm_cost", "max_llm_cost_per_month"),
)


def _usage(client: Client, options, out: TextIO) -> int:
    usage = client.usage(options.period)
    if options.json:
        _print_json(out, usage)
        return OK
    quotas = usage.get("quotas") or {}
    scope = usage.get("scope", "")
    # Without usage.admin the server counts only the token's node and below, and no spending.
    part = f" (scope {scope} and below; spending is shown only to a usage.admin token)" if scope else ""
    out.write(f"period {usage.get('period', '')}{part}\n")
    rows = [
        (label, str(usage.get(field, 0)), str(quotas.get(quota, "unlimited")) if quota else "")
        for label, field, quota in USAGE_ROWS
    ]
    width = max(len(label) for label, _, _ in rows)
    out.write(f"{'':{width}}  {'used':>14}  limit\n")
    out.writelines(f"{label:{width}}  {used:>14}  {limit}\n" for label, used, limit in rows)
    return OK


def _print_settings(out: TextIO, settings: dict) -> None:
    quotas = settings.get("quotas") or {}
    default = "" if settings.get("configured") else " (the deployment's default: never configured)"
    out.write(f"tenant {settings.get('tenant', '')}: {'enabled' if settings.get('enabled') else 'disabled'}{default}\n")
    out.writelines(f"  {quota}: {quotas.get(quota, 'unlimited')}\n" for quota in QUOTA_FIELDS)


def _tenants_get(client: Client, options, out: TextIO) -> int:
    settings = client.tenant_settings(options.name)
    if options.json:
        _print_json(out, settings)
    else:
        _print_settings(out, settings)
    return OK


def _tenants_set(client: Client, options, out: TextIO) -> int:
    quotas = {quota: getattr(options, quota) for quota in QUOTA_FIELDS if getattr(options, quota) is not None}
    settings = client.put_tenant_settings(options.name, options.enabled, quotas).get("settings", {})
    if options.json:
        _print_json(out, settings)
    else:
        _print_settings(out, settings)
    return OK
