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

from knowledge_ingest.domain.formats import accepted_extensions, accepted_summary

from knowledge_cli import documents, retrieval, tenants, uploads
from knowledge_cli.client import EXIT_CODES
from knowledge_cli.rest_command import common_options, rest_command


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
    common_options(create)
    create.set_defaults(run=rest_command(documents.create_corpus))
    listing = actions.add_parser("list", help="list the tenant's corpora", epilog=epilog)
    common_options(listing)
    listing.set_defaults(run=rest_command(documents.list_corpora))
    drop = actions.add_parser("delete", help="delete a corpus (with --documents: and its documents)", epilog=epilog)
    drop.add_argument("corpus")
    drop.add_argument("--documents", action="store_true", help="delete its documents too (else refused if any)")
    common_options(drop)
    drop.set_defaults(run=rest_command(documents.delete_corpus))

    upload = commands.add_parser(
        "upload", help="upload files (or fetch web pages by URL) and follow their ingestion", epilog=epilog
    )
    upload.add_argument(
        "files",
        nargs="+",
        metavar="FILE|URL",
        help=f"a file to upload ({accepted_summary()}: {' '.join(accepted_extensions())}), or an http(s) URL "
        "for the service to fetch (POST /urls)",
    )
    upload.add_argument("--corpus", required=True, help="target corpus id")
    upload.add_argument("--no-wait", action="store_true", help="print the job ids and return at once")
    upload.add_argument(
        "--cancel-on-interrupt",
        action="store_true",
        help="on Ctrl-C cancel the jobs still running (default: they go on in the background)",
    )
    common_options(upload)
    upload.set_defaults(run=rest_command(uploads.upload))

    search = commands.add_parser("search", help="hybrid search over the tenant's documents", epilog=epilog)
    search.add_argument("query")
    _retrieval_scope(search)
    search.add_argument("--mode", choices=("hybrid", "vector", "lexical"), default="")
    common_options(search)
    search.set_defaults(run=rest_command(retrieval.search))

    query = commands.add_parser("query", help="a cited answer to a question", epilog=epilog)
    query.add_argument("question")
    _retrieval_scope(query)
    common_options(query)
    query.set_defaults(run=rest_command(retrieval.query))

    text = commands.add_parser("text", help="a page of a document's text", epilog=epilog)
    text.add_argument("document")
    text.add_argument("--page", type=int, default=0, help="1-based page (default 1)")
    common_options(text)
    text.set_defaults(run=rest_command(documents.text))

    document_list = commands.add_parser(
        "documents", help="the documents of a corpus with their states (--watch: live)", epilog=epilog
    )
    document_list.add_argument("--corpus", required=True, help="the corpus id")
    document_list.add_argument(
        "--watch",
        action="store_true",
        help="keep the list up to date as documents are added, ingested, moved or deleted (Ctrl-C ends)",
    )
    common_options(document_list)
    document_list.set_defaults(run=rest_command(documents.list_documents))

    delete = commands.add_parser("delete", help="delete a document (prints its tombstone)", epilog=epilog)
    delete.add_argument("document")
    delete.add_argument("--reason", default="", help="why, recorded on the tombstone")
    common_options(delete)
    delete.set_defaults(run=rest_command(documents.delete))

    tombstones = commands.add_parser(
        "tombstones", help="what deleted documents were (GET /tombstones; an audit.read token)", epilog=epilog
    )
    tombstones.add_argument("--corpus", default="", help="only this corpus's")
    common_options(tombstones)
    tombstones.set_defaults(run=rest_command(documents.tombstones))

    context = commands.add_parser(
        "context", help="facts with their evidence for an agent (POST /context): the rendered block", epilog=epilog
    )
    context.add_argument("query")
    context.add_argument("--top-k", type=int, default=0)
    common_options(context)
    context.set_defaults(run=rest_command(retrieval.context))

    prefetch = commands.add_parser(
        "prefetch", help="the suggested context for a chat message (POST /prefetch)", epilog=epilog
    )
    prefetch.add_argument("message")
    common_options(prefetch)
    prefetch.set_defaults(run=rest_command(retrieval.prefetch))
    usage = commands.add_parser("usage", help="the tenant's usage and quotas in one month", epilog=epilog)
    usage.add_argument("--period", default="", help="the month as YYYY-MM (default: the current one, UTC)")
    common_options(usage)
    usage.set_defaults(run=rest_command(tenants.usage))

    tenant = commands.add_parser(
        "tenants", help="a tenant's enablement and quotas (a platform.admin token)", epilog=epilog
    )
    tenant_actions = tenant.add_subparsers(dest="tenants_command", required=True)
    show = tenant_actions.add_parser("get", help="show a tenant's settings", epilog=epilog)
    show.add_argument("name", help="the tenant")
    common_options(show)
    show.set_defaults(run=rest_command(tenants.get_settings))
    put = tenant_actions.add_parser(
        "set", help="set a tenant's settings (a quota not given is unlimited)", epilog=epilog
    )
    put.add_argument("name", help="the tenant")
    state = put.add_mutually_exclusive_group(required=True)
    state.add_argument("--enable", dest="enabled", action="store_true")
    state.add_argument("--disable", dest="enabled", action="store_false")
    for quota in tenants.QUOTA_FIELDS:
        put.add_argument(f"--{quota.replace('_', '-')}", dest=quota, type=float if "cost" in quota else int)
    common_options(put)
    put.set_defaults(run=rest_command(tenants.set_settings))
