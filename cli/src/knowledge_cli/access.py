"""``knowledge access show|set|default``: who may read a document, through the REST API.

``show DOCUMENT`` prints the document's access list (``GET /documents/{id}``); ``set DOCUMENT
PRINCIPAL...`` replaces it (``POST /documents/{id}:setAccess``, a ``document.share`` token), and
``set DOCUMENT --everyone`` empties it: everyone who reaches the corpus reads the document again.
``default CORPUS PRINCIPAL...|--everyone`` sets the list a corpus's new documents get
(``POST /corpora/{id}:setDefaultAccess``). A principal is ``user:<sub>`` or ``group:<name>``.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from knowledge_cli.client import EXIT_CODES, OK, Client
from knowledge_cli.rest_command import common_options, print_json, rest_command

EVERYONE = "everyone who reaches its corpus"


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    access = commands.add_parser("access", help="show or change who may read a document", epilog=epilog)
    verbs = access.add_subparsers(dest="access_command", required=True)
    show = verbs.add_parser("show", help="a document's access list", epilog=epilog)
    show.add_argument("document", help="the document id")
    common_options(show)
    show.set_defaults(run=rest_command(_show))
    replace = verbs.add_parser("set", help="replace a document's access list (document.share)", epilog=epilog)
    replace.add_argument("document", help="the document id")
    _principals(replace)
    common_options(replace)
    replace.set_defaults(run=rest_command(_set))
    default = verbs.add_parser(
        "default", help="the access list a corpus's new documents get (document.share)", epilog=epilog
    )
    default.add_argument("corpus", help="the corpus id")
    _principals(default)
    common_options(default)
    default.set_defaults(run=rest_command(_default))


def _principals(parser: argparse.ArgumentParser) -> None:
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("principals", nargs="*", default=[], metavar="PRINCIPAL", help="user:<sub> or group:<name>")
    given.add_argument("--everyone", action="store_true", help="an empty list: everyone who reaches the corpus")


def _listed(principals: list[str]) -> str:
    return ", ".join(principals) if principals else EVERYONE


def _show(client: Client, options, out: TextIO) -> int:
    document = client.document(options.document)
    if options.json:
        print_json(out, {"document_id": document["document_id"], "principals": document.get("principals", [])})
    else:
        out.write(f"{document['document_id']}\t{document['filename']}\t{_listed(document.get('principals', []))}\n")
    return OK


def _set(client: Client, options, out: TextIO) -> int:
    answer = client.set_document_access(options.document, [] if options.everyone else options.principals)
    if options.json:
        print_json(out, answer)
        return OK
    now = answer.get("document")
    after = _listed(now.get("principals", [])) if now else "a list that leaves this token out"
    out.write(f"{options.document}: {_listed(answer.get('previous_principals', []))} -> {after}\n")
    return OK


def _default(client: Client, options, out: TextIO) -> int:
    corpus = client.set_corpus_default_access(options.corpus, [] if options.everyone else options.principals)
    if options.json:
        print_json(out, corpus)
    else:
        out.write(
            f"{corpus['corpus_id']}\t{corpus['name']}\tnew documents: {_listed(corpus.get('default_principals', []))}\n"
        )
    return OK
