"""The gRPC server every service runs: interceptors, health, reflection, graceful stop.

A service hands :class:`GrpcApp` its servicers as :class:`ServiceSpec`s (descriptor,
registration function, capability per method) and the hard dependencies it cannot work without
(``readiness``). ``start()`` binds and reports SERVING; a periodic probe of those dependencies
(see :mod:`knowledge_runtime.health`) then turns the named services (readiness) NOT_SERVING
while one is down and SERVING again once it is back, while ``""`` (liveness) stays SERVING.
SIGTERM/SIGINT drain: health turns NOT_SERVING, the server stops accepting calls, the calls in
flight finish within the grace period (then are cancelled), and the service's own resources are
closed.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import grpc
import structlog
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from knowledge_runtime import reflection
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.health import DEFAULT_INTERVAL_S, Dependency, ReadinessProbe
from knowledge_runtime.interceptors import (
    ErrorInterceptor,
    LoggingInterceptor,
    NoSuchMethod,
    RequestValidationInterceptor,
    ScopeInterceptor,
    ScopeResolver,
    TenantGate,
)
from knowledge_runtime.settings import CommonSettings, SettingsError

log = structlog.get_logger("knowledge.server")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# A call's metadata (headers), one limit for gRPC's soft and hard bounds: between the two gRPC
# refuses at random, so a request could pass once and fail the next time. It is above what the
# gateway forwards for a request it takes (its headers are capped at MAX_REQUEST_HEADERS_KB of
# knowledge_gateway.config; Envoy adds the original path again and a few of its own).
MAX_METADATA_BYTES = 32 * 1024
SERVER_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_metadata_size", MAX_METADATA_BYTES),
    ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
)


@dataclass(frozen=True)
class ServiceSpec:
    """One gRPC service of a process: its descriptor, how to add it, what each method needs."""

    descriptor: ServiceDescriptor
    register: Callable[[grpc.aio.Server], None]
    capabilities: Mapping[str, str]  # method name (e.g. "ListCorpora") -> capability
    # Methods served to a token whose scope does not resolve: none unless named here, each with
    # its reason where it is declared. Every other method refuses it (SCOPE_UNRESOLVED) before it
    # runs, so a new RPC cannot forget.
    unscoped: Collection[str] = ()

    def full_capabilities(self) -> dict[str, str]:
        missing = [m.name for m in self.descriptor.methods if m.name not in self.capabilities]
        if missing:
            raise ValueError(f"{self.descriptor.full_name}: no capability declared for {', '.join(missing)}")
        return {f"/{self.descriptor.full_name}/{name}": cap for name, cap in self.capabilities.items()}

    def full_unscoped(self) -> set[str]:
        names = {m.name for m in self.descriptor.methods}
        unknown = sorted(set(self.unscoped) - names)
        if unknown:
            raise ValueError(f"{self.descriptor.full_name}: no method {', '.join(unknown)} to serve unscoped")
        return {f"/{self.descriptor.full_name}/{name}" for name in self.unscoped}


@dataclass
class GrpcApp:
    services: Sequence[ServiceSpec]
    verifier: TokenVerifier
    host: str = "127.0.0.1"
    port: int = 0
    shutdown_grace_s: float = 10.0
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    on_start: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # Called as the drain begins: ends the streams that would not end by themselves (a watch),
    # so the drain does not wait its whole grace for them.
    on_drain: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    readiness: list[Dependency] = field(default_factory=list)
    readiness_interval_s: float = DEFAULT_INTERVAL_S
    tenant_gate: TenantGate | None = None  # the enablement check (tenancy); None: every tenant passes
    # Resolves the caller's scope against the tenant's nodes (runtime.db.reach); None: only the
    # claim's presence and form are checked here, the node by the reads themselves.
    scope_resolver: ScopeResolver | None = None
    serve_reflection: bool = True  # gRPC server reflection (v1 and v1alpha), behind the API's token

    server: grpc.aio.Server | None = field(default=None, init=False)
    health: HealthServicer | None = field(default=None, init=False)
    bound_port: int = field(default=0, init=False)
    probe: ReadinessProbe | None = field(default=None, init=False)

    @classmethod
    def for_service(
        cls,
        common: CommonSettings,
        services: Sequence[ServiceSpec],
        verifier: TokenVerifier,
        on_stop: list[Callable[[], Awaitable[None]]] | None = None,
        readiness: list[Dependency] | None = None,
        tenant_gate: TenantGate | None = None,
        scope_resolver: ScopeResolver | None = None,
    ) -> GrpcApp:
        return cls(
            services=services,
            verifier=verifier,
            host=common.host,
            port=common.port,
            shutdown_grace_s=common.shutdown_grace_s,
            on_stop=list(on_stop or []),
            readiness=list(readiness or []),
            readiness_interval_s=common.readiness_interval_s,
            tenant_gate=tenant_gate,
            scope_resolver=scope_resolver,
            serve_reflection=common.grpc_reflection,
        )

    async def start(self) -> int:
        capabilities: dict[str, str] = {}
        unscoped: set[str] = set()
        for spec in self.services:
            capabilities.update(spec.full_capabilities())
            unscoped |= spec.full_unscoped()
        self.server = grpc.aio.server(
            interceptors=[
                aio_server_interceptor(),
                LoggingInterceptor(),
                ErrorInterceptor(),
                ScopeInterceptor(self.verifier, capabilities, self.tenant_gate, unscoped, self.scope_resolver),
                RequestValidationInterceptor(),
            ],
            options=list(SERVER_OPTIONS),
        )
        self.health = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = [spec.descriptor.full_name for spec in self.services]
        for spec in self.services:
            spec.register(self.server)
        if self.serve_reflection:
            reflection.enable(self.server, [*names, "grpc.health.v1.Health"])
        self.server.add_generic_rpc_handlers((NoSuchMethod(),))  # last: only what nothing else serves
        self.bound_port = self.server.add_insecure_port(f"{self.host}:{self.port}")
        if self.bound_port == 0:
            raise SettingsError(f"cannot listen on {self.host}:{self.port}")
        await self.server.start()
        for begin in self.on_start:  # background work (e.g. job workers) once the server listens
            await begin()
        for name in ["", *names]:
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self.probe = ReadinessProbe(self.readiness, self._set_ready, interval_s=self.readiness_interval_s)
        await self.probe.start()
        log.info("server_started", host=self.host, port=self.bound_port, services=names)
        return self.bound_port

    async def _set_ready(self, ready: bool) -> None:
        """Readiness is the named services' status; ``""`` (liveness) is left SERVING."""
        if self.health is None:
            return
        status = health_pb2.HealthCheckResponse.SERVING if ready else health_pb2.HealthCheckResponse.NOT_SERVING
        for spec in self.services:
            await self.health.set(spec.descriptor.full_name, status)

    async def stop(self) -> None:
        if self.server is None:
            return
        if self.probe is not None:
            await self.probe.stop()
        if self.health is not None:
            await self.health.enter_graceful_shutdown()
        stopping = asyncio.ensure_future(self.server.stop(self.shutdown_grace_s))
        await asyncio.sleep(0)  # the server takes no new call from here on
        for drain in self.on_drain:
            await drain()
        await stopping
        for close in self.on_stop:
            await close()
        log.info("server_stopped")
        self.server = None

    async def run_until_signalled(self) -> None:
        """Serve until SIGTERM or SIGINT, then stop gracefully."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        await stop.wait()
        log.info("shutdown_requested")
        await self.stop()
