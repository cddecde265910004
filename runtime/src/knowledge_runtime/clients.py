"""Channels to other services: trace context and the caller's bearer token travel along."""

from __future__ import annotations

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors, filters

from knowledge_runtime.auth import current_token


def _with_token(client_call_details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    token = current_token()
    metadata = list(client_call_details.metadata or ())
    if token is None or any(key == "authorization" for key, _ in metadata):
        return client_call_details
    metadata.append(("authorization", f"Bearer {token}"))
    return grpc.aio.ClientCallDetails(
        client_call_details.method,
        client_call_details.timeout,
        grpc.aio.Metadata(*metadata),
        client_call_details.credentials,
        client_call_details.wait_for_ready,
    )


class _ForwardToken(
    grpc.aio.UnaryUnaryClientInterceptor,
    grpc.aio.UnaryStreamClientInterceptor,
    grpc.aio.StreamUnaryClientInterceptor,
    grpc.aio.StreamStreamClientInterceptor,
):
    """Adds the bearer token of the RPC being served, unless the call sets its own."""

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(_with_token(client_call_details), request)

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(_with_token(client_call_details), request)

    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await continuation(_with_token(client_call_details), request_iterator)

    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await continuation(_with_token(client_call_details), request_iterator)


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
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=[*tracing, _ForwardToken()])
