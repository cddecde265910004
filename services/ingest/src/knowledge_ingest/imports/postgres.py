"""Import bindings and change findings in PostgreSQL (role knowledge_ingest), and the fenced read
that hashes a file under an import root (``knowledge_runtime.imports``)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid

import asyncpg
from knowledge_runtime.db.pool import Database
from knowledge_runtime.errors import UploadTooLarge
from knowledge_runtime.imports import ResolvedPath, open_fenced, read_chunks

from knowledge_ingest.domain.imports import Binding, Finding, FindingState, Mode, SeenFile
from knowledge_ingest.domain.model import Page
from knowledge_ingest.tenants.postgres import ENSURE_TENANT

BINDING_COLUMNS = "tenant_id, corpus_id, root_name, mode, set_by, update_time, last_scan_time"
UPSERT_BINDING = f"""
INSERT INTO import_bindings (tenant_id, corpus_id, root_name, mode, set_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, corpus_id, root_name)
DO UPDATE SET mode = EXCLUDED.mode, set_by = EXCLUDED.set_by, update_time = now()
RETURNING {BINDING_COLUMNS}
"""
LIST_BINDINGS = f"""
SELECT {BINDING_COLUMNS} FROM import_bindings WHERE tenant_id = $1 AND corpus_id = $2 ORDER BY root_name
"""
CLAIM_DUE_BINDINGS = f"""
UPDATE import_bindings SET last_scan_time = now()
WHERE mode <> 'off' AND (last_scan_time IS NULL OR last_scan_time <= now() - make_interval(secs => $1))
RETURNING {BINDING_COLUMNS}
"""
FINDING_COLUMNS = (
    "finding_id, corpus_id, root_name, path, content_hash, size_bytes, kind, state, job_id, "
    "decided_by, decided_time, create_time"
)
# Once per (corpus, root, path, hash): a second pass over the same bytes inserts nothing.
RECORD_FINDING = f"""
INSERT INTO import_findings (tenant_id, corpus_id, root_name, path, content_hash, size_bytes, kind, state,
                             job_id, decided_by, decided_time)
SELECT $1::text, $2::bigint, $3::text, $4::text, $5::text, $6::bigint,
       CASE WHEN EXISTS (SELECT 1 FROM import_findings
                         WHERE tenant_id = $1 AND corpus_id = $2 AND root_name = $3 AND path = $4)
            THEN 'changed' ELSE 'new' END,
       $7::text, $8::uuid, $9::text, CASE WHEN $9::text IS NULL THEN NULL ELSE now() END
