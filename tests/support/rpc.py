"""gRPC call metadata and the one ErrorInfo of a failed call."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2


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
