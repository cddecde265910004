"""Test helpers shared across files live in tests/support/: no test module imports another."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_test_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append("." * node.level + node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [
        n
        for n in names
        if n.startswith(".") or (n.startswith("tests.") and not n.startswith("tests.support")) or n == "tests"
    ]


def test_only_the_support_package_is_imported_across_test_files():
    files = [p for p in TESTS.rglob("*.py") if "support" not in p.relative_to(TESTS).parts[:1]]
    assert len(files) > 40
    offenders = {str(p.relative_to(TESTS)): found for p in files if (found := imported_test_modules(p))}
    assert offenders == {}


def test_the_support_package_imports_no_test_module(tmp_path):
    files = list((TESTS / "support").glob("*.py"))
    assert len(files) >= 8
    offenders = {p.name: found for p in files if (found := imported_test_modules(p))}
    assert offenders == {}
    assert imported_test_modules(Path(__file__).with_name("test_settings.py")) == []
    probe = tmp_path / "probe.py"  # the detector itself finds an import of another test module
    probe.write_text("from tests.integration.test_ingest_jobs import upload\nfrom .conftest import x\n")
    assert imported_test_modules(probe) == ["tests.integration.test_ingest_jobs", ".conftest"]
