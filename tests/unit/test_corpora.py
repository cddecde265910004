"""Corpus use cases against a fake repository at the port."""

import dataclasses
from datetime import UTC, datetime

import pytest
from knowledge_ingest.corpora.usecases import CorpusUseCases
from knowledge_ingest.domain.errors import CorpusNameTaken, CorpusNotFound, CorpusReadOnly, InvalidCorpus
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page, name_taken
from knowledge_ingest.domain.system_corpora import CorpusKind
from knowledge_ingest.guards import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, page_of
from knowledge_runtime.auth import Scope
from knowledge_runtime.pagination import InvalidPageSize
from knowledge_runtime.reach import Band, Reader, ScopePath

from tests.support.reach import FakeReach


class FakeCorpora:
    def __init__(self, reach: FakeReach) -> None:
        self.rows: list[tuple[str, Corpus]] = []
        self.reach = reach

    async def create(self, tenant: str, corpus: NewCorpus, node: ScopePath) -> Corpus:
        made = Corpus(
            len(self.rows) + 1, corpus.name, corpus.description, 0, 0, datetime.now(UTC), node, corpus.confidentiality
        )
        self.rows.append((tenant, made))
        self.reach.place(tenant, made.corpus_id, str(node), corpus.confidentiality)
        return made

    async def bands_named(self, tenant: str, node: ScopePath, name: str) -> list[Band]:
        return [c.confidentiality for t, c in self.rows if t == tenant and c.scope == node and c.name == name]

    async def list_user_corpora(
        self, tenant: str, page: Page, reachable: frozenset[int], principals=()
    ) -> list[Corpus]:
        mine = [c for t, c in self.rows if t == tenant and c.corpus_id > page.after_id and c.corpus_id in reachable]
        return mine[: page.size]

    async def bind(self, tenant: str, corpus_id: int, node: ScopePath, principals=()) -> Corpus | None:
        for index, (owner, corpus) in enumerate(self.rows):
            if owner == tenant and corpus.corpus_id == corpus_id:
                self.rows[index] = (owner, dataclasses.replace(corpus, scope=node))
                self.reach.place(tenant, corpus_id, str(node), corpus.confidentiality)
                return self.rows[index][1]
        return None

    async def corpus_kind(self, tenant: str, corpus_id: int) -> CorpusKind | None:
        return CorpusKind.USER if any(t == tenant and c.corpus_id == corpus_id for t, c in self.rows) else None


def use_cases() -> tuple[CorpusUseCases, FakeCorpora]:
    reach = FakeReach()
    repo = FakeCorpora(reach)
    return CorpusUseCases(repo, reach, repo), repo


SCOPE = Scope(tenant="t1", capabilities=frozenset({"corpus.create"}), scope_claim="/")


async def test_names_are_trimmed_and_validated():
    cases, _ = use_cases()
    created = await cases.create_corpus(SCOPE, "  Handbook  ", "")
    assert created.name == "Handbook"
    for bad, field in [("   ", "name"), ("x" * 201, "name"), ("a\x00b", "name"), ("a\nb", "name")]:
        with pytest.raises(InvalidCorpus) as caught:
            await cases.create_corpus(SCOPE, bad, "")
        assert caught.value.metadata["field"] == field
    with pytest.raises(InvalidCorpus):
        await cases.create_corpus(SCOPE, "ok", "d" * 2001)


async def test_pages_end_with_no_continuation():
    cases, _ = use_cases()
    for i in range(5):
        await cases.create_corpus(SCOPE, f"c{i}", "")
    first, after = await cases.list_corpora(SCOPE, Page(size=2))
    assert [c.name for c in first] == ["c0", "c1"] and after == 2
    second, after = await cases.list_corpora(SCOPE, Page(size=2, after_id=after))
    third, last = await cases.list_corpora(SCOPE, Page(size=2, after_id=after))
    assert [c.name for c in second] == ["c2", "c3"]
    assert [c.name for c in third] == ["c4"] and last is None


