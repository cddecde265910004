"""The access-list rule's SQL twin (document_readable, migration 0062, as runtime.db.reach's
readable_by writes it) decides every case of the table the Python rule is held to
(tests/unit/test_reach.py), over parameters and over a stored documents row alike."""

from __future__ import annotations

import uuid

import pytest
from knowledge_runtime.auth import scope_from_claims
from knowledge_runtime.db.reach import principals_arg, readable_by
from knowledge_runtime.reach import access_list, may_read_document

from tests.support.access import CASES

pytestmark = pytest.mark.integration


@pytest.fixture
async def document(admin):
    """A document row whose list each case sets."""
    tenant = f"acl-{uuid.uuid4().hex[:8]}"
    await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
    corpus = await admin.fetchval("INSERT INTO corpora (tenant_id, name) VALUES ($1, 'c') RETURNING corpus_id", tenant)
    return await admin.fetchval(
        "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, 'd.txt') RETURNING document_id",
        tenant,
        corpus,
    )


async def test_the_sql_twin_decides_every_case_as_the_rule_does(admin, document):
    for subject, groups, listed, reads in CASES:
        principals = scope_from_claims({"tenant": "acme", "sub": subject, "groups": groups}).principals
        assert may_read_document(principals, listed) is reads
        caller = principals_arg(principals)
        over_values = await admin.fetchval(f"SELECT {readable_by('$1::text[]', '$2')}", listed, caller)
        assert over_values is reads, (subject, groups, listed)
        await admin.execute(
            "UPDATE documents SET principals = $2 WHERE document_id = $1", document, access_list(listed, "principals")
        )
        over_row = await admin.fetchval(
            f"SELECT {readable_by('d.principals', '$2')} FROM documents d WHERE d.document_id = $1", document, caller
        )
        assert over_row is reads, (subject, groups, listed)


async def test_a_list_with_no_document_row_is_never_readable(admin):
    missing = "(SELECT d.principals FROM documents d WHERE d.document_id = -1)"
    assert not await admin.fetchval(f"SELECT coalesce({readable_by(missing, '$1')}, false)", ["user:ana"])
    assert await admin.fetchval(f"SELECT {readable_by(missing, '$1')} IS NOT TRUE", ["user:ana"])
