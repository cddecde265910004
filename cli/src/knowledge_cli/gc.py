"""``knowledge gc``: one pass of content-index's blob garbage collection (dry run unless --apply).

It calls ``ContentIndexService/CollectGarbage`` directly (content-index is not behind the
gateway) with a service token (subject ``service:gc``, capability ``blob.admin``) signed with
``KNOWLEDGE_SERVICE_KEY_PATH`` when set (the Kubernetes CronJob mounts the service key), else
with the local stack's development key. The local stack runs the same pass every
``KNOWLEDGE_GC_EVERY_S`` seconds (up.py); docs/operations.md, "Garbage collection".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict, dataclass

import grpc
from google.protobuf.duration_pb2 import Duration
from knowledge.v1 import content_index_pb2, content_index_pb2_grpc
from knowledge_runtime.service_tokens import ServiceTokenSigner
from knowledge_runtime.settings import Env, ServiceKey, jwt_audience, jwt_issuer, service_address

from knowledge_cli.client import AUTH, FAILED, OK, UNREACHABLE

GC_TENANT = "platform"  # a pass spans every tenant; the claim only names who asks
GC_CAPABILITIES = ("blob.admin",)
TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class GcReport:
    applied: bool
    removed_count: int
    freed_bytes: int
    skipped_count: int
    orphan_removed_count: int
    orphan_freed_bytes: int

    def line(self) -> str:
        verb = "removed" if self.applied else "would remove"
        return (
            f"{verb} {self.removed_count} blob(s), {self.freed_bytes} bytes; "
            f"{self.orphan_removed_count} orphan file(s), {self.orphan_freed_bytes} bytes; "
            f"{self.skipped_count} skipped (referenced again during the pass)"
        )


def gc_token(env: Env | None = None) -> str:
    env = env or Env()
    key = ServiceKey.optional(env)
    if key is not None:
        signer = ServiceTokenSigner(key, issuer=jwt_issuer(env), audience=jwt_audience(env), subject="service:gc")
        return signer.token(GC_TENANT, GC_CAPABILITIES)
    from knowledge_cli.devtoken import mint_local_token

    return mint_local_token(GC_TENANT, capabilities=list(GC_CAPABILITIES), ttl_s=900, service="gc")


async def collect(
    address: str, token: str, *, apply: bool, min_age_s: int | None = None, max_blobs: int = 0
) -> GcReport:
    request = content_index_pb2.CollectGarbageRequest(dry_run=not apply, max_blobs=max_blobs)
    if min_age_s is not None:
        request.min_age.CopyFrom(Duration(seconds=min_age_s))
    async with grpc.aio.insecure_channel(address) as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        reply = await stub.CollectGarbage(request, metadata=[("authorization", f"Bearer {token}")], timeout=TIMEOUT_S)
    return GcReport(
        applied=apply,
        removed_count=reply.removed_count,
        freed_bytes=reply.freed_bytes,
        skipped_count=reply.skipped_count,
        orphan_removed_count=reply.orphan_removed_count,
        orphan_freed_bytes=reply.orphan_freed_bytes,
    )


def _run(options: argparse.Namespace) -> int:
    address = options.address or service_address("content-index")
    try:
        token = gc_token()
    except FileNotFoundError as error:
        print(f"knowledge: {error}", file=sys.stderr)
        return FAILED
    try:
        report = asyncio.run(
            collect(address, token, apply=options.apply, min_age_s=options.min_age, max_blobs=options.max_blobs)
        )
    except grpc.aio.AioRpcError as error:
        code = error.code()
        print(f"knowledge: gc failed: {code.name} {error.details() or ''}".rstrip(), file=sys.stderr)
        if code is grpc.StatusCode.UNAVAILABLE:
            return UNREACHABLE
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return AUTH
        return FAILED
    if options.json:
        print(json.dumps(asdict(report)))
    else:
        print(("" if options.apply else "dry run (nothing removed; --apply removes): ") + report.line())
    return OK


def add_parser(commands) -> None:
    gc = commands.add_parser(
        "gc",
        help="collect unreferenced blobs past their grace period (a dry run unless --apply)",
        description="One garbage-collection pass of content-index: blobs no document references, last "
        "written longer ago than the grace period (KNOWLEDGE_BLOB_GC_GRACE_S), and orphan files.",
    )
    gc.add_argument("--apply", action="store_true", help="remove them (default: only report what would go)")
    gc.add_argument("--min-age", type=int, default=None, help="seconds; a longer grace period than the configured one")
    gc.add_argument("--max-blobs", type=int, default=0, help="at most this many blobs in this pass (0: no limit)")
    gc.add_argument("--address", help="content-index host:port (default KNOWLEDGE_CONTENT_INDEX_ADDRESS)")
    gc.add_argument("--json", action="store_true", help="print the report as JSON")
    gc.set_defaults(run=_run)
