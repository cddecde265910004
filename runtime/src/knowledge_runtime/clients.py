"""Channels to other services: trace context, the caller's bearer token, its request id and its
deadline travel along (``knowledge_runtime.calls``)."""

from __future__ import annotations

import asyncio

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors, filters

from knowledge_runtime.auth import current_token
from knowledge_runtime.calls import REQUEST_ID_HEADER, current_request_id, outgoing_timeout


def _for_caller(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    """The call as the RPC being served makes it: with its bearer token (unless the call sets its
    own, a service token), its request id, and no more time than it has left."""
    metadata = list(details.metadata or ())
    names = {key for key, _ in metadata}
    token, request_id = current_token(), current_request_id()
    if token is not None and "authorization" not in names:
        metadata.append(("authorization", f"Bearer {token}"))
    if request_id is not None and REQUEST_ID_HEADER not in names:
        metadata.append((REQUEST_ID_HEADER, request_id))
    return grpc.aio.ClientCallDetails(
        details.method,
        outgoing_timeout(details.timeout),
        grpc.aio.Metadata(*metadata),
        details.credentials,
        details.wait_for_ready,
    )


# One interceptor per call shape: grpc.aio files an interceptor under the first shape it
# implements only, so one class implementing all four would intercept unary calls alone.
class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    """Every outgoing call carries what :func:`_for_caller` adds, and a call with one response is
    cancelled when the task that waits for it is (the server cancels the task of a call whose
    caller went away or whose deadline passed): grpc.aio cancels an awaited call itself, but not
    once OpenTelemetry's interceptor waits for it on its behalf (``call.code()``), which only
    stops that wait while the call itself runs on."""

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return _cancelled_with_waiter(await continuation(_for_caller(client_call_details), request))


class _UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(_for_caller(client_call_details), request)


class _StreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return _cancelled_with_waiter(await continuation(_for_caller(client_call_details), request_iterator))


class _StreamStream(grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await continuation(_for_caller(client_call_details), request_iterator)


def as_caller() -> list[grpc.aio.ClientInterceptor]:
    """The interceptors that make every call of a channel as the RPC being served makes it."""
    return [_UnaryUnary(), _UnaryStream(), _StreamUnary(), _StreamStream()]


def _cancelled_with_waiter(call: grpc.aio.Call) -> grpc.aio.Call:
    """``call``, cancelled if the task running the interceptors (the one the caller's await waits
    on) ends cancelled."""
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(lambda done: call.cancel() if done.cancelled() else None)
    return call


# Round-robin over every address the name resolves to: behind a headless Kubernetes Service
# each embedder replica gets its share of the requests, not one pinned connection per caller.
CHANNEL_OPTIONS = (("grpc.lb_policy_name", "round_robin"),)


def channel(target: str, *, untraced: tuple[str, ...] = ()) -> grpc.aio.Channel:
    """An insecure channel inside the cluster network (mTLS belongs to the mesh).

    ``untraced`` names methods that get no client span: OpenTelemetry's interceptor awaits a
    client-streaming call to its end, so ``call.cancel()`` on such a call only cancels that
    wait while the RPC itself runs on (and a source that stops is then half-closed as if it
    were complete). A method that must be cancellable mid-stream is listed here.
    """
    tracing = aio_client_interceptors(
        filter_=filters.negate(filters.any_of(*(filters.method_name(m) for m in untraced))) if untraced else None
    )
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=[*tracing, *as_caller()])
