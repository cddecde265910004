"""Reading what reach.py decides on: a tenant's scope nodes, its corpora's placements, and the
generations of its nodes (migration 0024). Ingest and search read them alike (both roles may);
only ingest writes nodes and placements.

Every read path of a service starts from one :class:`Reach` per request (``reach_of``): the
reader resolved from the verified token and the corpus ids it may read; the queries then filter
on those ids, and a direct id outside them is not found. Inside a corpus, each query that reads
documents applies :func:`readable_by` (the access-list rule's SQL twin) with the reader's
principals (:func:`principals_arg`), in the query itself, never after it.
"""

from __future__ import annotations

from collections.abc import Iterable

from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import PLATFORM_TENANT, Band, Placement, Reach, Reader, ScopePath, reach


def readable_by(listed: str, caller: str) -> str:
    """The SQL of ``reach.may_read_document``: whether the access list ``listed`` (an SQL
    expression, e.g. ``d.principals``) admits the caller's principals ``caller`` (a parameter,
    e.g. ``$3``, bound to :func:`principals_arg`). ``document_readable`` is migration 0062's
    function, inlined by the planner; a NULL list (no document row) is never readable."""
    return f"document_readable({listed}, {caller}::text[])"


def principals_arg(principals: Iterable[str]) -> list[str]:
    """A reader's principals (``Reader.principals``) as the parameter :func:`readable_by` compares against."""
    return sorted(principals)


NODE_KNOWN = "SELECT 1 FROM scope_nodes WHERE tenant_id = $1 AND path = $2"
# Every corpus the tenant can see at all: its own (its housekeeping corpora among them), and the
# platform-wide ones (no tenant); never another tenant's system corpus, never a deleted one.
PLACEMENTS = """
SELECT corpus_id, scope_path, confidentiality, tenant_id IS NULL AS platform
FROM corpora WHERE (tenant_id = $1 OR (tenant_id IS NULL AND is_system)) AND deleted_at IS NULL
"""
# The tenant's live corpora bearing a key (knowledge_runtime.corpus_keys picks the one a reader means).
KEYED = """
SELECT corpus_id, scope_path, confidentiality, false AS platform
FROM corpora WHERE tenant_id = $1 AND key = $2 AND deleted_at IS NULL
"""
# The reader's node and ancestors, and the platform tenant's root ($3): the documents of a
# platform-wide corpus (bound to the root, rows keyed by the platform tenant) bump that row, so a
# change there reaches every tenant's cache key.
GENERATION = """
SELECT coalesce(sum(generation), 0)::bigint FROM scope_generations
WHERE (tenant_id = $1 AND scope_path = ANY($2::text[])) OR (tenant_id = $3 AND scope_path = '/')
"""


class PostgresReach:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def reader(self, scope: Scope) -> Reader:
        """The caller's resolved reader, or Refused(SCOPE_UNRESOLVED)."""
        claimed = scope.claimed_node
        known: list[ScopePath] = []
        if (
            claimed is not None
            and not claimed.is_root
            and await self._db.fetchval("scope_node_known", NODE_KNOWN, scope.tenant, str(claimed)) is not None
        ):
            known.append(claimed)
        return scope.reader(known)

    async def reach_of(self, scope: Scope) -> Reach:
        reader = await self.reader(scope)
        return await self.reach_for(scope.tenant, reader)

    async def reach_for(self, tenant: str, reader: Reader) -> Reach:
        return reach(reader, await self.placements(tenant))

    async def placements(self, tenant: str) -> list[Placement]:
        """Where every corpus the tenant can see sits (the platform-wide ones included)."""
        rows = await self._db.fetch("corpus_placements", PLACEMENTS, tenant)
        return [
            Placement(r["corpus_id"], ScopePath.parse(r["scope_path"]), Band(r["confidentiality"]), r["platform"])
            for r in rows
        ]

    async def keyed(self, tenant: str, key: str) -> list[Placement]:
        """Where the tenant's corpora bearing ``key`` sit (any reach: ``corpus_keys.resolve`` decides)."""
        rows = await self._db.fetch("corpora_keyed", KEYED, tenant, key)
        return [
            Placement(r["corpus_id"], ScopePath.parse(r["scope_path"]), Band(r["confidentiality"]), r["platform"])
            for r in rows
        ]

    async def generation(self, tenant: str, reader: Reader) -> int:
        """A number that grows whenever what ``reader`` sees may have changed (0024's triggers),
        the platform-wide corpora's changes included."""
        lineage = [str(node) for node in reader.node.lineage()]
        return int(await self._db.fetchval("scope_generation", GENERATION, tenant, lineage, PLATFORM_TENANT))
