"""The one place that wires the adapter: the services' channels, the server with its tools, and
the logs (JSON on stderr, over the handler the SDK installs; its per-call lines at WARNING, since
it logs each Hint as a tool failure)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from knowledge_runtime.logging import configure_logging

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.caller import FixedCaller
from knowledge_mcp.config import SERVICE, McpSettings
from knowledge_mcp.server import KnowledgeMcp, build_server

QUIET_LOGGERS = ("mcp", "uvicorn.error", "uvicorn.access")


@asynccontextmanager
async def wired(settings: McpSettings, *, fixed: FixedCaller | None = None) -> AsyncIterator[KnowledgeMcp]:
    """The server while the block runs; its channels closed after. ``fixed``: stdio's one caller."""
    services = Services(settings)
    try:
        server = build_server(services, fixed=fixed, index_wait_s=settings.index_wait_s)
        configure_logging(SERVICE, settings.common.log_level)
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        yield server
    finally:
        await services.close()
