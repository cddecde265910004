"""Prometheus metrics over HTTP, on ``KNOWLEDGE_METRICS_PORT`` (0 = disabled; ``CommonSettings.metrics_port``).

A service defines its own metric objects (names ``knowledge_<service>_*``) on a registry and
calls :func:`start_metrics_server` once at start; the returned :class:`MetricsServer` stops
with the service. Scrapes are served from a daemon thread, never from the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from knowledge_runtime.settings import SettingsError


@dataclass
class MetricsServer:
    port: int
    _server: object | None = None

    async def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()  # type: ignore[attr-defined]
            self._server.server_close()  # type: ignore[attr-defined]
            self._server = None


def start_metrics_server(port: int, host: str = "0.0.0.0", registry: CollectorRegistry = REGISTRY) -> MetricsServer:
    """Serve ``registry`` on ``host:port``; port 0 serves nothing and returns a no-op server."""
    if port == 0:
        return MetricsServer(port=0)
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise SettingsError(f"KNOWLEDGE_METRICS_PORT: cannot listen on {host}:{port} ({error.strerror})") from None
    return MetricsServer(port=server.server_port, _server=server)
