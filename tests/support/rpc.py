"""gRPC call metadata and the one ErrorInfo of a failed call."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2
from knowledge.v1 import ingest_pb2_grpc


def auth(token: str) -> list[tuple[str, str]]:
    """gRPC call metadata carrying ``token`` as the bearer."""
    return [("authorization", f"Bearer {token}")]


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The one ErrorInfo of a failed call's google.rpc.Status (the house style allows no other)."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    status = status_pb2.Status.FromString(raw)
    assert len(status.details) == 1
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return info


class IngestStub:
    """Every gRPC service of ingest over one channel, each method by its name (``CreateCorpus``,
    ``UploadDocument``, ``WatchEvents``...): the tests call ingest as one client does."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stubs = [
            ingest_pb2_grpc.CorpusServiceStub(channel),
            ingest_pb2_grpc.DocumentServiceStub(channel),
            ingest_pb2_grpc.IngestJobServiceStub(channel),
            ingest_pb2_grpc.ImportServiceStub(channel),
            ingest_pb2_grpc.TenantServiceStub(channel),
            ingest_pb2_grpc.EventServiceStub(channel),
            ingest_pb2_grpc.PassageServiceStub(channel),
            ingest_pb2_grpc.WebhookServiceStub(channel),
        ]

    def __getattr__(self, name: str):
        for stub in self._stubs:
            method = getattr(stub, name, None)
            if method is not None:
                return method
        raise AttributeError(f"no ingest service has a method {name}")
