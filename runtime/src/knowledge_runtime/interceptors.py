"""Server interceptors: per-RPC logging context, the one error map, and the caller's scope.

Each interceptor contributes an async context manager ("guard") that runs around the
RPC's behaviour, for all four call shapes. Order (outermost first): OpenTelemetry span,
:class:`LoggingInterceptor`, :class:`ErrorInterceptor`, :class:`ScopeInterceptor`,
:class:`RequestValidationInterceptor`, so a scope failure or a malformed request is a domain
error that the error map turns into a status.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import grpc
import structlog
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from knowledge_runtime.auth import (
    Scope,
    TokenVerifier,
    bearer_token,
    bind_scope,
    current_scope,
    reset_scope,
    token_expired,
    token_missing,
)
from knowledge_runtime.calls import MAX_REQUEST_ID_CHARS, REQUEST_ID_HEADER, current_request_id, serving
from knowledge_runtime.errors import (
    ERROR_DOMAIN,
    DomainError,
    Internal,
    Unauthenticated,
    Unimplemented,
)
from knowledge_runtime.reach import claimed_node
from knowledge_runtime.reflection import REFLECTION_PREFIX
from knowledge_runtime.tenancy import UNGATED_CAPABILITIES
from knowledge_runtime.tracing import current_trace_id
from knowledge_runtime.validation import check_request

log = structlog.get_logger("knowledge.rpc")

Guard = Callable[[grpc.HandlerCallDetails, grpc.aio.ServicerContext], AbstractAsyncContextManager[None]]
# Raises (FEATURE_DISABLED) when the tenant may not use the service now; read per call.
TenantGate = Callable[[str], Awaitable[None]]
# Raises Refused(SCOPE_UNRESOLVED) when the caller's scope names no node of its tenant.
ScopeResolver = Callable[[Scope], Awaitable[object]]
KNOWLEDGE_PREFIX = "/knowledge.v1."


def _wrap(
    handler: grpc.RpcMethodHandler | None,
    details: grpc.HandlerCallDetails,
    guard: Guard,
    stream_deadline: Callable[[], float | None] | None = None,
):
    """The same handler with ``guard`` entered around its behaviour (for every call shape). A
    server stream ends at ``stream_deadline()`` (epoch seconds, asked once ``guard`` is entered;
    None: never) with :func:`auth.token_expired`, even while its behaviour waits."""
    if handler is None:
        return None
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary or handler.stream_unary:
        inner = handler.unary_unary or handler.stream_unary
        assert inner is not None

        async def unary_response(request, context):
            async with guard(details, context):
                result = inner(request, context)
                return await result if inspect.isawaitable(result) else result

        factory = grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.stream_unary_rpc_method_handler
        return factory(unary_response, **kwargs)

    streaming = handler.unary_stream or handler.stream_stream
    assert streaming is not None

    async def stream_response(request, context):
        async with guard(details, context):
            ends = stream_deadline() if stream_deadline is not None else None
            result = streaming(request, context)
            if inspect.isawaitable(result):  # a behaviour that writes through context.write
                async with _expiring(ends):
                    await result
                return
            # An async servicer yields asynchronously (grpc's stubs type it as a plain iterator).
            items: AsyncIterator = result if ends is None else _until(result, ends)  # type: ignore[assignment,arg-type]
            async for item in items:
                yield item

    factory = grpc.unary_stream_rpc_method_handler if handler.unary_stream else grpc.stream_stream_rpc_method_handler
    return factory(stream_response, **kwargs)


def _loop_time(epoch_s: float) -> float:
    return asyncio.get_running_loop().time() + (epoch_s - time.time())


@asynccontextmanager
async def _expiring(ends: float | None) -> AsyncIterator[None]:
    """Cancels what it encloses at ``ends`` (epoch seconds) and answers the token expired."""
    if ends is None:
        yield
        return
    timer = asyncio.timeout_at(_loop_time(ends))
    try:
        async with timer:
            yield
    except TimeoutError:
        if timer.expired():
            raise token_expired() from None
        raise


async def _until(items: AsyncIterator, ends: float) -> AsyncIterator:
    """The stream's items until ``ends``: waiting for the next one is cancelled there (the
    behaviour's own clean-up runs), and the stream ends with the token expired."""
    try:
        while True:
            try:
                async with _expiring(ends):
                    item = await anext(items)
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


