"""Process entry for a service: configuration errors end the process at start, by name."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import CommonSettings, SettingsError
from knowledge_runtime.tracing import configure_tracing


def prepare(common: CommonSettings) -> TokenVerifier:
    """Logging, tracing and the token verifier every service needs, from its settings."""
    configure_logging(common.service, common.log_level)
    configure_tracing(common.service, common.otlp_endpoint)
    if not common.jwks_path.is_file():
        raise SettingsError(f"KNOWLEDGE_JWKS_PATH: no key set at {common.jwks_path}")
    try:
        return TokenVerifier.from_file(common.jwks_path, issuer=common.jwt_issuer, audience=common.jwt_audience)
    except (ValueError, KeyError) as error:
        raise SettingsError(f"KNOWLEDGE_JWKS_PATH: {common.jwks_path} is not a usable JWKS ({error})") from None


def run(service: str, bootstrap: Callable[[], Awaitable[GrpcApp]]) -> None:
    """Build the app (settings first), serve until SIGTERM, exit 2 on a configuration error."""

    async def main() -> None:
        app = await bootstrap()
        await app.run_until_signalled()

    try:
        asyncio.run(main())
    except SettingsError as error:
        print(f"knowledge-{service}: configuration error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        pass
