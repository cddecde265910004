"""Import use cases at their ports: the refusals decided before any port is asked (no roots for
the tenant, a path outside them among good ones, a decided finding), and the pure decisions."""

import functools
import time
from datetime import UTC, datetime

import pytest
from knowledge_ingest.domain.errors import CorpusNotFound, CorpusReadOnly
from knowledge_ingest.domain.imports import (
    Binding,
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
from knowledge_ingest.imports.postgres import hash_file
from knowledge_ingest.imports.usecases import ImportUseCases
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import InvalidField, UploadTooLarge
from knowledge_runtime.imports import ImportRoots, PathRefused
from knowledge_runtime.refusals import Refused
from knowledge_runtime.settings import Env
from structlog.testing import capture_logs

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


def sparse(path, size: int):
    """A file of ``size`` bytes that costs no disk (a hole)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


async def test_a_file_over_the_upload_cap_is_refused_from_its_size_unread(tmp_path):
    (tmp_path / "docs").mkdir()
    roots = ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS": f"docs={tmp_path / 'docs'}"}))
    huge = sparse(tmp_path / "docs" / "huge.pdf", 5 * 1024**3)
    started = time.monotonic()
    with pytest.raises(UploadTooLarge) as caught:
        await hash_file(roots.resolve(str(huge), "acme"), max_bytes=1024 * 1024)
    assert time.monotonic() - started < 0.5 and caught.value.max_bytes == 1024 * 1024  # 5 GB unread
    (tmp_path / "docs" / "small.txt").write_text("small")
    seen = await hash_file(roots.resolve(str(tmp_path / "docs" / "small.txt"), "acme"), max_bytes=1024 * 1024)
    assert (seen.path, seen.size_bytes) == ("small.txt", 5)


class RecordingImports(Nothing):
    def __init__(self) -> None:
        self.recorded: list[str] = []

    async def record(self, tenant, corpus_id, root_name, seen, **decision):
        self.recorded.append(seen.path)
        return Finding(
            len(self.recorded),
            corpus_id,
            root_name,
            seen.path,
            seen.content_hash,
            seen.size_bytes,
            "new",
            FindingState.OPEN,
            None,
            None,
            None,
            datetime.now(UTC),
        )


async def test_a_pass_leaves_a_file_over_the_cap_out_with_one_warning(tmp_path):
    (tmp_path / "docs").mkdir()
    roots = ImportRoots.from_env(Env({"KNOWLEDGE_IMPORT_ROOTS": f"docs={tmp_path / 'docs'}"}))
    sparse(tmp_path / "docs" / "huge.pdf", 5 * 1024**3)
    (tmp_path / "docs" / "small.txt").write_text("small")
    imports = RecordingImports()
    capped = functools.partial(hash_file, max_bytes=1024 * 1024)
    cases = ImportUseCases(roots, Nothing(), Nothing(), Nothing(), imports, capped)
    binding = Binding(1, "docs", Mode.SUGGEST, "dev", datetime.now(UTC), tenant="acme")
    started = time.monotonic()
    with capture_logs() as logs:
        report = await cases.run_pass(binding)
    assert time.monotonic() - started < 1.0  # the 5 GB were never hashed
    assert imports.recorded == ["small.txt"]
    assert (report.files_seen, report.findings_recorded, report.errors) == (1, 1, 1)
    warned = [entry for entry in logs if entry["event"] == "import_file_too_large"]
    assert [(w["path"], w["max_bytes"], w["log_level"]) for w in warned] == [("huge.pdf", 1024 * 1024, "warning")]


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
