"""Import use cases at their ports: the refusals decided before any port is asked (no roots for
the tenant, a path outside them among good ones, a decided finding), and the pure decisions."""

from datetime import UTC, datetime

import pytest
from knowledge_ingest.domain.errors import CorpusNotFound, CorpusReadOnly
from knowledge_ingest.domain.imports import (
    Finding,
    FindingDecided,
    FindingState,
    Mode,
    ingests_findings,
    parse_mode,
    records_findings,
    require_open,
)
from knowledge_ingest.domain.system_corpora import CorpusKind
from knowledge_ingest.imports.usecases import ImportUseCases
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import InvalidField
from knowledge_runtime.imports import ImportRoots, PathRefused
from knowledge_runtime.refusals import Refused
from knowledge_runtime.settings import Env

from tests.support.reach import FakeReach


class Nothing:
    """Every port: any call is a test failure (nothing may be read, stored or queued)."""

    def __getattr__(self, name):
        async def called(*args, **kwargs):
            raise AssertionError(f"{name} was called")

        return called


class AcceptingDocuments(Nothing):
    async def corpus_kind(self, tenant, corpus_id):
        return CorpusKind.USER


def use_cases(roots: ImportRoots, documents=None) -> ImportUseCases:
    async def hash_file(resolved):
        raise AssertionError("a file was read")

    return ImportUseCases(roots, Nothing(), documents or Nothing(), Nothing(), Nothing(), hash_file)


SCOPE = Scope("acme", frozenset({"document.import"}), "dev")


async def test_no_root_for_the_tenant_is_feature_disabled(tmp_path):
    roots = ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS_FILE": str(_file(tmp_path, ["globex"]))}))
    for call in (
        use_cases(roots).import_paths(SCOPE, "1", [str(tmp_path / "docs" / "a.txt")]),
        use_cases(ImportRoots()).set_binding(SCOPE, "1", "docs", "auto"),
        use_cases(ImportRoots()).scan(SCOPE, "1"),
    ):
        with pytest.raises(Refused) as caught:
            await call
        assert caught.value.reason == "FEATURE_DISABLED"


async def test_one_path_outside_refuses_the_call_before_any_read(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("a")
    roots = ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS": f"docs={tmp_path / 'docs'}"}))
    with pytest.raises(PathRefused) as caught:
        await use_cases(roots, AcceptingDocuments()).import_paths(
            SCOPE, "1", [str(tmp_path / "docs" / "a.txt"), "/etc/passwd"]
        )
    assert caught.value.metadata["field"] == "paths[1]"


def _file(tmp_path, tenants):
    (tmp_path / "docs").mkdir(exist_ok=True)
    file = tmp_path / "roots.toml"
    file.write_text(f'[roots.docs]\npath = "{tmp_path / "docs"}"\ntenants = {tenants!r}\n'.replace("'", '"'))
    return file


def test_modes():
    assert parse_mode(" AUTO ") is Mode.AUTO
    with pytest.raises(InvalidField):
        parse_mode("always")
    assert ingests_findings(Mode.AUTO) and not ingests_findings(Mode.SUGGEST)
    assert records_findings(Mode.SUGGEST) and not records_findings(Mode.OFF)


def test_only_an_open_finding_is_decided():
    now = datetime.now(UTC)
    finding = Finding(1, 1, "docs", "a.txt", "0" * 64, 1, "new", FindingState.DISMISSED, None, "dev", now, now)
    with pytest.raises(FindingDecided):
        require_open(finding)
    require_open(Finding(1, 1, "docs", "a.txt", "0" * 64, 1, "new", FindingState.OPEN, None, None, None, now))


class OneFinding(Nothing):
    """The finding 5 of corpus 1, open."""

    async def finding(self, tenant, finding_id):
        now = datetime.now(UTC)
        return Finding(5, 1, "docs", "a.txt", "0" * 64, 1, "new", FindingState.OPEN, None, None, None, now)

    async def bindings(self, tenant, corpus_id):
        return []


async def test_every_import_write_into_an_ancestors_corpus_is_read_only_and_reading_it_is_not(tmp_path):
    """Importing into, binding and scanning a corpus, and deciding its findings, write it: from a
    node below the corpus's, each is CORPUS_READ_ONLY before any file or port is touched; its
    bindings and findings are still listed."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("a")
    roots = ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS": f"docs={tmp_path / 'docs'}"}))
    reach = FakeReach()
    reach.place("acme", 1, "/")
    reach.place("acme", 2, "workspace:eng")
    imports = OneFinding()
    cases = ImportUseCases(roots, Nothing(), AcceptingDocuments(), Nothing(), imports, _no_read, reach)
    eng = Scope("acme", frozenset({"document.import", "imports.admin"}), "dev", scope_claim="workspace:eng")
    for call in (
        cases.import_paths(eng, "1", [str(tmp_path / "docs" / "a.txt")]),
        cases.set_binding(eng, "1", "docs", "auto"),
        cases.scan(eng, "1"),
        cases.accept(eng, "5"),
        cases.dismiss(eng, "5"),
    ):
        with pytest.raises(CorpusReadOnly) as caught:
            await call
        assert caught.value.metadata["corpus_scope"] == "/" and caught.value.code == "PERMISSION_DENIED"
    assert await cases.bindings(eng, "1") == []
    with pytest.raises(CorpusNotFound):  # a sibling's corpus is not there at all
        await cases.bindings(Scope("acme", frozenset(), "dev", scope_claim="/"), "2")


async def _no_read(resolved):
    raise AssertionError("a file was read")
