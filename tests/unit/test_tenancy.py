"""The tenancy decisions: enablement, quotas, budgets, periods, bounded metric labels."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from knowledge_ingest.domain.quotas import check_quotas, check_tenant, embedding_refusal, upload_refusal
from knowledge_ingest.domain.usage import TenantTotals, bounded_totals, counted_corpora
from knowledge_runtime.errors import InvalidField
from knowledge_runtime.reach import Band, Placement, Reader, ScopePath
from knowledge_runtime.refusals import REFUSALS, Refusal
from knowledge_runtime.settings import CommonSettings, Env, SettingsError
from knowledge_runtime.tenancy import (
    Holdings,
    Quotas,
    TenantSettings,
    budget_refusal,
    current_period,
    enablement_refusal,
    period_bounds,
)


def test_a_disabled_tenant_is_refused_with_feature_disabled():
    refusal = enablement_refusal(TenantSettings("acme", enabled=False))
    assert refusal is not None and refusal.refusal is Refusal.FEATURE_DISABLED and refusal.code == "PERMISSION_DENIED"
    assert enablement_refusal(TenantSettings("acme", enabled=True)) is None


def test_the_default_comes_from_the_deployment_setting():
    assert CommonSettings.from_env("ingest", Env({})).tenants_enabled_by_default is True
    off = Env({"KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT": "false"})
    assert CommonSettings.from_env("search", off).tenants_enabled_by_default is False
    with pytest.raises(SettingsError, match="KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT"):
        CommonSettings.from_env("search", Env({"KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT": "maybe"}))


def test_uploads_stop_at_the_documents_quota():
    quotas = Quotas(max_documents=5)
    assert upload_refusal(quotas, Holdings(documents=4)) is None
    refusal = upload_refusal(quotas, Holdings(documents=5))
    assert refusal is not None and refusal.refusal is Refusal.QUOTA_EXHAUSTED
    assert refusal.metadata == {"quota": "max_documents", "used": "5", "limit": "5"}
    assert REFUSALS[refusal.refusal].waiting_helps is False  # a job refused so is not retried
    assert upload_refusal(Quotas(), Holdings(documents=10**9, bytes=10**15)) is None  # absent: unlimited


def test_the_bytes_quota_counts_the_new_file_once_its_size_is_known():
    quotas = Quotas(max_bytes=100)
    assert upload_refusal(quotas, Holdings(bytes=60), adding_bytes=40) is None
    assert upload_refusal(quotas, Holdings(bytes=60), adding_bytes=41) is not None
    assert upload_refusal(quotas, Holdings(bytes=99)) is None  # size unknown yet: room is left
    assert upload_refusal(quotas, Holdings(bytes=100)) is not None  # nothing left at all


def test_embedding_is_refused_past_the_chunks_or_the_months_tokens():
    assert embedding_refusal(Quotas(max_chunks=10), Holdings(chunks=6), 4) is None
    refusal = embedding_refusal(Quotas(max_chunks=10), Holdings(chunks=6), 5)
    assert refusal is not None and refusal.metadata["quota"] == "max_chunks"
    tokens = Quotas(max_embedding_tokens_per_month=1000)
    assert embedding_refusal(tokens, Holdings(embedding_tokens=999), 50) is None
    assert embedding_refusal(tokens, Holdings(embedding_tokens=1000), 0).metadata["quota"] == (
        "max_embedding_tokens_per_month"
    )


def test_llm_spend_past_the_budget_is_budget_exhausted():
    quotas = Quotas(max_llm_cost_per_month=Decimal("2.50"))
    assert budget_refusal(quotas, Holdings(llm_cost=Decimal("2.49"))) is None
    refusal = budget_refusal(quotas, Holdings(llm_cost=Decimal("2.50")))
    assert refusal is not None and refusal.refusal is Refusal.BUDGET_EXHAUSTED
    assert budget_refusal(Quotas(), Holdings(llm_cost=Decimal(10**6))) is None


def test_periods_are_utc_months():
    assert period_bounds("2026-12") == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert period_bounds("2026-01")[1] == datetime(2026, 2, 1, tzinfo=UTC)
    assert current_period(datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == "2026-12"
    assert period_bounds("9999-12")[1] > period_bounds("9999-12")[0]
    for bad in ("2026-13", "2026-00", "2026-1", "26-12", "0999-01", "December", "2026-12-01", "2026-12\n", ""):
        with pytest.raises(InvalidField) as caught:
            period_bounds(bad)
        assert caught.value.field == "period"


def test_settings_values_are_checked():
    assert check_tenant(" acme ") == "acme"
    for bad in ("", "   ", "x" * 201, "a\nb"):
        with pytest.raises(InvalidField):
            check_tenant(bad)
    with pytest.raises(InvalidField) as caught:
        check_quotas(Quotas(max_chunks=-1))
    assert caught.value.field == "quotas.max_chunks"
    with pytest.raises(InvalidField):
        check_quotas(Quotas(max_llm_cost_per_month=Decimal(-1)))
    assert check_quotas(Quotas(max_documents=0)) == Quotas(max_documents=0)  # 0 allows nothing


def test_metric_labels_are_the_largest_tenants_and_one_other():
    rows = [TenantTotals(f"t{i}", documents=i, stored_bytes=10 * i, chunks=100 * i) for i in range(1, 101)]
    lines = bounded_totals(rows, max_tenants=3)
    assert [line.tenant for line in lines] == ["t100", "t99", "t98", "_other"]
    assert lines[-1].documents == sum(range(1, 98)) and lines[-1].chunks == 100 * sum(range(1, 98))
    assert bounded_totals(rows[:2], max_tenants=3) == sorted(rows[:2], key=lambda t: -t.documents)


def test_a_usage_report_that_is_not_tenant_wide_counts_the_callers_node_and_below_in_bands_it_reads():
    p = ScopePath.parse
    placements = [
        Placement(1, p("/"), Band.TENANT),
        Placement(2, p("/"), Band.CONFIDENTIAL),
        Placement(3, p("workspace:eng"), Band.TENANT),
        Placement(4, p("workspace:eng/project:billing"), Band.RESTRICTED),
        Placement(5, p("workspace:sales"), Band.GENERAL),
        Placement(6, p("/"), Band.GENERAL, platform=True),  # the platform tenant's, never counted
    ]
    assert counted_corpora(Reader(p("/")), placements) == {1, 3, 5}
    assert counted_corpora(Reader(p("/"), Band.RESTRICTED), placements) == {1, 2, 3, 4, 5}
    assert counted_corpora(Reader(p("workspace:eng"), Band.RESTRICTED), placements) == {3, 4}  # no ancestor's
    assert counted_corpora(Reader(p("workspace:eng/project:billing")), placements) == set()
    assert counted_corpora(Reader(p("workspace:sales"), Band.GENERAL), placements) == {5}
