"""The RPC being served, as the calls it makes to other services see it: its request id and its
deadline.

The server's logging interceptor binds it for the call (:func:`serving`); the channels of
``knowledge_runtime.clients`` read it on every outgoing call, so that each hop logs the caller's
``x-request-id`` and no hop works past its caller's deadline: an outgoing call gets the time the
caller has left, less :data:`DEADLINE_MARGIN_S` (the caller still needs a moment to answer), or
its own timeout when that is shorter. A task that outlives the call it was started in (the
context is copied into it) is no longer bound once the call is done.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import grpc

REQUEST_ID_HEADER = "x-request-id"
MAX_REQUEST_ID_CHARS = 64
# What a caller keeps of its deadline to answer with what its callee said (or failed to say).
DEADLINE_MARGIN_S = 0.010
# An outgoing call whose caller has no time left still gets this long: it fails at once with
# DEADLINE_EXCEEDED, as the channel answers any call past its deadline.
MIN_TIMEOUT_S = 0.001


@dataclass(frozen=True, slots=True)
class ServedCall:
    request_id: str
    context: grpc.aio.ServicerContext


_current: contextvars.ContextVar[ServedCall | None] = contextvars.ContextVar("knowledge_served_call", default=None)


@contextmanager
def serving(request_id: str, context: grpc.aio.ServicerContext) -> Iterator[None]:
    """Bind the call being served while its behaviour runs."""
    token = _current.set(ServedCall(request_id[:MAX_REQUEST_ID_CHARS], context))
    try:
        yield
    finally:
        _current.reset(token)


def _live() -> ServedCall | None:
    call = _current.get()
    if call is None or call.context.done():
        return None
    return call


def current_request_id() -> str | None:
    """The ``x-request-id`` of the call being served (its caller's, or one made up for it)."""
    call = _current.get()
    return None if call is None else call.request_id


def remaining_s() -> float | None:
    """Seconds left before the served call's deadline; None without a call or a deadline."""
    call = _live()
    return None if call is None else call.context.time_remaining()


def outgoing_timeout(own: float | None) -> float | None:
    """The timeout of a call made now: ``own`` (None: none), capped by what the caller has left."""
    left = remaining_s()
    if left is None:
        return own
    budget = max(left - DEADLINE_MARGIN_S, MIN_TIMEOUT_S)
    return budget if own is None else min(own, budget)


def caller_out_of_time() -> bool:
    """Whether the served call's deadline is (all but) reached: an outgoing call that timed out
    now was ended by its caller's deadline, not by a slow callee."""
    left = remaining_s()
    return left is not None and left <= 2 * DEADLINE_MARGIN_S
