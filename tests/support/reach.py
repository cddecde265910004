"""A reach source over placements held in memory, deciding with the real runtime.reach rules."""

from __future__ import annotations

from knowledge_runtime.auth import Scope
from knowledge_runtime.reach import DEFAULT_BAND, Band, Placement, Reach, Reader, ScopePath, reach


class FakeReach:
    """Nodes and corpus placements of every tenant, as the database would hold them."""

    def __init__(self) -> None:
        self.nodes: set[tuple[str, ScopePath]] = set()
        self.placements: dict[str, dict[int, Placement]] = {}
        self.generations: dict[tuple[str, ScopePath], int] = {}

    def place(self, tenant: str, corpus_id: int, node: str = "/", band: Band = DEFAULT_BAND) -> None:
        path = ScopePath.parse(node)
        self.placements.setdefault(tenant, {})[corpus_id] = Placement(corpus_id, path, band)
        self.nodes |= {(tenant, n) for n in path.lineage() if not n.is_root}

    async def reader(self, scope: Scope) -> Reader:
        return scope.reader([n for t, n in self.nodes if t == scope.tenant])

    async def reach_of(self, scope: Scope) -> Reach:
        return await self.reach_for(scope.tenant, await self.reader(scope))

    async def reach_for(self, tenant: str, reader: Reader) -> Reach:
        return reach(reader, self.placements.get(tenant, {}).values())

    async def generation(self, tenant: str, reader: Reader) -> int:
        return sum(self.generations.get((tenant, n), 0) for n in reader.node.lineage())
