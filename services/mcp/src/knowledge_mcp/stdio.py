"""The same tools over stdio, for desktop agents (``knowledge mcp``): one caller, whose token is
forwarded on every call; the services verify it (a missing or expired one is an Err of every
tool, never a protocol error). Nothing but the protocol goes to stdout; logs go to stderr."""

from __future__ import annotations

from collections.abc import Callable

from knowledge_mcp.bootstrap import wired
from knowledge_mcp.caller import Caller
from knowledge_mcp.config import McpSettings


async def serve_stdio(settings: McpSettings, token: str | Callable[[], str]) -> None:
    """``token``: the caller's, or what gives it for each call (one minted again before it expires)."""
    fixed = Caller(token) if isinstance(token, str) else (lambda: Caller(token()))
    async with wired(settings, fixed=fixed) as server:
        await server.run_stdio_async()
