"""ModelChangeService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

from typing import cast

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import MODELS_ADMIN, current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.domain.evaluation import EvaluationSet, JudgedQuery
from knowledge_ingest.domain.model_change import Figures, ModeFigures
from knowledge_ingest.models.evaluation import EvaluationSetUseCases
from knowledge_ingest.models.usecases import ChangeView, ModelChangeUseCases

CAPABILITIES = {
    "StartModelChange": MODELS_ADMIN,
    "GetModelChange": MODELS_ADMIN,
    "SwapModel": MODELS_ADMIN,
    "RollbackModelChange": MODELS_ADMIN,
    "CancelModelChange": MODELS_ADMIN,
    "PutEvaluationSet": MODELS_ADMIN,
    "DeleteEvaluationSet": MODELS_ADMIN,
}
Context = grpc.aio.ServicerContext


def _stamp(seconds: float | None) -> Timestamp | None:
    if seconds is None:
        return None
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _evaluation(figures: Figures | None) -> ingest_pb2.ModelEvaluation | None:
    if figures is None:
        return None
    return ingest_pb2.ModelEvaluation(
        modes={
            mode: ingest_pb2.ModeFigures(ndcg_at_10=f.ndcg_at_10, recall_at_100=f.recall_at_100)
            for mode, f in figures.modes.items()
        }
    )


def figures_of(message: ingest_pb2.ModelEvaluation, present: bool) -> Figures | None:
    if not present or not message.modes:
        return None
    return Figures(
        modes={
            mode.upper(): ModeFigures(ndcg_at_10=f.ndcg_at_10, recall_at_100=f.recall_at_100)
            for mode, f in message.modes.items()
        }
    )


def change_message(view: ChangeView) -> ingest_pb2.ModelChange:
    change, shown = view.change, view.progress
    message = ingest_pb2.ModelChange(
        change_id=str(change.change_id),
        from_model=change.from_model,
        to_model=change.to_model,
        to_dimension=change.to_dimension,
        state=cast(
            ingest_pb2.ModelChangeState, ingest_pb2.ModelChangeState.Value("MODEL_CHANGE_STATE_" + change.state.name)
        ),
        chunks_done=shown.done,
        chunks_total=shown.total,
        chunks_per_second=shown.per_s,
        forced=change.forced,
        gate_reason=change.gate_why,
        current_figures=_evaluation(change.current_figures),
        candidate_figures=_evaluation(change.candidate_figures),
        reading_model=view.reading_model,
        create_time=_stamp(change.create_time),
        swap_time=_stamp(change.swap_time),
        end_time=_stamp(change.end_time),
    )
    if shown.eta_s is not None:
        message.eta_seconds = shown.eta_s
    return message


def evaluation_set_message(stored: EvaluationSet) -> ingest_pb2.EvaluationSet:
    return ingest_pb2.EvaluationSet(
        name=stored.name,
        corpus_id=str(stored.corpus_id),
        queries=[
            ingest_pb2.EvaluationQuery(query_id=q.query_id, text=q.text, relevant=dict(q.relevant))
            for q in stored.queries
        ],
        update_time=_stamp(stored.update_time),
    )


class ModelChangeServicer(ingest_pb2_grpc.ModelChangeServiceServicer):
    def __init__(self, changes: ModelChangeUseCases, sets: EvaluationSetUseCases) -> None:
        self._changes = changes
        self._sets = sets

    async def PutEvaluationSet(
        self, request: ingest_pb2.PutEvaluationSetRequest, context: Context
    ) -> ingest_pb2.EvaluationSet:
        queries = [JudgedQuery(q.query_id, q.text, dict(q.relevant)) for q in request.queries]
        stored = await self._sets.put(current_scope(), request.name, request.corpus_id, queries)
        return evaluation_set_message(stored)

    async def DeleteEvaluationSet(
        self, request: ingest_pb2.DeleteEvaluationSetRequest, context: Context
    ) -> ingest_pb2.DeleteEvaluationSetResponse:
        await self._sets.delete(current_scope(), request.name)
        return ingest_pb2.DeleteEvaluationSetResponse()

    async def StartModelChange(
        self, request: ingest_pb2.StartModelChangeRequest, context: Context
    ) -> ingest_pb2.StartModelChangeResponse:
        return ingest_pb2.StartModelChangeResponse(
            change=change_message(await self._changes.start(current_scope(), request.to_model))
        )

    async def GetModelChange(
        self, request: ingest_pb2.GetModelChangeRequest, context: Context
    ) -> ingest_pb2.ModelChange:
        current_scope()
        return change_message(await self._changes.get())

    async def SwapModel(self, request: ingest_pb2.SwapModelRequest, context: Context) -> ingest_pb2.SwapModelResponse:
        current_scope()
        view = await self._changes.swap(
            figures_of(request.current, request.HasField("current")),
            figures_of(request.candidate, request.HasField("candidate")),
            force=request.force,
            margin=request.margin,
        )
        return ingest_pb2.SwapModelResponse(change=change_message(view))

    async def RollbackModelChange(
        self, request: ingest_pb2.RollbackModelChangeRequest, context: Context
    ) -> ingest_pb2.RollbackModelChangeResponse:
        current_scope()
        return ingest_pb2.RollbackModelChangeResponse(change=change_message(await self._changes.rollback()))

    async def CancelModelChange(
        self, request: ingest_pb2.CancelModelChangeRequest, context: Context
    ) -> ingest_pb2.CancelModelChangeResponse:
        current_scope()
        return ingest_pb2.CancelModelChangeResponse(change=change_message(await self._changes.cancel()))


def service_spec(servicer: ModelChangeServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["ModelChangeService"],
        register=lambda server: ingest_pb2_grpc.add_ModelChangeServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
