"""Who may write into which kind of corpus: one pure decision (issue 16)."""

import pytest
from knowledge_ingest.domain.system_corpora import CorpusKind, corpus_kind, may_write
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
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
    assert may_write(kind, NORMAL | frozenset(extra)) is allowed