class _GuardInterceptor(grpc.aio.ServerInterceptor):
    def guard(self, details: grpc.HandlerCallDetails, context: grpc.aio.ServicerContext):
        raise TypeError("subclasses define guard")

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        return _wrap(handler, handler_call_details, self.guard)


def _metadata_value(details: grpc.HandlerCallDetails, key: str) -> str | None:
    for name, value in details.invocation_metadata or ():
        if name.lower() == key:
            return value.decode() if isinstance(value, bytes) else value
    return None


class LoggingInterceptor(_GuardInterceptor):
    """Binds request id, rpc and trace id for every log line of the call; logs its outcome.

    The request id is the caller's ``x-request-id`` (the gateway's, another service's) or a new
    one; it is echoed in the call's trailing metadata, and the calls this one makes carry it
    (``knowledge_runtime.calls``), so one id follows a request through every hop's logs."""

    @asynccontextmanager
    async def guard(self, details, context) -> AsyncIterator[None]:
        request_id = (_metadata_value(details, REQUEST_ID_HEADER) or uuid.uuid4().hex)[:MAX_REQUEST_ID_CHARS]
        structlog.contextvars.bind_contextvars(request_id=request_id, rpc=details.method, trace_id=current_trace_id())
        context.set_trailing_metadata(((REQUEST_ID_HEADER, request_id),))
        started = time.perf_counter()
        outcome = "OK"
        try:
            with serving(request_id, context):
                yield
        except grpc.aio.AbortError:
            outcome = _code_name(context.code())
            raise
        except asyncio.CancelledError:
            outcome = "CANCELLED"
            raise
        finally:
            if details.method.startswith(KNOWLEDGE_PREFIX):
                log.info("rpc_finished", code=outcome, duration_ms=round((time.perf_counter() - started) * 1000, 2))
            structlog.contextvars.unbind_contextvars("request_id", "rpc", "trace_id", "tenant")


def _code_name(code) -> str:
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "UNKNOWN" if code is None else str(code)


def status_for(error: DomainError) -> grpc.Status:
    """The ``google.rpc.Status`` with exactly one ``ErrorInfo`` for a domain error."""
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)
    status = status_pb2.Status(code=code_pb2.Code.Value(error.code), message=error.message)
    status.details.add().Pack(info)
    return rpc_status.to_status(status)


INTERNAL_MESSAGE = "internal error"


class ErrorInterceptor(_GuardInterceptor):
    """The one place where exceptions become gRPC statuses; nothing internal leaks."""

    @asynccontextmanager
    async def guard(self, details, context) -> AsyncIterator[None]:
        try:
            yield
        except (grpc.aio.AbortError, asyncio.CancelledError):
            raise
        except DomainError as error:
            log.info("rpc_error", code=error.code, reason=error.reason)
            await _abort(context, error)
        except NotImplementedError:
            await _abort(context, Unimplemented("this method is not implemented yet"))
        except Exception:
            log.exception("rpc_failed")
            # The status in the trailer carries the code of the call's status (INTERNAL, 13), as
            # every status here does: both come from the error's one declared code.
            await _abort(context, Internal(INTERNAL_MESSAGE))


async def _abort(context: grpc.aio.ServicerContext, error: DomainError) -> None:
    """Ends the call with ``error``'s status; the trailer keeps the request id beside it (an
    abort's trailing metadata replaces what was set before)."""
    status = status_for(error)
    request_id = current_request_id()
    echo = ((REQUEST_ID_HEADER, request_id),) if request_id else ()
    await context.abort(status.code, status.details, trailing_metadata=(*status.trailing_metadata, *echo))


