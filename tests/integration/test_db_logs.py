"""(Services side) PostgreSQL's DETAIL lines quote row values (tenant ids, corpus
names); neither the server's log nor a service's log may carry them."""

import asyncio

import asyncpg
import pytest
import structlog
from knowledge_runtime.db.pool import Database
from knowledge_runtime.logging import configure_logging

pytestmark = pytest.mark.integration

TENANT = "tenant-whose-name-is-private"
CORPUS = "Merger Plans Project Falcon"


async def test_a_unique_violation_leaves_no_row_values_in_any_log(migrated_pg, capsys):
    configure_logging("test", "info")
    db = await Database.connect(migrated_pg.url())
    try:
        await db.execute("detail_tenant", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        insert = "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2)"
        await db.execute("detail_corpus", insert, TENANT, CORPUS)
        with pytest.raises(asyncpg.UniqueViolationError) as caught:  # still the type callers catch
            async with db.transaction() as tx:
                await tx.execute("detail_corpus", insert, TENANT, CORPUS)
        try:
            raise RuntimeError("a use case failed") from caught.value
        except RuntimeError:
            structlog.get_logger("test").exception("rpc_failed")  # what the error map logs
    finally:
        await db.close()

    error = caught.value
    assert error.constraint_name == "corpora_node_name" and error.sqlstate == "23505"
    logged = capsys.readouterr().err
    assert "corpora_node_name" in logged  # the failure is still there to read...
    for text in (str(error), logged):
        assert TENANT not in text and CORPUS not in text  # ...without whose row it was

    server_log = migrated_pg.server.log
    for _ in range(50):  # the server writes its log asynchronously
        if "corpora_node_name" in server_log.read_text(errors="replace"):
            break
        await asyncio.sleep(0.1)
    text = server_log.read_text(errors="replace")
    assert "corpora_node_name" in text
    assert TENANT not in text and CORPUS not in text
