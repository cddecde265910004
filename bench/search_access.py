"""``bench/search.py latency``'s access-list measurement: HYBRID p95 with documents' access lists
on beside the same searches with them off, timed alternately in the same run.

The loaded documents (``search_latency.DOCUMENTS_PER_CORPUS`` per corpus, 2,000) get access lists
drawn from ``GROUPS`` distinct groups, two groups each, every group in some list; a share of them
(``SHARES``) is restricted, the rest stays open. The token speaks for ``TOKEN_GROUPS`` of the
groups. "On" is the search service as it is: both channels judge each
candidate's document by its list. "Off" is the same service over :class:`WithoutAccessLists`,
whose channels leave the predicate out, as before access lists, so the ratio is the price of the
rule at that share. The lists are cleared again afterwards, so a kept ``--data-dir`` measures the
rest without them.
"""

from __future__ import annotations

import asyncpg
import grpc
from knowledge.v1 import search_pb2, search_pb2_grpc
from knowledge_runtime.reach import principals_of
from knowledge_search.adapters.postgres import PostgresChunkIndex

GROUPS = 1_000  # distinct groups named across the access lists
TOKEN_GROUPS = 20  # groups the searching token is in
EVERYONE = [f"group:g{i}" for i in range(GROUPS)]  # principals every list names one of
# Shares of the documents restricted, each measured; the first is the one held to the target:
# most of a shared knowledge base is open, and some of it (pay, board minutes) is not. The other
# says what a corpus where everything is restricted costs, when the token reads a few percent.
SHARES = (0.25, 1.0)
TARGET_RATIO = 1.5  # HYBRID p95 with access lists on over off, at SHARES[0]
TOKEN_SUBJECT = "service:bench"  # the bench's token is a service token (its lookup embedder's rule)
# Every document's list: the restricted ones (a share of them, spread by a hash of their rank) each
# name two groups, the m-th of them g(2m) and g(2m + 1), so that every group is named once there are
# GROUPS / 2 of them; the others are open.
ACCESS_SQL = """
WITH k AS (
    SELECT document_id, row_number() OVER (ORDER BY document_id) - 1 AS n FROM documents WHERE tenant_id = $1
), r AS (
    SELECT document_id, row_number() OVER (ORDER BY document_id) - 1 AS m FROM k WHERE (k.n * 7919) % 1000 < $2::float8 * 1000
)
UPDATE documents d SET principals = CASE WHEN r.m IS NULL THEN '{}'::text[]
    ELSE ARRAY['group:g' || (2 * r.m) % $3, 'group:g' || (2 * r.m + 1) % $3] END
FROM k LEFT JOIN r USING (document_id)
WHERE d.document_id = k.document_id
"""
READABLE_SQL = """
SELECT avg(CASE WHEN document_readable(d.principals, $2::text[]) THEN 1.0 ELSE 0.0 END)
FROM chunks c JOIN documents d ON d.document_id = c.document_id WHERE c.tenant_id = $1
"""


class WithoutAccessLists(PostgresChunkIndex):
    """The search as it was before access lists (the baseline): no access predicate in the
    channels, nor when the results' content is read (hydration that still checked the lists would
    drop what the channels found, and the search would read its channels again)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._access = False

    async def chunks(self, tenant, chunk_ids, owners=(), principals=()):
        return await super().chunks(tenant, chunk_ids, owners, EVERYONE)


def token_groups() -> list[str]:
    return [f"g{i}" for i in range(TOKEN_GROUPS)]


async def set_lists(admin_url: str, tenant: str, share: float) -> float:
    """Restrict ``share`` of the tenant's documents; the share of chunks the token may read."""
    connection = await asyncpg.connect(admin_url)
    try:
        await connection.execute(ACCESS_SQL, tenant, share, GROUPS)
        await connection.execute("ANALYZE documents")
        caller = sorted(principals_of(TOKEN_SUBJECT, token_groups()))
        return float(await connection.fetchval(READABLE_SQL, tenant, caller) or 0.0)
    finally:
        await connection.close()


async def clear_lists(admin_url: str, tenant: str) -> None:
    connection = await asyncpg.connect(admin_url)
    try:
        await connection.execute("UPDATE documents SET principals = '{}' WHERE tenant_id = $1", tenant)
    finally:
        await connection.close()


async def access_list_latency(
    admin_url: str, tenant: str, on_port: int, off_port: int, metadata: list, texts: list[str], timed, percentile
) -> dict[float, float]:
    """For each share of restricted documents: HYBRID p95 with the lists on over off, the searches
    of the two servers alternating query by query (load on the machine hits both alike)."""
    ratios: dict[float, float] = {}
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{on_port}") as on_channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{off_port}") as off_channel,
    ):
        stubs = {
            "on": search_pb2_grpc.SearchServiceStub(on_channel),
            "off": search_pb2_grpc.SearchServiceStub(off_channel),
        }

        def call(which: str):
            return lambda text: stubs[which].Search(
                search_pb2.SearchRequest(query=text, mode=search_pb2.SEARCH_MODE_HYBRID, top_k=10), metadata=metadata
            )

        calls = {which: call(which) for which in stubs}
        try:
            for share in SHARES:
                readable = await set_lists(admin_url, tenant, share)
                filled = [len((await calls["on"](text)).results) for text in texts[:10]]  # also the warm-up
                await timed(calls["off"], texts[:10])
                on_ms, off_ms = [], []
                for text in texts:
                    off_ms += await timed(calls["off"], [text])
                    on_ms += await timed(calls["on"], [text])
                ratios[share] = percentile(on_ms, 95) / percentile(off_ms, 95)
                print(
                    f"gRPC HYBRID access lists: {share:.0%} of the documents restricted to 2 of {GROUPS} groups, "
                    f"the token in {TOKEN_GROUPS} reads {readable:.0%} of the chunks: "
                    f"on p50 {percentile(on_ms, 50):7.2f} p95 {percentile(on_ms, 95):7.2f} ms   "
                    f"off p50 {percentile(off_ms, 50):7.2f} p95 {percentile(off_ms, 95):7.2f} ms   "
                    f"p95 x{ratios[share]:.2f}   hits per query (top_k 10): min {min(filled)}"
                )
        finally:
            await clear_lists(admin_url, tenant)
    return ratios
