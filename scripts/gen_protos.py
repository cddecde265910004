"""Generate the Python stubs (with .pyi) of protos/knowledge/v1 into the runtime package.

    python scripts/gen_protos.py           # regenerate runtime/src/knowledge/v1
    python scripts/gen_protos.py --check   # exit 1 when the committed stubs differ from a fresh run

Generated code is never edited by hand; CI's test suite runs the check.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
THIRD_PARTY = ROOT / "third_party"
OUTPUT = ROOT / "runtime" / "src"
PACKAGE = Path("knowledge") / "v1"


def generate(out_dir: Path) -> list[Path]:
    """Run protoc into ``out_dir``; returns the generated files relative to it."""
    include = Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(str(p.relative_to(PROTOS)) for p in (PROTOS / PACKAGE).glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{THIRD_PARTY}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *sources,
    ]
    cwd = os.getcwd()
    os.chdir(PROTOS)  # protoc resolves the relative source names against -I paths
    try:
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
    finally:
        os.chdir(cwd)
    for folder in (out_dir / "knowledge", out_dir / PACKAGE):
        (folder / "__init__.py").touch()
    return sorted(p.relative_to(out_dir) for p in (out_dir / PACKAGE).iterdir() if p.suffix in {".py", ".pyi"})


def differences(committed_root: Path = OUTPUT) -> list[str]:
    """Files that differ between the committed stubs and a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        committed = (
            sorted(
                p.relative_to(committed_root)
                for p in (committed_root / PACKAGE).iterdir()
                if p.suffix in {".py", ".pyi"}
            )
            if (committed_root / PACKAGE).is_dir()
            else []
        )
        problems = [f"missing: {p}" for p in fresh if p not in committed]
        problems += [f"not generated: {p}" for p in committed if p not in fresh]
        problems += [
            f"differs: {p}"
            for p in fresh
            if p in committed and not filecmp.cmp(Path(tmp) / p, committed_root / p, shallow=False)
        ]
        return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    options = parser.parse_args()
    if options.check:
        problems = differences()
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("generated stubs are stale: run `python scripts/gen_protos.py`", file=sys.stderr)
        return 1 if problems else 0
    for path in (OUTPUT / PACKAGE).glob("*_pb2*.py*"):
        path.unlink()
    for path in generate(OUTPUT):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