ON CONFLICT (tenant_id, corpus_id, root_name, path, content_hash) DO NOTHING
RETURNING {FINDING_COLUMNS}
"""
LOCK_PATH = (
    "SELECT pg_advisory_xact_lock(hashtextextended("
    "$1::text || '/' || $2::bigint::text || '/' || $3::text || '/' || $4::text, 19))"
)
LIST_FINDINGS = f"""
SELECT {FINDING_COLUMNS} FROM import_findings
WHERE tenant_id = $1 AND corpus_id = $2 AND finding_id > $3 AND ($4::text IS NULL OR state = $4)
ORDER BY finding_id LIMIT $5
"""
GET_FINDING = f"SELECT {FINDING_COLUMNS} FROM import_findings WHERE tenant_id = $1 AND finding_id = $2"
DECIDE_FINDING = f"""
UPDATE import_findings SET state = $3, job_id = $4, decided_by = $5, decided_time = now()
WHERE tenant_id = $1 AND finding_id = $2 AND state = 'open'
RETURNING {FINDING_COLUMNS}
"""


def _binding(row: asyncpg.Record) -> Binding:
    return Binding(
        corpus_id=row["corpus_id"],
        root_name=row["root_name"],
        mode=Mode(row["mode"]),
        set_by=row["set_by"],
        update_time=row["update_time"],
        last_scan_time=row["last_scan_time"],
        tenant=row["tenant_id"],
    )


def _finding(row: asyncpg.Record) -> Finding:
    return Finding(
        finding_id=row["finding_id"],
        corpus_id=row["corpus_id"],
        root_name=row["root_name"],
        path=row["path"],
        content_hash=row["content_hash"],
        size_bytes=row["size_bytes"],
        kind=row["kind"],
        state=FindingState(row["state"]),
        job_id=row["job_id"],
        decided_by=row["decided_by"],
        decided_time=row["decided_time"],
        create_time=row["create_time"],
    )


class PostgresImports:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def set_binding(self, tenant: str, corpus_id: int, root_name: str, mode: Mode, set_by: str) -> Binding:
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            row = await tx.fetchrow("upsert_binding", UPSERT_BINDING, tenant, corpus_id, root_name, mode.value, set_by)
        assert row is not None  # an upsert always returns its row
        return _binding(row)

    async def bindings(self, tenant: str, corpus_id: int) -> list[Binding]:
        return [_binding(r) for r in await self._db.fetch("list_bindings", LIST_BINDINGS, tenant, corpus_id)]

    async def claim_due_bindings(self, interval_s: float) -> list[Binding]:
        """The bindings (of every tenant) whose scheduled pass is due, claimed by this replica."""
        return [_binding(r) for r in await self._db.fetch("claim_due_bindings", CLAIM_DUE_BINDINGS, interval_s)]

    async def record(
        self,
        tenant: str,
        corpus_id: int,
        root_name: str,
        seen: SeenFile,
        *,
        state: FindingState = FindingState.OPEN,
        job_id: uuid.UUID | None = None,
        decided_by: str | None = None,
    ) -> Finding | None:
        """The new finding, or None when this (path, hash) was recorded before."""
        async with self._db.transaction() as tx:
            # two passes at once over the same path agree on new / changed
            await tx.execute("lock_finding_path", LOCK_PATH, tenant, corpus_id, root_name, seen.path)
            row = await tx.fetchrow(
                "record_finding",
                RECORD_FINDING,
                tenant,
                corpus_id,
                root_name,
                seen.path,
                seen.content_hash,
                seen.size_bytes,
                state.value,
                job_id,
                decided_by,
            )
        return None if row is None else _finding(row)

    async def findings(
        self, tenant: str, corpus_id: int, state: FindingState | None, page: Page
    ) -> tuple[list[Finding], int | None]:
        rows = await self._db.fetch(
            "list_findings",
            LIST_FINDINGS,
            tenant,
            corpus_id,
            page.after_id,
            state.value if state else None,
            page.probe().size,
        )
        return page.cut([_finding(r) for r in rows], key=lambda f: f.finding_id)

    async def finding(self, tenant: str, finding_id: int) -> Finding | None:
        row = await self._db.fetchrow("get_finding", GET_FINDING, tenant, finding_id)
        return None if row is None else _finding(row)

    async def decide(
        self, tenant: str, finding_id: int, state: FindingState, job_id: uuid.UUID | None, decided_by: str
    ) -> Finding | None:
        """Marks an open finding decided; None when it was no longer open (decided meanwhile)."""
        row = await self._db.fetchrow(
            "decide_finding", DECIDE_FINDING, tenant, finding_id, state.value, job_id, decided_by
        )
        return None if row is None else _finding(row)


def _hash_fenced(resolved: ResolvedPath, max_bytes: int | None) -> SeenFile:
    fd = open_fenced(resolved)
    if max_bytes is not None and os.fstat(fd).st_size > max_bytes:
        os.close(fd)
        raise UploadTooLarge(max_bytes)
    digest = hashlib.sha256()
    size = 0
    for chunk in read_chunks(fd):  # which closes the descriptor, also when left early
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:  # it grew since: read no further
            break
        digest.update(chunk)
    if max_bytes is not None and size > max_bytes:
        raise UploadTooLarge(max_bytes)
    return SeenFile(resolved.relative, digest.hexdigest(), size)


async def hash_file(resolved: ResolvedPath, max_bytes: int | None = None) -> SeenFile:
    """The file's SHA-256, read through the fence (checked path, ``O_NOFOLLOW``, the descriptor's
    real location) in a thread. A file over ``max_bytes`` (the upload cap: it could never be
    imported) is refused from its size before a byte is read, not after hashing gigabytes."""
    return await asyncio.to_thread(_hash_fenced, resolved, max_bytes)
