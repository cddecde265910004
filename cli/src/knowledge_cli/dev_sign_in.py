"""The web console's development sign-in: tokens from the local stack's development key.

``knowledge up`` always runs on its development key pair (``knowledge_runtime.devkeys``), and only
it holds the private half, so only it serves this: a small HTTP server in the supervisor, on the
loopback, that the gateway routes ``POST /console/dev-token`` to (``knowledge_gateway.console``).
A rendered deployment (Kubernetes) has no such server and no such route.

The request names a tenant, a scope node and a clearance; the answer is a token of the public
capabilities plus ``audit.read`` and ``usage.admin`` (the console's tombstones and the tenant's
spending), for an hour, as ``knowledge dev-token`` mints. A wrong value is 400
``INVALID_REQUEST`` naming the field, as the API answers it. Tokens are never logged.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from knowledge_runtime.auth import AUDIT_READ, PUBLIC_CAPABILITIES, USAGE_ADMIN
from knowledge_runtime.devkeys import mint_dev_token
from knowledge_runtime.errors import ERROR_DOMAIN
from knowledge_runtime.reach import InvalidScopePath, ScopePath, parse_band

CAPABILITIES = (*PUBLIC_CAPABILITIES, AUDIT_READ, USAGE_ADMIN)
TTL_S = 3600
MAX_BODY_BYTES = 4096
MAX_TENANT_CHARS = 64
INVALID_ARGUMENT_CODE = 3  # google.rpc.Code.INVALID_ARGUMENT
SUBJECT = "dev"


class SignInError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def token_request(body: bytes) -> tuple[str, str, str]:
    """The tenant, scope and clearance a request body asks for; SignInError naming the field."""
    try:
        asked = json.loads(body or b"{}")
    except ValueError:
        raise SignInError("body", "the body is not valid JSON") from None
    if not isinstance(asked, dict):
        raise SignInError("body", "the body must be a JSON object")
    unknown = sorted(set(asked) - {"tenant", "scope", "clearance"})
    if unknown:
        raise SignInError(unknown[0], f"unknown field {unknown[0]!r}: tenant, scope and clearance are known")
    tenant = asked.get("tenant")
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > MAX_TENANT_CHARS or not tenant.isprintable():
        raise SignInError("tenant", f"the tenant must be 1 to {MAX_TENANT_CHARS} printable characters")
    scope = asked.get("scope") or "/"
    try:
        ScopePath.parse(scope)
    except InvalidScopePath as error:
        raise SignInError("scope", str(error)) from None
    clearance = asked.get("clearance") or "TENANT"
    try:
        parse_band(clearance)
    except (ValueError, TypeError) as error:
        raise SignInError("clearance", str(error)) from None
    return tenant.strip(), scope, clearance


def _status(field: str, message: str) -> bytes:
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "INVALID_REQUEST",
        "domain": ERROR_DOMAIN,
        "metadata": {"field": field},
    }
    return json.dumps({"code": INVALID_ARGUMENT_CODE, "message": message, "details": [info]}).encode()


class DevSignIn:
    """The sign-in server, in a daemon thread of the supervisor until :meth:`stop`."""

    def __init__(self, keys_dir: Path, *, host: str, issuer: str, audience: str) -> None:
        minter = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_BODY_BYTES:
                    self._answer(400, _status("body", f"the body is over {MAX_BODY_BYTES} bytes"))
                    return
                try:
                    tenant, scope, clearance = token_request(self.rfile.read(length))
                except SignInError as error:
                    self._answer(400, _status(error.field, str(error)))
                    return
                token = minter.mint(tenant, scope, clearance)
                answer = {
                    "token": token,
                    "expires_in": TTL_S,
                    "tenant": tenant,
                    "scope": scope,
                    "clearance": clearance,
                    "capabilities": list(CAPABILITIES),
                }
                self._answer(200, json.dumps(answer).encode())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # the gateway's access log has the request; nothing here may log a token

        self._keys_dir, self._issuer, self._audience = keys_dir, issuer, audience
        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="dev-sign-in", daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def mint(self, tenant: str, scope: str, clearance: str) -> str:
        return mint_dev_token(
            self._keys_dir,
            tenant=tenant,
            capabilities=CAPABILITIES,
            issuer=self._issuer,
            audience=self._audience,
            ttl_s=TTL_S,
            subject=SUBJECT,
            scope=scope,
            clearance=clearance,
        )

    def start(self) -> DevSignIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