def test_page_size_defaults_and_clamps():
    assert page_of(0, 0).size == DEFAULT_PAGE_SIZE
    assert page_of(10**6, 0).size == MAX_PAGE_SIZE
    with pytest.raises(InvalidPageSize) as caught:  # the description says page_size >= 0: so does the server
        page_of(-1, 0)
    assert caught.value.code == "INVALID_ARGUMENT"


def scoped(node: str) -> Scope:
    return Scope(tenant="t1", capabilities=frozenset({"corpus.create", "corpus.bind"}), scope_claim=node)


async def test_a_lower_token_cannot_bind_an_ancestors_corpus_and_the_refusal_names_where_it_sits():
    cases, repo = use_cases()
    root = await cases.create_corpus(SCOPE, "handbook", "")
    repo.reach.place("t1", 99, "workspace:eng/project:billing/mission:launch")  # the mission node exists
    mission = scoped("workspace:eng/project:billing/mission:launch")
    with pytest.raises(CorpusReadOnly) as caught:
        await cases.bind_corpus(mission, str(root.corpus_id), "workspace:eng/project:billing/mission:launch")
    assert caught.value.code == "PERMISSION_DENIED" and caught.value.reason == "CORPUS_READ_ONLY"
    assert caught.value.metadata == {
        "corpus_id": str(root.corpus_id),
        "corpus_scope": "/",
        "scope": "workspace:eng/project:billing/mission:launch",
    }
    assert repo.rows[0][1].scope == ScopePath()  # still the root's
    moved = await cases.bind_corpus(SCOPE, str(root.corpus_id), "workspace:eng")  # its own node's token may
    assert str(moved.scope) == "workspace:eng"
    with pytest.raises(CorpusNotFound):  # now below the root token: out of its reach, as if absent
        await cases.bind_corpus(SCOPE, str(root.corpus_id), "/")


ROOT, BILLING = ScopePath.parse("/"), ScopePath.parse("workspace:eng/project:billing")


@pytest.mark.parametrize(
    ("reader", "node", "bands", "taken"),
    [
        (Reader(ROOT), ROOT, [Band.TENANT], True),  # at its own node, a band it reads
        (Reader(ROOT), ROOT, [Band.GENERAL], True),  # another band it reads: still its view's name
        (Reader(ROOT, Band.GENERAL), ROOT, [Band.RESTRICTED], False),  # above its clearance: absent
        (Reader(ROOT, Band.GENERAL), ROOT, [Band.RESTRICTED, Band.GENERAL], True),
        (Reader(BILLING), BILLING, [], False),
        (Reader(ROOT), BILLING, [Band.TENANT], False),  # a node it does not read
        (Reader(BILLING, Band.RESTRICTED), ROOT, [Band.CONFIDENTIAL], True),  # an ancestor it reads
    ],
)
def test_a_name_is_taken_only_by_a_corpus_the_caller_can_read(reader, node, bands, taken):
    assert name_taken(reader, node, bands) is taken


async def test_a_name_held_outside_the_reach_is_free_and_one_in_view_at_the_own_node_is_taken():
    cases, _ = use_cases()
    restricted = Scope(
        tenant="t1", capabilities=frozenset({"corpus.create"}), scope_claim="/", clearance=Band.RESTRICTED
    )
    await cases.create_corpus(restricted, "root-restr", "", "RESTRICTED")
    general = Scope(tenant="t1", capabilities=frozenset({"corpus.create"}), scope_claim="/", clearance=Band.GENERAL)
    beside = await cases.create_corpus(general, "root-restr", "", "GENERAL")  # it cannot see the other one
    assert (beside.scope, beside.confidentiality) == (ROOT, Band.GENERAL)
    with pytest.raises(CorpusNameTaken):  # the root's TENANT reader sees the GENERAL one
        await cases.create_corpus(SCOPE, "root-restr", "")
