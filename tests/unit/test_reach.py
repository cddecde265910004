"""The reach rules (runtime.reach): scope paths, the reach decision, resolution, and the bands."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from knowledge_runtime.auth import Scope, scope_from_claims
from knowledge_runtime.errors import Unauthenticated
from knowledge_runtime.reach import (
    MAX_PRINCIPALS,
    PLATFORM_TENANT,
    READABLE,
    Access,
    AccessListInvalid,
    Band,
    InvalidScopePath,
    Placement,
    Reader,
    ScopePath,
    access_list,
    allows,
    may_read_document,
    principals_of,
    reach,
    resolve,
)
from knowledge_runtime.refusals import Refusal, Refused

from tests.support.access import CASES as ACCESS_CASES

P = ScopePath.parse
ROOT = P("/")
ENG = P("workspace:eng")
BILLING = P("workspace:eng/project:billing")
LAUNCH = P("workspace:eng/project:billing/mission:launch")
SEARCHP = P("workspace:eng/project:search")
SALES = P("workspace:sales")


def test_paths_parse_to_one_spelling_and_refuse_anything_else():
    assert str(ROOT) == "/" and ROOT.is_root
    assert str(P("/workspace:eng/project:billing/")) == "workspace:eng/project:billing"
    assert P("workspace:eng/project:billing") == BILLING
    for bad in (
        "",
        "  ",
        "eng",
        "project:billing",
        "workspace:eng/mission:x",
        "workspace:",
        "workspace:a b",
        "workspace:eng/project:billing/mission:m/extra:x",
        "workspace:a:b",
        "workspace:e/" * 100,
        " /",
        "workspace:eng//",
        "//",
        "/ ",
        "workspace:eng ",
    ):
        with pytest.raises(InvalidScopePath):
            P(bad)


def test_a_reader_reaches_its_node_and_its_ancestors_never_siblings_or_descendants():
    reader = Reader(BILLING)
    assert [reader.may_read(n, Band.TENANT) for n in (ROOT, ENG, BILLING)] == [True, True, True]
    assert not reader.may_read(LAUNCH, Band.TENANT)  # a descendant
    assert not reader.may_read(SEARCHP, Band.TENANT)  # a sibling
    assert not reader.may_read(SALES, Band.TENANT)  # a sibling's branch
    assert not reader.may_read(P("workspace:engineering"), Band.TENANT)  # a name that only starts alike
    root = Reader(ROOT)
    assert root.may_read(ROOT, Band.TENANT) and not root.may_read(ENG, Band.TENANT)


def test_binding_is_to_the_own_node_or_below():
    reader = Reader(ENG)
    assert reader.may_bind_to(ENG) and reader.may_bind_to(BILLING) and reader.may_bind_to(LAUNCH)
    assert not reader.may_bind_to(ROOT) and not reader.may_bind_to(SALES)


# (reader's node, corpus's node) -> what the reader may do with a TENANT-band corpus there.
ABSENT, READ_ONLY, WRITABLE = Access.ABSENT, Access.READ_ONLY, Access.WRITABLE
ACCESS = {
    (ROOT, ROOT): WRITABLE,
    (ROOT, ENG): ABSENT,  # a descendant's: out of a root reader's reach
    (ROOT, LAUNCH): ABSENT,
    (ENG, ROOT): READ_ONLY,  # an ancestor's: read, never written
    (ENG, ENG): WRITABLE,
    (ENG, BILLING): ABSENT,
    (ENG, SALES): ABSENT,  # a sibling's
    (BILLING, ROOT): READ_ONLY,
    (BILLING, ENG): READ_ONLY,
    (BILLING, BILLING): WRITABLE,
    (BILLING, SEARCHP): ABSENT,
    (BILLING, LAUNCH): ABSENT,
    (LAUNCH, ROOT): READ_ONLY,  # the attack: a mission token bound, emptied and deleted a root corpus
    (LAUNCH, ENG): READ_ONLY,
    (LAUNCH, BILLING): READ_ONLY,
    (LAUNCH, LAUNCH): WRITABLE,
    (LAUNCH, SALES): ABSENT,
    (SALES, ENG): ABSENT,
}


@pytest.mark.parametrize(("reader_node", "corpus_node"), list(ACCESS))
def test_a_corpus_is_written_only_from_its_own_node_and_an_ancestors_is_read_only(reader_node, corpus_node):
    expected = ACCESS[(reader_node, corpus_node)]
    reader = Reader(reader_node)
    assert reader.access(corpus_node, Band.TENANT) is expected
    assert (expected is not ABSENT) is reader.may_read(corpus_node, Band.TENANT)  # in reach exactly when readable
    found = reach(reader, [Placement(7, corpus_node, Band.TENANT)])
    assert found.access(7) is expected and (7 in found.writable) is (expected is WRITABLE)


@pytest.mark.parametrize(("clearance", "band"), list(itertools.product(Band, Band)))
def test_a_band_above_the_clearance_is_absent_even_at_the_own_node(clearance, band):
    expected = WRITABLE if EXPECTED[(clearance, band)] else ABSENT
    assert Reader(BILLING, clearance).access(BILLING, band) is expected
    assert Reader(BILLING, clearance).access(ROOT, band) is (READ_ONLY if expected is WRITABLE else ABSENT)


def test_a_corpus_outside_the_reach_has_no_access_by_id():
    found = reach(Reader(ENG), [Placement(1, ROOT, Band.TENANT), Placement(2, ENG, Band.TENANT)])
    assert found.access(3) is ABSENT and found.writable == {2}
    assert found.access(1) is READ_ONLY and found.placements[1].node == ROOT


def test_reach_lists_the_reachable_corpora_and_says_when_it_is_everything():
    placements = [Placement(1, ROOT, Band.TENANT), Placement(2, BILLING, Band.TENANT), Placement(3, SALES, Band.TENANT)]
    found = reach(Reader(BILLING), placements)
    assert found.corpus_ids == {1, 2} and not found.everything
    assert found.has(2) and not found.has(3) and not found.has(None)
    assert reach(Reader(ROOT), placements[:1]).everything


def test_a_platform_wide_corpus_adds_the_platform_tenants_key_and_always_filters_on_corpus_ids():
    """Its rows carry PLATFORM_TENANT; a reach holding it reads that key only within its corpus ids
    (the platform tenant's other corpora never come along), even when it reaches every corpus."""
    own, platform = Placement(1, ROOT, Band.TENANT), Placement(9, ROOT, Band.GENERAL, platform=True)
    found = reach(Reader(ROOT), [own, platform])
    assert found.corpus_ids == {1, 9} and found.platform and not found.everything
    assert found.owners("acme") == ("acme", PLATFORM_TENANT)
    assert found.owners(PLATFORM_TENANT) == (PLATFORM_TENANT,)
    general = reach(Reader(BILLING, Band.GENERAL), [own, platform])  # every clearance admits GENERAL
    assert general.corpus_ids == {9} and general.owners("acme") == ("acme", PLATFORM_TENANT)
    alone = reach(Reader(ROOT), [own])
    assert alone.everything and not alone.platform and alone.owners("acme") == ("acme",)


def test_unresolved_scopes_refuse_and_never_fall_back_to_the_root():
    for claim, known in ((None, []), ("nonsense", []), ("workspace:eng", []), ("workspace:eng", [SALES])):
        with pytest.raises(Refused) as caught:
            resolve("acme", claim, Band.TENANT, known)
        assert caught.value.refusal is Refusal.SCOPE_UNRESOLVED
        assert caught.value.code == "PERMISSION_DENIED"
    assert resolve("acme", "/", Band.TENANT, []).node == ROOT  # the root always exists
    assert resolve("acme", "workspace:eng", Band.CONFIDENTIAL, [ENG]) == Reader(ENG, Band.CONFIDENTIAL)


# Every (reader clearance, material band) pair, written out: what each clearance means.
EXPECTED = {
    (Band.GENERAL, Band.GENERAL): True,
    (Band.GENERAL, Band.TENANT): False,
    (Band.GENERAL, Band.CONFIDENTIAL): False,
    (Band.GENERAL, Band.RESTRICTED): False,
    (Band.TENANT, Band.GENERAL): True,
    (Band.TENANT, Band.TENANT): True,
    (Band.TENANT, Band.CONFIDENTIAL): False,
    (Band.TENANT, Band.RESTRICTED): False,
    (Band.CONFIDENTIAL, Band.GENERAL): True,
    (Band.CONFIDENTIAL, Band.TENANT): True,
    (Band.CONFIDENTIAL, Band.CONFIDENTIAL): True,
    (Band.CONFIDENTIAL, Band.RESTRICTED): False,
    (Band.RESTRICTED, Band.GENERAL): True,
    (Band.RESTRICTED, Band.TENANT): True,
    (Band.RESTRICTED, Band.CONFIDENTIAL): True,
    (Band.RESTRICTED, Band.RESTRICTED): True,
}


@pytest.mark.parametrize(("clearance", "band"), list(itertools.product(Band, Band)))
def test_allows_every_reader_band_pair(clearance, band):
    assert allows(clearance, band) is EXPECTED[(clearance, band)]
    assert Reader(ROOT, clearance).may_read(ROOT, band) is EXPECTED[(clearance, band)]


def test_the_table_covers_every_band_and_the_proto_names_them_all():
    assert set(READABLE) == set(Band) and len(EXPECTED) == len(Band) ** 2
    proto = (Path(__file__).parents[2] / "protos" / "knowledge" / "v1" / "ingest.proto").read_text()
    assert all(f'"{band.value}"' in proto for band in Band)  # Corpus.confidentiality names them all


def test_regression_comparing_band_numbers_would_admit_tenant_material_to_a_general_reader():
    """The first draft ranked bands by their enum numbers (TENANT, the default, numbered first)
    and let a reader read any band numbered at most its clearance's: a GENERAL reader (a context
    shared beyond the tenant) then read TENANT material. allows() decides from meaning."""
    numbers = {band: n for n, band in enumerate([Band.TENANT, Band.GENERAL, Band.CONFIDENTIAL, Band.RESTRICTED], 1)}

    def by_enum_order(clearance: Band, band: Band) -> bool:
        return numbers[band] <= numbers[clearance]

    assert by_enum_order(Band.GENERAL, Band.TENANT)  # the mistake
    assert not allows(Band.GENERAL, Band.TENANT)  # the rule
    # and the declaration order of Band itself is not what allows() follows either
    assert [b for b in Band].index(Band.GENERAL) < [b for b in Band].index(Band.TENANT)
    assert allows(Band.TENANT, Band.GENERAL) and not allows(Band.GENERAL, Band.TENANT)


def test_the_token_claims_carry_scope_and_clearance():
    scope = scope_from_claims({"tenant": "t", "scope": "workspace:eng", "clearance": "CONFIDENTIAL"})
    assert scope.scope_claim == "workspace:eng" and scope.clearance is Band.CONFIDENTIAL
    assert scope.claimed_node == ENG
    plain = scope_from_claims({"tenant": "t"})
    assert plain.scope_claim is None and plain.clearance is Band.TENANT  # absent clearance: TENANT
    with pytest.raises(Refused):
        plain.reader([])  # no scope claim: nothing is read
    for bad in ({"scope": 3}, {"scope": ["/"]}, {"scope": "/\n"}, {"clearance": "TOP"}, {"clearance": 2}):
        with pytest.raises(Unauthenticated):
            scope_from_claims({"tenant": "t", **bad})
    assert Scope("t", frozenset(), scope_claim="/").reader([]).node == ROOT


@pytest.mark.parametrize(("subject", "groups", "listed", "reads"), ACCESS_CASES)
def test_the_access_list_rule_decides_each_case_of_the_table(subject, groups, listed, reads):
    scope = scope_from_claims({"tenant": "acme", "sub": subject, "groups": groups, "scope": "/"})
    assert may_read_document(scope.principals, listed) is reads
    assert scope.reader([]).may_read_document(listed) is reads
    assert may_read_document(scope.principals, access_list(listed, "principals")) is reads  # as stored


def test_an_access_list_is_stored_checked_deduplicated_and_sorted():
    assert access_list(["group:hr", "user:ana", "group:hr"], "principals") == ("group:hr", "user:ana")
    assert access_list([], "principals") == ()
    assert access_list(["user:ana@example.com", "group:CFO Office"], "principals") == (
        "group:CFO Office",
        "user:ana@example.com",
    )
    for bad in ("ana", "user:", "group:", "team:hr", "user:ana\n", "group:h\x00r", "user:" + "a" * 200, " user:ana"):
        with pytest.raises(AccessListInvalid) as refused:
            access_list(["user:bob", bad], "document.principals")
        assert refused.value.reason == "ACCESS_LIST_INVALID" and refused.value.field == "document.principals"
        assert refused.value.metadata["principal"] == bad[:80]
    with pytest.raises(AccessListInvalid):
        access_list([f"user:u{i}" for i in range(MAX_PRINCIPALS + 1)], "principals")
    # The limit counts what was sent, as the REST description's maxItems does: duplicates too.
    assert access_list(["user:ana"] * MAX_PRINCIPALS, "principals") == ("user:ana",)
    with pytest.raises(AccessListInvalid):
        access_list(["user:ana"] * (MAX_PRINCIPALS + 1), "principals")


def test_a_reader_without_principals_reads_only_what_everyone_reads():
    reader = Reader(ROOT)
    assert reader.may_read_document([]) and not reader.may_read_document(["user:dev"])
    assert principals_of("", []) == frozenset()
    assert principals_of("ana", ["hr", ""]) == {"user:ana", "group:hr"}
