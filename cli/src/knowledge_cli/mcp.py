"""``knowledge mcp``: the knowledge tools over MCP on stdio, for desktop agents (an MCP client
starts it as a command). The reach is the token's: ``KNOWLEDGE_TOKEN``, or on the local stack
(``knowledge up``) one minted for ``--tenant`` with the stack's development key, minted again
before it expires. The services are reached where ``knowledge up`` serves them (the same
``KNOWLEDGE_*`` settings); for a remote deployment an agent uses the Streamable HTTP endpoint
(``/mcp`` on the gateway) instead."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable

from knowledge_runtime.reach import ScopePath, parse_band

TOKEN_VARIABLE = "KNOWLEDGE_TOKEN"
MINTED_TTL_S = 3600
REMINT_AFTER_S = MINTED_TTL_S // 2  # a call never carries a token about to expire


def add_parser(commands: argparse._SubParsersAction) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve the knowledge tools over the Model Context Protocol on stdio (for desktop agents)",
        description=f"The knowledge tools over MCP on stdio. The token comes from {TOKEN_VARIABLE}, or with "
        "--tenant is minted with the local stack's development key.",
    )
    mcp.add_argument("--tenant", help=f"on the local stack: act for this tenant (instead of {TOKEN_VARIABLE})")
    mcp.add_argument("--scope", default="/", help="with --tenant: the token's scope node (default '/')")
    mcp.add_argument("--clearance", help="with --tenant: the token's highest confidentiality band")
    mcp.set_defaults(run=_mcp)


def minting(tenant: str, scope: str, clearance: str | None) -> Callable[[], str]:
    """A local token for each call, minted again once half its lifetime has passed."""
    from knowledge_cli.devtoken import mint_local_token

    held: list[tuple[float, str]] = []

    def token() -> str:
        if not held or time.monotonic() - held[0][0] > REMINT_AFTER_S:
            minted = mint_local_token(tenant, ttl_s=MINTED_TTL_S, scope=scope, clearance=clearance)
            held[:] = [(time.monotonic(), minted)]
        return held[0][1]

    return token


def _mcp(options: argparse.Namespace) -> int:
    from knowledge_mcp.config import McpSettings
    from knowledge_mcp.stdio import serve_stdio

    given = os.environ.get(TOKEN_VARIABLE, "").strip()
    if options.tenant and given:
        print(f"knowledge: give --tenant or {TOKEN_VARIABLE}, not both", file=sys.stderr)
        return 2
    token: str | Callable[[], str]
    if options.tenant:
        try:
            ScopePath.parse(options.scope)
            clearance = parse_band(options.clearance.upper()).value if options.clearance else None
        except ValueError as error:
            print(f"knowledge: {error}", file=sys.stderr)
            return 2
        token = minting(options.tenant, options.scope, clearance)
        try:
            token()  # the key is there: fail now, not at the first tool call
        except FileNotFoundError as error:
            print(f"knowledge: {error}", file=sys.stderr)
            return 1
    elif given:
        token = given
    else:
        print(f"knowledge: no token: set {TOKEN_VARIABLE}, or give --tenant on the local stack", file=sys.stderr)
        return 2
    asyncio.run(serve_stdio(McpSettings.from_env(), token))
    return 0
