"""Who may write into which kind of corpus: one pure decision."""

import pytest
from knowledge_ingest.domain.errors import InvalidCorpus
from knowledge_ingest.domain.system_corpora import (
    CorpusKind,
    corpus_kind,
    may_write,
    new_platform_corpus,
    write_access,
)
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.reach import PLATFORM_TENANT, Access, Band
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.system_corpora import PLATFORM_ADMIN, SYSTEM_WRITE

NORMAL = frozenset(PUBLIC_CAPABILITIES)


def test_the_kind_follows_the_row():
    assert corpus_kind("acme", False) is CorpusKind.USER
    assert corpus_kind("acme", True) is CorpusKind.HOUSEKEEPING
    assert corpus_kind(None, True) is CorpusKind.PLATFORM


@pytest.mark.parametrize(
    ("kind", "extra", "allowed"),
    [
        (CorpusKind.USER, (), True),
        (CorpusKind.HOUSEKEEPING, (), False),
        (CorpusKind.HOUSEKEEPING, (PLATFORM_ADMIN,), False),
        (CorpusKind.HOUSEKEEPING, (SYSTEM_WRITE,), True),
        (CorpusKind.PLATFORM, (), False),
        (CorpusKind.PLATFORM, (SYSTEM_WRITE,), False),
        (CorpusKind.PLATFORM, (PLATFORM_ADMIN,), True),
    ],
)
def test_each_kind_has_its_own_writer(kind, extra, allowed):
    assert may_write(kind, NORMAL | frozenset(extra), PLATFORM_TENANT) is allowed


@pytest.mark.parametrize(
    ("reach_access", "kind", "extra", "expected"),
    [
        (Access.WRITABLE, CorpusKind.USER, (), Access.WRITABLE),
        (Access.READ_ONLY, CorpusKind.USER, (), Access.READ_ONLY),  # an ancestor's corpus: 403
        (Access.ABSENT, CorpusKind.USER, (), Access.ABSENT),
        (Access.WRITABLE, None, (), Access.ABSENT),  # no such corpus
        (Access.READ_ONLY, None, (), Access.ABSENT),
        # A system corpus the caller may not write is absent whatever its scope: never "read-only".
        (Access.READ_ONLY, CorpusKind.HOUSEKEEPING, (), Access.ABSENT),
        (Access.WRITABLE, CorpusKind.HOUSEKEEPING, (), Access.ABSENT),
        (Access.WRITABLE, CorpusKind.HOUSEKEEPING, (SYSTEM_WRITE,), Access.WRITABLE),
        (Access.READ_ONLY, CorpusKind.HOUSEKEEPING, (SYSTEM_WRITE,), Access.READ_ONLY),
        (Access.READ_ONLY, CorpusKind.PLATFORM, (), Access.ABSENT),
        (Access.WRITABLE, CorpusKind.PLATFORM, (PLATFORM_ADMIN,), Access.WRITABLE),
        (Access.READ_ONLY, CorpusKind.PLATFORM, (PLATFORM_ADMIN,), Access.READ_ONLY),
        (Access.ABSENT, CorpusKind.PLATFORM, (PLATFORM_ADMIN,), Access.ABSENT),
    ],
)
def test_writing_needs_the_kinds_writer_then_the_corpus_at_the_callers_node(reach_access, kind, extra, expected):
    assert write_access(reach_access, kind, NORMAL | frozenset(extra), PLATFORM_TENANT) is expected


def test_a_platform_wide_corpus_is_written_only_by_the_platform_tenants_administrator():
    """Another tenant's platform.admin would key the rows to its own tenant, which no one else
    reads: refused, as a corpus that does not exist."""
    admin = NORMAL | {PLATFORM_ADMIN}
    assert may_write(CorpusKind.PLATFORM, admin, PLATFORM_TENANT)
    assert not may_write(CorpusKind.PLATFORM, admin, "acme")
    assert may_write(CorpusKind.USER, NORMAL, "acme") and not may_write(CorpusKind.HOUSEKEEPING, admin, "acme")


def test_a_platform_wide_corpus_is_created_by_its_writer_and_only_general():
    admin = NORMAL | {PLATFORM_ADMIN}
    made = new_platform_corpus(" handbook ", "", "", capabilities=admin, tenant=PLATFORM_TENANT)
    assert (made.name, made.confidentiality) == ("handbook", Band.GENERAL)  # empty means GENERAL
    for capabilities, tenant in ((NORMAL, PLATFORM_TENANT), (admin, "acme")):
        with pytest.raises(Refused) as refused:
            new_platform_corpus("handbook", "", "", capabilities=capabilities, tenant=tenant)
        assert refused.value.refusal is Refusal.CAPABILITY_MISSING
    for band in ("TENANT", "CONFIDENTIAL", "RESTRICTED"):
        with pytest.raises(InvalidCorpus) as invalid:
            new_platform_corpus("handbook", "", band, capabilities=admin, tenant=PLATFORM_TENANT)
        assert invalid.value.field == "confidentiality"
