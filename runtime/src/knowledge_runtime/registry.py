"""The services of the stack, one entry each: the only place that names their ports and settings.

A process (``python -m knowledge_ingest``) serves one or more gRPC services; its entry says where
it listens by default, the ``KNOWLEDGE_<PREFIX>_*`` settings that move it, the gRPC full names it
serves, whether the gateway exposes it, and the database role it logs in as. Everything that
starts, addresses, probes or routes to a service reads its entry: the settings, the CLI's stack,
the gateway's clusters, routes and descriptor set, and the tests. Adding a gRPC service to a
process is one more name in its entry; a unit test fails while a generated ``knowledge.v1``
service belongs to no entry.

A process may speak HTTP instead (the MCP adapter): it serves no gRPC service, names the path the
gateway routes to it, answers its probes at :data:`HTTP_LIVENESS_PATH` and
:data:`HTTP_READINESS_PATH`, and may hold no database role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from google.protobuf.descriptor import ServiceDescriptor

GRPC_PACKAGE = "knowledge.v1"  # the generated modules every full name below comes from
# An HTTP process's probes: alive while it runs; ready while it serves (503 once it drains).
HTTP_LIVENESS_PATH = "/livez"
HTTP_READINESS_PATH = "/readyz"


@dataclass(frozen=True, slots=True)
class ServiceEntry:
    name: str  # as the stack, the logs and the Kubernetes objects call it: "documents-ai"
    port: int  # the default port; each is configurable, so that two stacks can run side by side
    settings_prefix: str  # KNOWLEDGE_<prefix>_PORT and KNOWLEDGE_<prefix>_ADDRESS
    grpc_services: tuple[str, ...]  # full names; the first is the readiness (named health) service
    public: bool  # exposed through the gateway; the others stay internal
    database_role: str | None  # its least-privilege role (migration 0002 and later); None: no database
    module: str  # what `python -m` runs
    http_path: str | None = None  # an HTTP process: the one path the gateway routes to it

    @property
    def is_http(self) -> bool:
        return self.http_path is not None

    @property
    def health_name(self) -> str:
        """The named gRPC health service that reports readiness (Envoy's checks, Kubernetes' probes)."""
        if not self.grpc_services:
            raise ValueError(f"{self.name} serves HTTP: its readiness is {HTTP_READINESS_PATH}")
        return self.grpc_services[0]

    @property
    def port_setting(self) -> str:
        """The ``Env`` name of its port (``KNOWLEDGE_`` is the reader's prefix)."""
        return f"{self.settings_prefix}_PORT"

    @property
    def address_setting(self) -> str:
        """The ``Env`` name of where other processes reach it."""
        return f"{self.settings_prefix}_ADDRESS"


# In start order: each one's dependencies come before it.
SERVICES: tuple[ServiceEntry, ...] = (
    ServiceEntry(
        name="content-index",
        port=50151,
        settings_prefix="CONTENT_INDEX",
        grpc_services=("knowledge.v1.ContentIndexService",),
        public=False,
        database_role="knowledge_content_index",
        module="knowledge_content_index",
    ),
    ServiceEntry(
        name="embedder",
        port=50152,
        settings_prefix="EMBEDDER",
        grpc_services=("knowledge.v1.EmbedderService",),
        public=False,
        database_role="knowledge_embedder",
        module="knowledge_embedder",
    ),
    ServiceEntry(
        name="ingest",
        port=50153,
        settings_prefix="INGEST",
        # CorpusService first: it names ingest's readiness (probes, the gateway's health check).
        grpc_services=(
            "knowledge.v1.CorpusService",
            "knowledge.v1.DocumentService",
            "knowledge.v1.IngestJobService",
            "knowledge.v1.ImportService",
            "knowledge.v1.TenantService",
            "knowledge.v1.EventService",
            "knowledge.v1.PassageService",
            "knowledge.v1.WebhookService",
            "knowledge.v1.ModelChangeService",
        ),
        public=True,
        database_role="knowledge_ingest",
        module="knowledge_ingest",
    ),
    ServiceEntry(
        name="search",
        port=50154,
        settings_prefix="SEARCH",
        grpc_services=("knowledge.v1.SearchService",),
        public=True,
        database_role="knowledge_search",
        module="knowledge_search",
    ),
    ServiceEntry(
        name="documents-ai",
        port=50155,
        settings_prefix="DOCUMENTS_AI",
        grpc_services=("knowledge.v1.DocumentsAIService",),
        public=True,
        database_role="knowledge_documents_ai",
        module="knowledge_documents_ai",
    ),
    # The agents' tools over the Model Context Protocol: a client of the public services (and of
    # the embedder's anchors), with the caller's token; no database, no model.
    ServiceEntry(
        name="mcp",
        port=50156,
        settings_prefix="MCP",
        grpc_services=(),
        public=True,
        database_role=None,
        module="knowledge_mcp",
        http_path="/mcp",
    ),
)

SERVICE_NAMES: tuple[str, ...] = tuple(entry.name for entry in SERVICES)
_BY_NAME = {entry.name: entry for entry in SERVICES}
_BY_GRPC_NAME = {full: entry for entry in SERVICES for full in entry.grpc_services}


def service(name: str) -> ServiceEntry:
    """The entry of a service by its name ("ingest"); KeyError names the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no service {name!r}; the services are {', '.join(SERVICE_NAMES)}") from None


def public_services() -> tuple[ServiceEntry, ...]:
    """The gRPC processes the gateway exposes (transcoded, routed by their full names), in registry
    order (their clusters' and routes' order)."""
    return tuple(entry for entry in SERVICES if entry.public and not entry.is_http)


def public_http_services() -> tuple[ServiceEntry, ...]:
    """The HTTP processes the gateway routes one path each to, in registry order."""
    return tuple(entry for entry in SERVICES if entry.public and entry.is_http)


def grpc_processes() -> tuple[ServiceEntry, ...]:
    """The processes that serve gRPC (health-checked over gRPC), in start order."""
    return tuple(entry for entry in SERVICES if not entry.is_http)


def with_database() -> tuple[ServiceEntry, ...]:
    """The processes that log in to the database, each with its own role."""
    return tuple(entry for entry in SERVICES if entry.database_role is not None)


def serving(grpc_name: str) -> ServiceEntry:
    """The entry whose process serves a gRPC full name ("knowledge.v1.SearchService")."""
    try:
        return _BY_GRPC_NAME[grpc_name]
    except KeyError:
        raise KeyError(f"no service serves {grpc_name!r}: add it to its entry in knowledge_runtime.registry") from None


def generated_services() -> dict[str, ServiceDescriptor]:
    """Every gRPC service the generated ``knowledge.v1`` modules define, by full name.

    Imports each generated module (so each is in protobuf's default pool) only when asked: the
    settings read this module, and most processes never need a descriptor."""
    import importlib
    import pkgutil

    import knowledge.v1

    found: dict[str, ServiceDescriptor] = {}
    for module_info in pkgutil.iter_modules(knowledge.v1.__path__):
        if module_info.name.endswith("_pb2"):
            module = importlib.import_module(f"{GRPC_PACKAGE}.{module_info.name}")
            found |= {service.full_name: service for service in module.DESCRIPTOR.services_by_name.values()}
    return found


def grpc_descriptor(grpc_name: str) -> ServiceDescriptor:
    """The generated descriptor of a gRPC full name, from protobuf's default pool."""
    from google.protobuf import descriptor_pool

    generated_services()  # every generated file registered in the pool
    return descriptor_pool.Default().FindServiceByName(grpc_name)
