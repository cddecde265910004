"""EventService over gRPC: the tenant's events from a cursor, as they commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import timestamp
from knowledge_ingest.domain.events import Event
from knowledge_ingest.events.usecases import EventUseCases

CAPABILITIES = {"WatchEvents": "corpus.read"}
Context = grpc.aio.ServicerContext


def event_message(event: Event) -> ingest_pb2.Event:
    detail = event.detail
    from_corpus = detail.get("from_corpus_id")
    return ingest_pb2.Event(
        event_id=str(event.event_id) if event.event_id else "",
        cursor=event.cursor,
        type=event.type.value,
        document_id=str(event.document_id) if event.document_id is not None else "",
        corpus_id=str(event.corpus_id) if event.corpus_id is not None else "",
        time=timestamp(event.time),
        chunk_count=int(detail.get("chunk_count", 0)),
        warnings=[str(w) for w in detail.get("warnings", ())],
        reason=str(detail.get("reason", "")),
        from_corpus_id=str(from_corpus) if from_corpus is not None else "",
        principals=[str(p) for p in detail.get("principals", ())],
        webhook_id=str(detail.get("webhook_id", "")),
        model_change=_model_change(detail) if "change_id" in detail else None,
    )


def _model_change(detail: dict) -> ingest_pb2.ModelChange:
    """A model change's event: the change as it was then (its figures when the gate ran)."""
    figures = detail.get("figures") or {}

    def evaluation(modes: dict | None) -> ingest_pb2.ModelEvaluation | None:
        if not modes:
            return None
        return ingest_pb2.ModelEvaluation(
            modes={
                m: ingest_pb2.ModeFigures(ndcg_at_10=f["ndcg_at_10"], recall_at_100=f["recall_at_100"])
                for m, f in modes.items()
            }
        )

    state = "MODEL_CHANGE_STATE_" + str(detail.get("state", "unspecified")).upper()
    return ingest_pb2.ModelChange(
        change_id=str(detail["change_id"]),
        from_model=str(detail.get("from_model", "")),
        to_model=str(detail.get("to_model", "")),
        state=cast(ingest_pb2.ModelChangeState, ingest_pb2.ModelChangeState.Value(state)),
        forced=bool(detail.get("forced", False)),
        gate_reason=str(detail.get("reason", "")),
        current_figures=evaluation(figures.get("current")),
        candidate_figures=evaluation(figures.get("candidate")),
    )


class EventServicer(ingest_pb2_grpc.EventServiceServicer):
    def __init__(self, events: EventUseCases) -> None:
        self._events = events

    async def WatchEvents(
        self, request: ingest_pb2.WatchEventsRequest, context: Context
    ) -> AsyncIterator[ingest_pb2.Event]:
        async for event in self._events.watch(current_scope(), request.after):
            yield event_message(event)


def service_spec(servicer: EventServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["EventService"],
        register=lambda server: ingest_pb2_grpc.add_EventServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
