"""Streamable HTTP at ``/mcp``: stateless (any replica answers any request, as behind the
gateway) with JSON answers, the bearer token verified here again after Envoy, as every service
does, and the probes at ``/livez`` and ``/readyz``.

A request without a valid token is 401 with the catalogue's reason (TOKEN_MISSING,
TOKEN_EXPIRED, TOKEN_INVALID, TENANT_UNRESOLVED) as a ``google.rpc.Status``, as the gateway
answers it. The verified caller is left on the request for the tools
(``knowledge_mcp.caller``). DNS-rebinding protection (a Host allow-list) is off: the server sits
behind the gateway, which any Host reaches, and a browser cannot send the bearer token
cross-origin without CORS, which this path does not grant.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from types import FrameType

import uvicorn
from knowledge_runtime.auth import TOKEN_MISSING_MESSAGE, TokenVerifier
from knowledge_runtime.errors import ERROR_DOMAIN, Unauthenticated
from knowledge_runtime.logging import get_logger
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.registry import HTTP_LIVENESS_PATH, HTTP_READINESS_PATH, service
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from knowledge_mcp.bootstrap import wired
from knowledge_mcp.caller import CALLER_KEY, Caller
from knowledge_mcp.config import SERVICE, McpSettings
from knowledge_mcp.server import KnowledgeMcp

log = get_logger(__name__)
UNAUTHENTICATED_CODE = 16  # google.rpc.Code.UNAUTHENTICATED
MAX_REQUEST_ID_CHARS = 64


def unauthenticated(reason: str, message: str) -> bytes:
    status = {
        "code": UNAUTHENTICATED_CODE,
        "message": message,
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": ERROR_DOMAIN}],
    }
    return json.dumps(status).encode()


class BearerAuth:
    """ASGI middleware: every path but the probes needs a token this process verifies."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier, *, open_paths: frozenset[str]) -> None:
        self._app = app
        self._verifier = verifier
        self._open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open:
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        header = headers.get("authorization", "")
        if not header.lower().startswith("bearer ") or not header[7:].strip():
            await self._refuse(send, "TOKEN_MISSING", TOKEN_MISSING_MESSAGE)
            return
        token = header[7:].strip()
        try:
            verified = self._verifier.verify(token)
        except Unauthenticated as error:
            await self._refuse(send, error.reason, error.message)
            return
        request_id = (headers.get("x-request-id") or "")[:MAX_REQUEST_ID_CHARS] or None
        scope.setdefault("state", {})[CALLER_KEY] = Caller(token, verified, request_id)
        await self._app(scope, receive, send)

    @staticmethod
    async def _refuse(send: Send, reason: str, message: str) -> None:
        body = unauthenticated(reason, message)
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


@dataclass
class Readiness:
    """Ready while serving; not ready from SIGTERM on, so the gateway stops sending before the drain."""

    draining: bool = field(default=False)

    async def ready(self, request: Request) -> Response:
        return PlainTextResponse("draining\n" if self.draining else "ok\n", status_code=503 if self.draining else 200)

    @staticmethod
    async def alive(request: Request) -> Response:
        return PlainTextResponse("ok\n")


def http_app(server: KnowledgeMcp, verifier: TokenVerifier, readiness: Readiness) -> ASGIApp:
    server.custom_route(HTTP_LIVENESS_PATH, methods=["GET"])(readiness.alive)
    server.custom_route(HTTP_READINESS_PATH, methods=["GET"])(readiness.ready)
    path = service(SERVICE).http_path
    assert path is not None
    app = server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return BearerAuth(app, verifier, open_paths=frozenset({HTTP_LIVENESS_PATH, HTTP_READINESS_PATH}))


class _Server(uvicorn.Server):
    """uvicorn's graceful stop, with readiness turned off first."""

    def __init__(self, config: uvicorn.Config, readiness: Readiness) -> None:
        super().__init__(config)
        self._readiness = readiness

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._readiness.draining = True
        log.info("mcp_draining", signal=signal.Signals(sig).name)
        super().handle_exit(sig, frame)


async def serve_http(settings: McpSettings, verifier: TokenVerifier) -> None:
    readiness = Readiness()
    async with wired(settings) as server:
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        config = uvicorn.Config(
            http_app(server, verifier, readiness),
            host=settings.common.host,
            port=settings.common.port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=max(1, int(settings.common.shutdown_grace_s)),
            lifespan="on",
        )
        log.info("mcp_serving", port=settings.common.port)
        try:
            await _Server(config, readiness).serve()
        finally:
            await metrics.stop()
