"""The same tools over stdio, for desktop agents (``knowledge mcp``): one caller, the token given
at start, forwarded on every call; the services verify it. Nothing but the protocol goes to
stdout; logs go to stderr."""

from __future__ import annotations

from knowledge_mcp.bootstrap import wired
from knowledge_mcp.caller import Caller
from knowledge_mcp.config import McpSettings


async def serve_stdio(settings: McpSettings, token: str) -> None:
    async with wired(settings, fixed=Caller(token)) as server:
        await server.run_stdio_async()
