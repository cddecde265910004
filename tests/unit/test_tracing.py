"""Spans are recorded only where they are exported: without an OTLP endpoint each span still has
the ids that logs carry and calls propagate, but nothing is kept of it."""

from knowledge_runtime.tracing import new_provider
from opentelemetry.sdk.trace import TracerProvider


def test_without_an_endpoint_a_span_keeps_its_ids_but_records_nothing():
    tracer = new_provider("test", None).get_tracer("test")
    with tracer.start_as_current_span("parent") as parent, tracer.start_as_current_span("child") as child:
        assert not parent.is_recording() and not child.is_recording()
        assert parent.get_span_context().is_valid and child.get_span_context().is_valid
        assert child.get_span_context().trace_id == parent.get_span_context().trace_id


def test_with_an_endpoint_spans_are_recorded_for_export():
    provider: TracerProvider = new_provider("test", "127.0.0.1:4317")  # the exporter connects only to export
    try:
        span = provider.get_tracer("test").start_span("step")  # not ended: nothing is sent
        assert span.is_recording()
    finally:
        provider.shutdown()