class ScopeInterceptor(_GuardInterceptor):
    """Resolves tenant and capabilities from the verified bearer JWT for ``knowledge.v1`` RPCs.

    ``capabilities`` maps each full method name to the capability it needs; a method of
    ours without an entry is answered as one that does not exist (fail closed). Reflection needs a valid token and nothing
    more; health passes untouched (probes carry no token).
    ``gate`` (when given) then refuses a switched-off tenant's call, whatever the service: the
    one enablement check; platform administration (``tenancy.UNGATED_CAPABILITIES``) passes.
    Last, every method not named in ``unscoped`` refuses a scope that does not resolve
    (SCOPE_UNRESOLVED): no claim or one that is no scope path always, and a node the tenant does
    not have when ``resolve`` is given. One place, so no RPC can forget it. A server stream ends
    at its token's ``exp`` (UNAUTHENTICATED, TOKEN_EXPIRED, as a call with that token would be
    answered then): a watch opened with a token must not outlive it.
    """

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        return _wrap(handler, handler_call_details, self.guard, _token_expiry)

    def __init__(
        self,
        verifier: TokenVerifier,
        capabilities: Mapping[str, str],
        gate: TenantGate | None = None,
        unscoped: Collection[str] = (),
        resolve: ScopeResolver | None = None,
    ) -> None:
        self._verifier = verifier
        self._capabilities = dict(capabilities)
        self._gate = gate
        self._unscoped = frozenset(unscoped)
        self._resolve = resolve

    @asynccontextmanager
    async def guard(self, details, context) -> AsyncIterator[None]:
        if details.method.startswith(REFLECTION_PREFIX):
            self._verified(details)  # any valid token: the descriptors are the published protos
            yield
            return
        if not details.method.startswith(KNOWLEDGE_PREFIX):
            yield
            return
        token, scope = self._verified(details)
        structlog.contextvars.bind_contextvars(tenant=scope.tenant)
        capability = self._capabilities.get(details.method)
        if capability is None:  # another process's method, or none at all: as the gateway answers it
            raise no_such_method(details.method)
        scope.require(capability)
        if self._gate is not None and capability not in UNGATED_CAPABILITIES:
            await self._gate(scope.tenant)
        if details.method not in self._unscoped:
            claimed_node(scope.scope_claim)
            if self._resolve is not None:
                await self._resolve(scope)
        tokens = bind_scope(scope, token)
        try:
            yield
        finally:
            reset_scope(tokens)

    def _verified(self, details: grpc.HandlerCallDetails) -> tuple[str, Scope]:
        token = bearer_token(details.invocation_metadata)
        if token is None:
            raise token_missing()
        return token, self._verifier.verify(token)


def _token_expiry() -> float | None:
    """The verified token's ``exp`` for a call of ours (None for health and reflection)."""
    try:
        return current_scope().expires_at
    except Unauthenticated:
        return None


def no_such_method(method: str) -> Unimplemented:
    return Unimplemented(f"no method {method[:200]} is served here", reason="METHOD_NOT_FOUND")


class NoSuchMethod(grpc.GenericRpcHandler):
    """The handler of every method no service of the process has (added last): the interceptors
    run for it, so the call is answered UNIMPLEMENTED with an ErrorInfo (METHOD_NOT_FOUND, after
    the token for a ``knowledge.v1`` name), as the gateway answers an unknown path, instead of
    gRPC's own bare UNIMPLEMENTED."""

    def service(self, handler_call_details):
        method = handler_call_details.method

        async def refuse(requests, context):
            raise no_such_method(method)
            yield  # a generator: a server stream, which answers a call of any shape

        return grpc.stream_stream_rpc_method_handler(refuse)


class RequestValidationInterceptor(grpc.aio.ServerInterceptor):
    """Every ``knowledge.v1`` request message (each one of a stream) passes ``check_request``
    before the servicer reads it: no unknown field, no NUL in a string (``validation.py``)."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or not handler_call_details.method.startswith(KNOWLEDGE_PREFIX):
            return handler
        kwargs = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary or handler.unary_stream:
            inner = handler.unary_unary or handler.unary_stream

            def checked(request, context):
                check_request(request)
                return inner(request, context)

            factory = (
                grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.unary_stream_rpc_method_handler
            )
            return factory(checked, **kwargs)

        inner = handler.stream_unary or handler.stream_stream

        def checked_stream(requests, context):
            return inner(_checked_each(requests), context)

        factory = (
            grpc.stream_unary_rpc_method_handler if handler.stream_unary else grpc.stream_stream_rpc_method_handler
        )
        return factory(checked_stream, **kwargs)


async def _checked_each(requests):
    async for request in requests:
        check_request(request)
        yield request
