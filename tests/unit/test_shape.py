"""The shape the code keeps: pure domains, services that never import each other, a runtime that
imports no service, readable modules, and comments that say why rather than which issue."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    "knowledge_content_index": ROOT / "services/content-index/src/knowledge_content_index",
    "knowledge_embedder": ROOT / "services/embedder/src/knowledge_embedder",
    "knowledge_ingest": ROOT / "services/ingest/src/knowledge_ingest",
    "knowledge_search": ROOT / "services/search/src/knowledge_search",
    "knowledge_documents_ai": ROOT / "services/documents-ai/src/knowledge_documents_ai",
    "knowledge_mcp": ROOT / "services/mcp/src/knowledge_mcp",
}
# The MCP adapter calls the services over gRPC: it holds no model and no SQL.
MCP_FORBIDDEN = ("asyncpg", "knowledge_runtime.db", "torch", "sentence_transformers", "llama_cpp", "onnxruntime")
RUNTIME = ROOT / "runtime/src/knowledge_runtime"
MAX_MODULE_LINES = 600
# What a domain never touches: the wire (generated messages, gRPC) and the database driver.
DOMAIN_FORBIDDEN = ("knowledge.v1", "grpc", "asyncpg", "google.protobuf")


def imported_modules(path: Path) -> list[str]:
    """Every absolute module ``path`` imports, at any depth (inside functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
            # ``from knowledge_ingest import jobs`` imports the package ``knowledge_ingest.jobs``
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def domain_offences(package: str, path: Path) -> list[str]:
    """A domain module's imports of the wire, the driver, or its own service outside the domain."""
    own_domain = f"{package}.domain"
    return [
        module
        for module in imported_modules(path)
        if any(within(module, forbidden) for forbidden in DOMAIN_FORBIDDEN)
        or (within(module, package) and not within(module, own_domain) and module != package)
    ]


def tracked_python() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.split() if "_pb2" not in line]


@pytest.mark.parametrize("package", sorted(SERVICES))
def test_domain_modules_import_no_adapters_api_or_generated_code(package):
    domain = SERVICES[package] / "domain"
    assert domain.is_dir(), domain
    offences = {
        str(path.relative_to(ROOT)): found
        for path in sorted(domain.rglob("*.py"))
        if (found := domain_offences(package, path))
    }
    assert offences == {}


@pytest.mark.parametrize("package", sorted(SERVICES))
def test_services_never_import_each_other(package):
    others = [other for other in SERVICES if other != package]
    offences = {
        str(path.relative_to(ROOT)): found
        for path in sorted(SERVICES[package].rglob("*.py"))
        if (found := [m for m in imported_modules(path) if any(within(m, other) for other in others)])
    }
    assert offences == {}


def test_the_mcp_adapter_holds_no_model_and_no_sql():
    offences = {
        str(path.relative_to(ROOT)): found
        for path in sorted(SERVICES["knowledge_mcp"].rglob("*.py"))
        if (found := [m for m in imported_modules(path) if any(within(m, f) for f in MCP_FORBIDDEN)])
    }
    assert offences == {}


def test_the_runtime_imports_no_service():
    offences = {
        str(path.relative_to(ROOT)): found
        for path in sorted(RUNTIME.rglob("*.py"))
        if (found := [m for m in imported_modules(path) if any(within(m, service) for service in SERVICES)])
    }
    assert offences == {}


def test_no_module_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): count
        for path in tracked_python()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")


def test_no_comment_cites_an_issue_number():
    """Landed migrations keep theirs: they are history, and a test forbids editing them."""
    listed = subprocess.run(
        ["git", "ls-files", "*.py", "*.proto", "*.lua", "*.yaml", "*.toml", "Makefile", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    this = Path(__file__).relative_to(ROOT).as_posix()
    cited = [
        f"{name}:{number}"
        for name in listed
        if "_pb2" not in name and name != this
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), start=1)
        if ISSUE_NUMBER.search(line)
    ]
    assert cited == []


def planted(source: str) -> list[str]:
    """What ``domain_offences`` finds in ``source`` as if it were a module of ingest's domain."""
    path = ROOT / ".pytest-shape-sample.py"
    try:
        path.write_text(source)
        return domain_offences("knowledge_ingest", path)
    finally:
        path.unlink()


def test_the_checks_see_what_they_forbid():
    """Each detector catches a planted offence, so a passing test is not a blind one."""
    offences = {
        "from knowledge.v1 import ingest_pb2": "knowledge.v1",
        "import grpc": "grpc",
        "from knowledge_ingest.jobs.postgres import PostgresJobs": "knowledge_ingest.jobs.postgres",
        "from knowledge_ingest import jobs": "knowledge_ingest.jobs",
        "def f():\n    import asyncpg": "asyncpg",
    }
    for source, expected in offences.items():
        assert any(within(found, expected) for found in planted(source)), source
    assert planted("from knowledge_ingest.domain.jobs import Job\nimport re") == []
    assert ISSUE_NUMBER.search("# see issue 19") and not ISSUE_NUMBER.search("# tissue 3 and re-issue")
