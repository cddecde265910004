"""Who a tool call is made for: the caller's token, and (over HTTP) its verified scope.

Over HTTP the bearer middleware (``knowledge_mcp.http``) verifies the token and leaves the caller
on the request; over stdio the process has one caller, its token given at start. While a tool
runs, :func:`acting_as` binds the caller as a service binds the caller of an RPC, so every gRPC
call it makes (``knowledge_runtime.clients.channel``) carries that token and nothing else: the
reach is the token's.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from knowledge_runtime.auth import Scope, bind_scope, reset_scope

CALLER_KEY = "knowledge_caller"  # where the middleware leaves the caller in the ASGI scope's state


@dataclass(frozen=True, slots=True)
class Caller:
    token: str = field(repr=False)
    scope: Scope | None = None  # None: not verified here (stdio); the services verify it
    request_id: str | None = None


_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("knowledge_mcp_request_id", default=None)


# Stdio's one caller, or what makes it for each call (a local stack's token, minted again before
# it expires, for a desktop agent that runs for days).
FixedCaller = Caller | Callable[[], Caller]


def caller_of(request: Any, fixed: FixedCaller | None) -> Caller | None:
    """The caller the middleware verified for this HTTP request, else the process's own (stdio)."""
    if request is not None:
        found = getattr(request, "scope", {}).get("state", {}).get(CALLER_KEY)
        return found if isinstance(found, Caller) else None
    return fixed() if callable(fixed) else fixed


@contextmanager
def acting_as(caller: Caller) -> Iterator[None]:
    bound = bind_scope(caller.scope, caller.token)
    request = _request_id.set(caller.request_id)
    try:
        yield
    finally:
        _request_id.reset(request)
        reset_scope(bound)


def request_metadata() -> tuple[tuple[str, str], ...]:
    """The request id of the call being served, for the services' logs (empty over stdio)."""
    request_id = _request_id.get()
    return (("x-request-id", request_id),) if request_id else ()
