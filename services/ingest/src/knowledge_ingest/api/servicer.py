"""IngestService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import AUDIT_READ, PLATFORM_ADMIN, current_scope
from knowledge_runtime.errors import Unimplemented
from knowledge_runtime.pagination import decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import (
    batch_items,
    binding_message,
    change_message,
    corpus_message,
    document_message,
    event_message,
    finding_message,
    job_message,
    pass_message,
    text_accepted,
    text_item,
    text_message,
    tombstone_message,
    upload_accepted,
)
from knowledge_ingest.corpora.usecases import CorpusUseCases, page_of
from knowledge_ingest.deletion.usecases import TombstoneUseCases
from knowledge_ingest.documents.usecases import MAX_LISTED_TOMBSTONES, DocumentUseCases
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.events.usecases import EventUseCases
from knowledge_ingest.imports.usecases import ImportUseCases
from knowledge_ingest.jobs.upload_stream import upload_source
from knowledge_ingest.jobs.uploads import MAX_BATCH_ITEMS, UploadUseCases
from knowledge_ingest.jobs.usecases import JobUseCases
from knowledge_ingest.jobs.web import WebPageUseCases
from knowledge_ingest.tenants.convert import quotas_from, settings_message, usage_message
from knowledge_ingest.tenants.usecases import TenantUseCases

CAPABILITIES = {
    "CreateCorpus": "corpus.create",
    "ListCorpora": "corpus.read",
    "ListDocuments": "corpus.read",
    "GetDocument": "corpus.read",
    "GetDocumentText": "corpus.read",
    "GetPromptContext": "corpus.read",
    "MoveDocuments": "document.upload",
    "DeleteDocument": "document.upload",
    "UploadDocument": "document.upload",
    "GetIngestJob": "document.upload",
    "CancelIngestJob": "document.upload",
    "RetryIngestJob": "document.upload",
    "IngestText": "document.upload",
    "IngestTexts": "document.upload",
    "BatchIngestTexts": "document.upload",
    "IngestUrl": "document.upload",
    "BindCorpus": "corpus.bind",
    # fenced imports, change findings, auto-index
    "ImportPath": "document.import",
    "ListImportRoots": "document.import",
    "SetImportBinding": "imports.admin",
    "ListImportBindings": "document.import",
    "ScanImports": "document.import",
    "ListImportFindings": "document.import",
    "AcceptImportFinding": "document.import",
    "DismissImportFinding": "document.import",
    "GetTenantSettings": PLATFORM_ADMIN,
    "UpdateTenantSettings": PLATFORM_ADMIN,
    "GetUsage": "corpus.read",
    "WatchDocuments": "corpus.read",
    "BatchGetDocuments": "corpus.read",
    "WatchEvents": "corpus.read",
    # tombstones, corpus deletion
    "ListTombstones": AUDIT_READ,
    "DeleteCorpus": "corpus.create",
}
Context = grpc.aio.ServicerContext


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(
        self,
        corpora: CorpusUseCases,
        documents: DocumentUseCases,
        uploads: UploadUseCases,
        jobs: JobUseCases,
        web: WebPageUseCases | None = None,
        imports: ImportUseCases | None = None,
        tenants: TenantUseCases | None = None,
        events: EventUseCases | None = None,
        tombstones: TombstoneUseCases | None = None,
    ) -> None:
        self._corpora = corpora
        self._documents = documents
        self._uploads = uploads
        self._jobs = jobs
        self._web = web
        self._imports = imports
        self._tenants = tenants
        self._events = events
        self._tombstones = tombstones

    async def CreateCorpus(self, request: ingest_pb2.CreateCorpusRequest, context: Context) -> ingest_pb2.Corpus:
        corpus = await self._corpora.create_corpus(
            current_scope(), request.name, request.description, request.confidentiality, request.platform_wide
        )
        return corpus_message(corpus)

    async def ListCorpora(
        self, request: ingest_pb2.ListCorporaRequest, context: Context
    ) -> ingest_pb2.ListCorporaResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        corpora, next_after = await self._corpora.list_corpora(current_scope(), page)
        return ingest_pb2.ListCorporaResponse(
            corpora=[corpus_message(c) for c in corpora], next_page_token=encode_page_token(next_after)
        )

    async def UploadDocument(self, request_iterator, context: Context) -> ingest_pb2.UploadDocumentResponse:
        source = await upload_source(request_iterator, max_body_bytes=self._uploads.max_upload_bytes)
        job = await self._uploads.upload(current_scope(), source)
        return ingest_pb2.UploadDocumentResponse(
            job_id=str(job.job_id), filename=job.filename, status="ingesting", corpus_id=str(job.corpus_id)
        )

    async def IngestText(
        self, request: ingest_pb2.IngestTextRequest, context: Context
    ) -> ingest_pb2.IngestTextResponse:
        if request.system_corpus:
            if request.corpus_id or request.document_id or request.source_url:
                raise InvalidRequest(
                    "system_corpus names the target: give no corpus_id, document_id or source_url with it",
                    field="system_corpus",
                )
            job = await self._uploads.ingest_housekeeping(
                current_scope(), request.system_corpus, request.text, request.title, request.about_subject
            )
            return text_accepted(job)
        if request.about_subject:
            raise InvalidRequest("about_subject is only for a system_corpus entry", field="about_subject")
        job = await self._uploads.ingest_text(
            current_scope(), request.corpus_id, request.text, request.title, request.source_url, request.document_id
        )
        return text_accepted(job)

    async def IngestTexts(self, request_iterator, context: Context) -> ingest_pb2.IngestTextsResponse:
        items = []
        async for message in request_iterator:
            items += [text_item(item) for item in message.items]
            if len(items) > MAX_BATCH_ITEMS:  # refused before anything is stored
                raise InvalidRequest(f"at most {MAX_BATCH_ITEMS} items per call; split the batch", field="items")
        answers, accepted = batch_items(await self._uploads.ingest_texts(current_scope(), items))
        return ingest_pb2.IngestTextsResponse(
            items=answers, accepted_count=accepted, rejected_count=len(answers) - accepted
        )

    async def BatchIngestTexts(
        self, request: ingest_pb2.BatchIngestTextsRequest, context: Context
    ) -> ingest_pb2.BatchIngestTextsResponse:
        outcomes = await self._uploads.ingest_texts(current_scope(), [text_item(item) for item in request.items])
        answers, accepted = batch_items(outcomes)
        return ingest_pb2.BatchIngestTextsResponse(
            items=answers, accepted_count=accepted, rejected_count=len(answers) - accepted
        )

    async def IngestUrl(self, request: ingest_pb2.IngestUrlRequest, context: Context) -> ingest_pb2.IngestUrlResponse:
        if self._web is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this ingest does not fetch web pages")
        assert self._web is not None
        job = await self._web.ingest_url(current_scope(), request.corpus_id, request.url)
        return ingest_pb2.IngestUrlResponse(
            job_id=str(job.job_id),
            filename=job.filename,
            status="ingesting",
            corpus_id=str(job.corpus_id),
            source_url=job.fetch_url or "",
        )

    async def GetIngestJob(self, request: ingest_pb2.GetIngestJobRequest, context: Context) -> ingest_pb2.IngestJob:
        return job_message(await self._jobs.get(current_scope(), request.job_id))

    async def CancelIngestJob(self, request, context: Context) -> ingest_pb2.CancelIngestJobResponse:
        return ingest_pb2.CancelIngestJobResponse(
            job=job_message(await self._jobs.cancel(current_scope(), request.job_id))
        )

    async def RetryIngestJob(self, request, context: Context) -> ingest_pb2.RetryIngestJobResponse:
        return ingest_pb2.RetryIngestJobResponse(
            job=job_message(await self._jobs.retry(current_scope(), request.job_id))
        )

    async def GetDocument(self, request: ingest_pb2.GetDocumentRequest, context: Context) -> ingest_pb2.Document:
        return document_message(await self._documents.get(current_scope(), request.document_id))

    async def ListDocuments(self, request, context: Context) -> ingest_pb2.ListDocumentsResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        documents, next_after = await self._documents.list(current_scope(), request.corpus_id, page)
        return ingest_pb2.ListDocumentsResponse(
            documents=[document_message(d) for d in documents], next_page_token=encode_page_token(next_after)
        )

    async def GetDocumentText(self, request, context: Context) -> ingest_pb2.GetDocumentTextResponse:
        return text_message(await self._documents.text(current_scope(), request.document_id, request.page))

    async def MoveDocuments(self, request: ingest_pb2.MoveDocumentsRequest, context: Context):
        moved = await self._documents.move(
            current_scope(),
            request.target_corpus_id,
            list(request.document_ids),
            request.source_corpus_id,
            request.all_documents,
        )
        return ingest_pb2.MoveDocumentsResponse(
            moved_count=moved.count, moved_document_ids=[str(d) for d in moved.document_ids]
        )

    async def DeleteDocument(self, request, context: Context) -> ingest_pb2.DeleteDocumentResponse:
        deletion = await self._tombstone_cases().delete_document(current_scope(), request.document_id, request.reason)
        return ingest_pb2.DeleteDocumentResponse(
            document_id=str(deletion.tombstone.document_id),
            deleted_chunk_count=deletion.tombstone.chunk_count,
            cancelled_job_id=deletion.cancelled_job_id or "",
            tombstone=tombstone_message(deletion.tombstone),
        )

    async def DeleteCorpus(self, request, context: Context) -> ingest_pb2.DeleteCorpusResponse:
        tombstones = await self._tombstone_cases().delete_corpus(
            current_scope(), request.corpus_id, request.delete_documents
        )
        return ingest_pb2.DeleteCorpusResponse(
            corpus_id=request.corpus_id,
            deleted_document_count=len(tombstones),
            tombstones=[tombstone_message(t) for t in tombstones[:MAX_LISTED_TOMBSTONES]],
        )

    async def ListTombstones(self, request, context: Context) -> ingest_pb2.ListTombstonesResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        tombstones, next_after = await self._tombstone_cases().list(current_scope(), request.corpus_id, page)
        return ingest_pb2.ListTombstonesResponse(
            tombstones=[tombstone_message(t) for t in tombstones], next_page_token=encode_page_token(next_after)
        )

    def _tombstone_cases(self) -> TombstoneUseCases:
        if self._tombstones is None:
            raise Unimplemented("deletion is not wired in this ingest")
        return self._tombstones

    async def GetPromptContext(self, request, context: Context) -> ingest_pb2.GetPromptContextResponse:
        text, documents, corpora = await self._documents.prompt_context(current_scope())
        return ingest_pb2.GetPromptContextResponse(text=text, document_count=documents, corpus_count=corpora)

    # ---- scopes ----
    async def BindCorpus(
        self, request: ingest_pb2.BindCorpusRequest, context: Context
    ) -> ingest_pb2.BindCorpusResponse:
        bound = await self._corpora.bind_corpus(current_scope(), request.corpus_id, request.scope)
        return ingest_pb2.BindCorpusResponse(corpus=corpus_message(bound))

    # ---- fenced imports, change findings, auto-index ----

    @property
    def imports(self) -> ImportUseCases | None:
        return self._imports

    async def _imports_or_abort(self, context: Context) -> ImportUseCases:
        if self._imports is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this ingest does not import files")
        assert self._imports is not None
        return self._imports

    async def ImportPath(
        self, request: ingest_pb2.ImportPathRequest, context: Context
    ) -> ingest_pb2.ImportPathResponse:
        imports = await self._imports_or_abort(context)
        done = await imports.import_paths(current_scope(), request.corpus_id, list(request.paths))
        return ingest_pb2.ImportPathResponse(
            items=[ingest_pb2.ImportPathItem(resolved_path=path, job=upload_accepted(job)) for path, job in done]
        )

    async def ListImportRoots(self, request, context: Context) -> ingest_pb2.ListImportRootsResponse:
        roots = await (await self._imports_or_abort(context)).list_roots(current_scope())
        return ingest_pb2.ListImportRootsResponse(
            roots=[ingest_pb2.ImportRootInfo(name=r.name, path=str(r.path)) for r in roots]
        )

    async def SetImportBinding(self, request, context: Context) -> ingest_pb2.ImportBinding:
        imports = await self._imports_or_abort(context)
        binding = await imports.set_binding(current_scope(), request.corpus_id, request.root, request.mode)
        return binding_message(binding)

    async def ListImportBindings(self, request, context: Context) -> ingest_pb2.ListImportBindingsResponse:
        bindings = await (await self._imports_or_abort(context)).bindings(current_scope(), request.corpus_id)
        return ingest_pb2.ListImportBindingsResponse(bindings=[binding_message(b) for b in bindings])

    async def ScanImports(self, request, context: Context) -> ingest_pb2.ScanImportsResponse:
        report = await (await self._imports_or_abort(context)).scan(current_scope(), request.corpus_id)
        return pass_message(report)

    async def ListImportFindings(self, request, context: Context) -> ingest_pb2.ListImportFindingsResponse:
        imports = await self._imports_or_abort(context)
        page = page_of(request.page_size, decode_page_token(request.page_token))
        findings, next_after = await imports.findings(current_scope(), request.corpus_id, request.state, page)
        return ingest_pb2.ListImportFindingsResponse(
            findings=[finding_message(f) for f in findings], next_page_token=encode_page_token(next_after)
        )

    async def AcceptImportFinding(self, request, context: Context) -> ingest_pb2.AcceptImportFindingResponse:
        imports = await self._imports_or_abort(context)
        finding, job = await imports.accept(current_scope(), request.finding_id)
        return ingest_pb2.AcceptImportFindingResponse(finding=finding_message(finding), job=upload_accepted(job))

    async def DismissImportFinding(self, request, context: Context) -> ingest_pb2.ImportFinding:
        imports = await self._imports_or_abort(context)
        return finding_message(await imports.dismiss(current_scope(), request.finding_id))

    # ---- enablement, quotas and usage ----

    def _tenant_cases(self) -> TenantUseCases:
        if self._tenants is None:
            raise Unimplemented("this ingest was wired without tenant settings")
        return self._tenants

    async def GetTenantSettings(self, request, context: Context) -> ingest_pb2.TenantSettings:
        return settings_message(await self._tenant_cases().get_settings(current_scope(), request.tenant))

    async def UpdateTenantSettings(self, request, context: Context) -> ingest_pb2.UpdateTenantSettingsResponse:
        if not request.HasField("enabled"):
            raise InvalidRequest("enabled is required (true or false)", field="enabled")
        settings = await self._tenant_cases().update_settings(
            current_scope(), request.tenant, request.enabled, quotas_from(request.quotas)
        )
        return ingest_pb2.UpdateTenantSettingsResponse(settings=settings_message(settings))

    async def GetUsage(self, request: ingest_pb2.GetUsageRequest, context: Context) -> ingest_pb2.Usage:
        return usage_message(await self._tenant_cases().usage(current_scope(), request.period))

    # ---- a live document list ----

    async def WatchDocuments(self, request: ingest_pb2.WatchDocumentsRequest, context: Context):
        if self._documents.feed is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this ingest does not watch documents")
        async for change in self._documents.watch(current_scope(), request.corpus_id):
            yield change_message(change)

    async def BatchGetDocuments(self, request, context: Context) -> ingest_pb2.BatchGetDocumentsResponse:
        documents, missing = await self._documents.batch_get(current_scope(), list(request.document_ids))
        return ingest_pb2.BatchGetDocumentsResponse(
            documents=[document_message(d) for d in documents], not_found_ids=missing
        )

    # ---- events ----

    async def WatchEvents(self, request: ingest_pb2.WatchEventsRequest, context: Context):
        if self._events is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this ingest does not serve events")
        assert self._events is not None
        async for event in self._events.watch(current_scope(), request.after):
            yield event_message(event)


def service_spec(servicer: IngestServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["IngestService"],
        register=lambda server: ingest_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
