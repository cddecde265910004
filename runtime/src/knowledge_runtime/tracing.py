"""OpenTelemetry: one tracer provider per process, OTLP export when configured.

Spans are named ``<service>.<step>``. Incoming RPCs get a server span from the
OpenTelemetry gRPC interceptor (which also reads ``traceparent``); outgoing calls made
through :func:`knowledge_runtime.clients.channel` propagate it.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_configured = False


def configure_tracing(service: str, otlp_endpoint: str | None) -> TracerProvider:
    """Install the process-wide provider once; later calls return the existing one."""
    global _configured
    provider = trace.get_tracer_provider()
    if _configured and isinstance(provider, TracerProvider):
        return provider
    provider = TracerProvider(resource=Resource.create({"service.name": f"knowledge-{service}"}))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    trace.set_tracer_provider(provider)
    _configured = True
    return provider


def tracer(name: str = "knowledge") -> trace.Tracer:
    return trace.get_tracer(name)


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")
