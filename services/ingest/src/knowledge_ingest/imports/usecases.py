"""Fenced imports, passes over import roots, change findings and auto-indexing.

Every path is resolved and checked against the operator's roots here (``ImportRoots.resolve``)
before anything is read, then content-index is asked to store the resolved path and checks it
again on its side (``ContentIndexService.ImportFile``): neither fence is the only one.
"""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import DomainError, UploadTooLarge
from knowledge_runtime.imports import ImportRoot, ImportRoots, ResolvedPath, walk_files
from knowledge_runtime.refusals import Refusal, Refused

from knowledge_ingest.domain.documents import Job, parse_id, safe_filename
from knowledge_ingest.domain.errors import CorpusNotFound, InvalidRequest
from knowledge_ingest.domain.imports import (
    AUTO_DECIDER,
    MAX_FILES_PER_PASS,
    MAX_IMPORT_PATHS,
    Binding,
    Finding,
    FindingDecided,
    FindingNotFound,
    FindingState,
    ImportRootNotFound,
    PassReport,
    SeenFile,
    ingests_findings,
    parse_mode,
    parse_state_filter,
    records_findings,
    require_open,
)
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import (
    DocumentRepository,
    FileImporter,
    ImportRepository,
    JobRepository,
    ReachSource,
)
from knowledge_ingest.guards import require_readable, require_writable

log = structlog.get_logger("knowledge.ingest.imports")

OCTET_STREAM = "application/octet-stream"


def _mime_type(name: str) -> str:
    return mimetypes.guess_type(name, strict=False)[0] or OCTET_STREAM


def _who(scope: Scope) -> str:
    return scope.subject or f"a token of tenant {scope.tenant}"


