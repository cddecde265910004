"""The tenant's housekeeping corpora as pre-fetch finds them (role knowledge_search reads corpora)."""

from __future__ import annotations

from knowledge_runtime.db.pool import Database
from knowledge_runtime.system_corpora import HOUSEKEEPING_CORPORA

# Only the tenant's own system rows: a user corpus that happens to bear such a name is not one.
HOUSEKEEPING = """
SELECT name, corpus_id FROM corpora WHERE tenant_id = $1 AND is_system AND name = ANY($2::text[])
"""


class PostgresSystemCorpora:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def housekeeping(self, tenant: str) -> dict[str, int]:
        rows = await self._db.fetch("housekeeping_corpora", HOUSEKEEPING, tenant, list(HOUSEKEEPING_CORPORA))
        return {row["name"]: row["corpus_id"] for row in rows}
