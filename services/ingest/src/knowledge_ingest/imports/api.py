"""ImportService over gRPC: fenced imports, change findings and auto-indexing."""

from __future__ import annotations

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.pagination import decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import timestamp, upload_accepted
from knowledge_ingest.domain.imports import Binding, Finding, PassReport
from knowledge_ingest.guards import page_of
from knowledge_ingest.imports.usecases import ImportUseCases

CAPABILITIES = {
    "ImportPath": "document.import",
    "ListImportRoots": "document.import",
    "SetImportBinding": "imports.admin",
    "ListImportBindings": "document.import",
    "ScanImports": "document.import",
    "ListImportFindings": "document.import",
    "AcceptImportFinding": "document.import",
    "DismissImportFinding": "document.import",
}
Context = grpc.aio.ServicerContext


def binding_message(binding: Binding) -> ingest_pb2.ImportBinding:
    message = ingest_pb2.ImportBinding(
        corpus_id=str(binding.corpus_id),
        root=binding.root_name,
        mode=binding.mode.value,
        set_by=binding.set_by,
        update_time=timestamp(binding.update_time),
    )
    if binding.last_scan_time is not None:
        message.last_scan_time.CopyFrom(timestamp(binding.last_scan_time))
    return message


def finding_message(finding: Finding) -> ingest_pb2.ImportFinding:
    message = ingest_pb2.ImportFinding(
        finding_id=str(finding.finding_id),
        corpus_id=str(finding.corpus_id),
        root=finding.root_name,
        path=finding.path,
        content_hash=finding.content_hash,
        size_bytes=finding.size_bytes,
        kind=finding.kind,
        state=finding.state.value,
        job_id=str(finding.job_id) if finding.job_id else "",
        decided_by=finding.decided_by or "",
        create_time=timestamp(finding.create_time),
    )
    if finding.decided_time is not None:
        message.decide_time.CopyFrom(timestamp(finding.decided_time))
    return message


def pass_message(report: PassReport) -> ingest_pb2.ScanImportsResponse:
    return ingest_pb2.ScanImportsResponse(
        roots=report.roots,
        files_seen=report.files_seen,
        findings_recorded=report.findings_recorded,
        jobs_started=report.jobs_started,
        errors=report.errors,
    )


class ImportServicer(ingest_pb2_grpc.ImportServiceServicer):
    def __init__(self, imports: ImportUseCases) -> None:
        self._imports = imports

    async def ImportPath(
        self, request: ingest_pb2.ImportPathRequest, context: Context
    ) -> ingest_pb2.ImportPathResponse:
        done = await self._imports.import_paths(current_scope(), request.corpus_id, list(request.paths))
        return ingest_pb2.ImportPathResponse(
            items=[ingest_pb2.ImportPathItem(resolved_path=path, job=upload_accepted(job)) for path, job in done]
        )

    async def ListImportRoots(
        self, request: ingest_pb2.ListImportRootsRequest, context: Context
    ) -> ingest_pb2.ListImportRootsResponse:
        roots = await self._imports.list_roots(current_scope())
        return ingest_pb2.ListImportRootsResponse(
            roots=[ingest_pb2.ImportRootInfo(name=r.name, path=str(r.path)) for r in roots]
        )

    async def SetImportBinding(
        self, request: ingest_pb2.SetImportBindingRequest, context: Context
    ) -> ingest_pb2.ImportBinding:
        binding = await self._imports.set_binding(current_scope(), request.corpus_id, request.root, request.mode)
        return binding_message(binding)

    async def ListImportBindings(
        self, request: ingest_pb2.ListImportBindingsRequest, context: Context
    ) -> ingest_pb2.ListImportBindingsResponse:
        bindings = await self._imports.bindings(current_scope(), request.corpus_id)
        return ingest_pb2.ListImportBindingsResponse(bindings=[binding_message(b) for b in bindings])

    async def ScanImports(
        self, request: ingest_pb2.ScanImportsRequest, context: Context
    ) -> ingest_pb2.ScanImportsResponse:
        return pass_message(await self._imports.scan(current_scope(), request.corpus_id))

    async def ListImportFindings(
        self, request: ingest_pb2.ListImportFindingsRequest, context: Context
    ) -> ingest_pb2.ListImportFindingsResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        findings, next_after = await self._imports.findings(current_scope(), request.corpus_id, request.state, page)
        return ingest_pb2.ListImportFindingsResponse(
            findings=[finding_message(f) for f in findings], next_page_token=encode_page_token(next_after)
        )

    async def AcceptImportFinding(
        self, request: ingest_pb2.AcceptImportFindingRequest, context: Context
    ) -> ingest_pb2.AcceptImportFindingResponse:
        finding, job = await self._imports.accept(current_scope(), request.finding_id)
        return ingest_pb2.AcceptImportFindingResponse(finding=finding_message(finding), job=upload_accepted(job))

    async def DismissImportFinding(
        self, request: ingest_pb2.DismissImportFindingRequest, context: Context
    ) -> ingest_pb2.ImportFinding:
        return finding_message(await self._imports.dismiss(current_scope(), request.finding_id))


def service_spec(servicer: ImportServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["ImportService"],
        register=lambda server: ingest_pb2_grpc.add_ImportServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
