"""How a command of the REST client runs: its common options, its token, its errors.

Each command is a function of (client, options, out) that returns an exit code;
:func:`rest_command` makes it an argparse ``run``: the token from ``--token``, ``KNOWLEDGE_TOKEN``
or, for the local stack, ``--tenant T`` (a development token minted with the local key); the
base URL from ``--url`` or ``KNOWLEDGE_URL``; an :class:`ApiError` printed on stderr and turned
into its exit code (``knowledge_cli.client.EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TextIO

from knowledge_cli.client import AUTH, DEFAULT_URL, INTERRUPTED, USAGE, ApiError, Client


def common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"REST base URL (default: $KNOWLEDGE_URL or {DEFAULT_URL})")
    parser.add_argument("--token", help="bearer token (default: $KNOWLEDGE_TOKEN)")
    parser.add_argument("--tenant", help="local stack only: mint a development token for this tenant")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answers")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")


def rest_command(command: Callable[[Client, argparse.Namespace, TextIO], int]) -> Callable[[argparse.Namespace], int]:
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


def print_json(out: TextIO, value) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
