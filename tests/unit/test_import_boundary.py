"""The embedder is the only holder of the model: no other package imports torch or sentence_transformers."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("runtime", "services", "gateway", "cli")
ALLOWED = ROOT / "services" / "embedder"
FORBIDDEN = {"torch", "sentence_transformers"}


def forbidden_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in FORBIDDEN]
    return found


def python_files() -> list[Path]:
    files = []
    for top in SCANNED:
        files += [p for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts and "build" not in p.parts]
    return files


def test_only_the_embedder_imports_the_model_libraries():
    offenders = {}
    for path in python_files():
        if path.is_relative_to(ALLOWED):
            continue
        found = forbidden_imports(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}, f"only services/embedder may import {sorted(FORBIDDEN)}: {offenders}"


def test_the_walk_sees_every_package_and_the_detector_works():
    files = python_files()
    for top in SCANNED:
        assert any(p.is_relative_to(ROOT / top) for p in files), f"no Python files found under {top}/"
    # The embedder itself is scanned and found, which proves the detector would catch anyone else.
    assert any(forbidden_imports(p.read_text()) for p in files if p.is_relative_to(ALLOWED))
    for snippet in (
        "import torch",
        "import torch.nn as nn",
        "from sentence_transformers import SentenceTransformer",
        "import importlib\nimportlib.import_module('torch')",
        "def f():\n    import sentence_transformers",
    ):
        assert forbidden_imports(snippet), snippet
    for snippet in ("import torchvision_like_name_is_fine", "from .torch import x", "import numpy"):
        assert not forbidden_imports(snippet), snippet


def package_imports(path: Path, package: str) -> list[str]:
    """The modules of ``package`` that ``path`` imports (absolute imports, at any depth)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name == package or name.startswith(package + ".")]
    return found


def test_settings_depend_on_the_domain_at_most():
    """A service's config.py reads the environment into values its domain defines: it never
    imports adapters, use cases or the API (search's did, for its defaults)."""
    configs = sorted((ROOT / "services").glob("*/src/*/config.py"))
    assert len(configs) == 6
    offenders = {}
    for path in configs:
        package = path.parent.name
        allowed = (f"{package}.domain",)
        outside = [
            name
            for name in package_imports(path, package)
            if not any(name == a or name.startswith(a + ".") for a in allowed)
        ]
        if outside:
            offenders[str(path.relative_to(ROOT))] = outside
    assert offenders == {}
    # the check sees an import of an adapter
    probe = ROOT / "services" / "search" / "src" / "knowledge_search" / "bootstrap.py"
    assert "knowledge_search.adapters.postgres" in package_imports(probe, "knowledge_search")