@dataclass
class ImportUseCases:
    roots: ImportRoots
    importer: FileImporter
    documents: DocumentRepository
    jobs: JobRepository
    imports: ImportRepository
    hash_file: Callable[[ResolvedPath], Awaitable[SeenFile]]  # refuses a file over the upload cap unread
    reach: ReachSource | None = None  # the caller's scope and clearance; None: the whole tenant

    def _require_roots(self, scope: Scope) -> list[ImportRoot]:
        roots = self.roots.for_tenant(scope.tenant)
        if not roots:
            raise Refused(Refusal.FEATURE_DISABLED, "no import roots are configured for this organisation")
        return roots

    async def _corpus(self, scope: Scope, corpus_id: str, *, writing: bool = True) -> int:
        """The corpus's id when the caller may write into it (importing, binding, a pass), or,
        not ``writing``, read its bindings and findings."""
        key = parse_id(corpus_id, "corpus_id")
        reach = await self.reach.reach_of(scope) if self.reach is not None else None
        check = require_writable if writing else require_readable
        await check(self.documents, scope, reach, key, corpus_id)
        return key

    def _root(self, scope: Scope, name: str) -> ImportRoot:
        root = self.roots.named(name, scope.tenant)
        if root is None:
            raise ImportRootNotFound(name)
        return root

    # -- ImportPath ----------------------------------------------------------------------------

    async def import_paths(self, scope: Scope, corpus_id: str, paths: Sequence[str]) -> list[tuple[str, Job]]:
        """Each path's job, in order. Every path is resolved and checked before any is read: one
        outside the roots refuses the whole call and nothing is stored."""
        self._require_roots(scope)
        if not paths:
            raise InvalidRequest("paths must not be empty", field="paths")
        if len(paths) > MAX_IMPORT_PATHS:
            raise InvalidRequest(f"at most {MAX_IMPORT_PATHS} paths per call", field="paths")
        corpus = await self._corpus(scope, corpus_id)
        resolved = [self.roots.resolve(path, scope.tenant, field=f"paths[{i}]") for i, path in enumerate(paths)]
        # The fenced reads first, every one: a file swapped meanwhile, or over the upload cap
        # (refused from its size, unread), refuses the whole call before anything is stored.
        seen_files = [await self.hash_file(item) for item in resolved]
        answers = []
        for item, seen in zip(resolved, seen_files, strict=True):
            job = await self._ingest(scope.tenant, corpus, item)
            await self.imports.record(
                scope.tenant,
                corpus,
                item.root.name,
                seen,
                state=FindingState.ACCEPTED,
                job_id=job.job_id,
                decided_by=_who(scope),
            )
            answers.append((str(item.real), job))
        return answers

    async def _ingest(self, tenant: str, corpus_id: int, item: ResolvedPath) -> Job:
        mime_type = _mime_type(item.real.name)
        blob = await self.importer.import_file(tenant, str(item.real), mime_type)
        return await self.jobs.enqueue(tenant, corpus_id, blob, safe_filename(item.real.name), mime_type, None)

    # -- roots and bindings --------------------------------------------------------------------

    async def list_roots(self, scope: Scope) -> list[ImportRoot]:
        return self.roots.for_tenant(scope.tenant)

    async def set_binding(self, scope: Scope, corpus_id: str, root_name: str, mode: str) -> Binding:
        self._require_roots(scope)
        parsed = parse_mode(mode)
        corpus = await self._corpus(scope, corpus_id)
        self._root(scope, root_name)
        binding = await self.imports.set_binding(scope.tenant, corpus, root_name, parsed, _who(scope))
        log.info("import_binding_set", corpus_id=corpus, root=root_name, mode=parsed.value)
        return binding

    async def bindings(self, scope: Scope, corpus_id: str) -> list[Binding]:
        return await self.imports.bindings(scope.tenant, await self._corpus(scope, corpus_id, writing=False))

    # -- passes --------------------------------------------------------------------------------

    async def scan(self, scope: Scope, corpus_id: str) -> PassReport:
        """A pass now over every root bound to the corpus (``off`` ones do nothing)."""
        self._require_roots(scope)
        corpus = await self._corpus(scope, corpus_id)
        report = PassReport()
        for binding in await self.imports.bindings(scope.tenant, corpus):
            report.add(await self.run_pass(binding))
        return report

    async def scheduled_pass(self, interval_s: float) -> PassReport:
        """The passes that are due (every tenant's bindings), each claimed by one replica."""
        report = PassReport()
        for binding in await self.imports.claim_due_bindings(interval_s):
            report.add(await self.run_pass(binding))
        return report

    async def run_pass(self, binding: Binding) -> PassReport:
        report = PassReport()
        root = self.roots.named(binding.root_name, binding.tenant)
        if root is None or not records_findings(binding.mode):
            return report  # a root no longer configured (or off): nothing
        report.roots = 1
        for relative in await asyncio.to_thread(lambda: list(walk_files(root, MAX_FILES_PER_PASS))):
            try:
                resolved = self.roots.resolve(str(root.path / relative), binding.tenant)
                seen = await self.hash_file(resolved)
            except UploadTooLarge as refused:  # never importable: no finding, and not hashed
                report.errors += 1
                log.warning("import_file_too_large", root=root.name, path=relative, max_bytes=refused.max_bytes)
                continue
            except DomainError:
                report.errors += 1  # moved, swapped for a link or unreadable since the walk
                continue
            report.files_seen += 1
            finding = await self.imports.record(binding.tenant, binding.corpus_id, root.name, seen)
            if finding is None:
                continue
            report.findings_recorded += 1
            if ingests_findings(binding.mode):
                try:
                    await self._accept(binding.tenant, finding, root, f"{AUTO_DECIDER} (set by {binding.set_by})")
                    report.jobs_started += 1
                except DomainError as error:
                    report.errors += 1
                    log.warning("import_auto_ingest_failed", finding_id=finding.finding_id, reason=error.reason)
        log.info(
            "import_pass_done",
            tenant=binding.tenant,
            corpus_id=binding.corpus_id,
            root=root.name,
            mode=binding.mode.value,
            files=report.files_seen,
            findings=report.findings_recorded,
            jobs=report.jobs_started,
            errors=report.errors,
        )
        return report

    # -- findings ------------------------------------------------------------------------------

    async def findings(self, scope: Scope, corpus_id: str, state: str, page: Page) -> tuple[list[Finding], int | None]:
        wanted = parse_state_filter(state)
        corpus = await self._corpus(scope, corpus_id, writing=False)
        return await self.imports.findings(scope.tenant, corpus, wanted, page)

    async def _finding(self, scope: Scope, finding_id: str) -> Finding:
        """An open finding to decide: accepting ingests into its corpus and dismissing changes
        what the corpus's bindings record, so both write the corpus (CorpusReadOnly when the
        caller only reads it); one the caller cannot see is not found."""
        finding = await self.imports.finding(scope.tenant, parse_id(finding_id, "finding_id"))
        if finding is None:
            raise FindingNotFound(finding_id)
        try:
            await self._corpus(scope, str(finding.corpus_id))
        except CorpusNotFound:
            raise FindingNotFound(finding_id) from None
        return finding

    async def accept(self, scope: Scope, finding_id: str) -> tuple[Finding, Job]:
        finding = await self._finding(scope, finding_id)
        require_open(finding)
        return await self._accept(scope.tenant, finding, self._root(scope, finding.root_name), _who(scope))

    async def _accept(self, tenant: str, finding: Finding, root: ImportRoot, by: str) -> tuple[Finding, Job]:
        resolved = self.roots.resolve(str(root.path / finding.path), tenant, field="finding_id")
        job = await self._ingest(tenant, finding.corpus_id, resolved)
        decided = await self.imports.decide(tenant, finding.finding_id, FindingState.ACCEPTED, job.job_id, by)
        if decided is None:  # decided by another caller meanwhile; the job (a duplicate at worst) stands
            decided = await self.imports.finding(tenant, finding.finding_id) or finding
        return decided, job

    async def dismiss(self, scope: Scope, finding_id: str) -> Finding:
        finding = await self._finding(scope, finding_id)
        require_open(finding)
        decided = await self.imports.decide(scope.tenant, finding.finding_id, FindingState.DISMISSED, None, _who(scope))
        if decided is None:  # decided by another caller meanwhile
            current = await self._finding(scope, finding_id)
            raise FindingDecided(current.finding_id, current.state)
        return decided
