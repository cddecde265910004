"""``auto`` on a CPU: both backends timed once per model and machine, the choice cached.

The timing runs each backend as the service would (torch one pass at a time over every core,
the int8 export in its lanes) on a fixed sample of texts at the model's window, within a time
budget, after one warm-up pass each. The choice is kept in ``<data dir>/embedder/
backend-choice.json`` under a fingerprint of what could change the answer: the model and its
files, the window, the batch size and lanes, the CPU (model, flags, usable cores) and the
libraries' versions. A start with the same fingerprint reads the choice instead of timing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Protocol

import numpy as np
import structlog

from knowledge_embedder.domain.backend import Choice, Timing, faster
from knowledge_embedder.domain.model import Measured

log = structlog.get_logger("knowledge.embedder.backend")
CACHE_FILE = Path("embedder") / "backend-choice.json"
SAMPLE_TEXTS = 32
BUDGET_S = 5.0  # per backend, after its warm-up pass: start-up stays bounded on a large model
_MODEL_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "config.json",
    "tokenizer.json",
    "sentence_bert_config.json",
    "modules.json",
)
_LIBRARIES = ("torch", "onnxruntime", "sentence-transformers", "transformers", "tokenizers", "numpy")
# The sample's words: plain prose, so that both backends see ordinary text; cut to the window.
_PROSE_TEXT = (
    "Quarterly revenue grew by twelve percent while operating costs fell, and the board approved the "
    "new travel policy. Employees may work remotely three days a week; backups run nightly and are "
    "kept for thirty days in a second region. The safety training covers ladders, forklifts and the "
    "handling of chemicals, and every visitor signs in at the front desk before entering the warehouse. "
    "Invoices above the threshold need two approvals, and the finance team closes the books on the "
    "fifth working day of each month after reconciling every account."
)
_PROSE = _PROSE_TEXT.split()


class Timed(Protocol):
    """An encoder as the timing needs it."""

    batch_size: int
    lanes: int
    max_seq_length: int

    def measure(self, texts: Sequence[str]) -> list[Measured]: ...

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray: ...


def sample(encoder: Timed, count: int = SAMPLE_TEXTS) -> list[str]:
    """``count`` fixed texts, each as long as the window (the first window of a longer text)."""
    words = encoder.max_seq_length + 8  # a word is at least one token: longer than the window
    texts = [" ".join(_PROSE[(i * 7 + j) % len(_PROSE)] for j in range(words)) for i in range(count)]
    return [measured.pieces(text)[0][0] for text, measured in zip(texts, encoder.measure(texts))]


def throughput(encoder: Timed, texts: Sequence[str], budget_s: float = BUDGET_S) -> tuple[float, np.ndarray]:
    """Texts per second of ``encoder`` on ``texts`` (passes of its batch size, ``lanes`` at once),
    stopping once ``budget_s`` has passed; and the vectors of the texts it did."""
    size, lanes = max(1, encoder.batch_size), max(1, encoder.lanes)
    passes = [list(texts[start : start + size]) for start in range(0, len(texts), size)]
    encoder.encode(passes[0])  # warm-up: a first pass at a new length allocates
    done: list[np.ndarray] = []
    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="embedder-timing") as pool:
        started = time.perf_counter()
        for first in range(0, len(passes), lanes):
            done += pool.map(encoder.encode, passes[first : first + lanes])
            if time.perf_counter() - started >= budget_s:
                break
        elapsed = time.perf_counter() - started
    vectors = np.concatenate(done)
    return len(vectors) / elapsed, vectors


def time_backends(torch_encoder: Timed, int8_encoder: Timed, budget_s: float = BUDGET_S) -> Timing:
    """Both backends on the same sample: rates, and the mean cosine of the texts both did."""
    texts = sample(torch_encoder)
    torch_rate, torch_vectors = throughput(torch_encoder, texts, budget_s)
    int8_rate, int8_vectors = throughput(int8_encoder, texts, budget_s)
    both = min(len(torch_vectors), len(int8_vectors))
    cosine = float((torch_vectors[:both] * int8_vectors[:both]).sum(axis=1).mean())
    return Timing(torch_per_s=torch_rate, int8_per_s=int8_rate, cosine=cosine)


def fingerprint(
    *, model_id: str, model_dir: Path, window: int, batch_size: int, lanes: int, cores: int
) -> dict[str, object]:
    """What the timing's answer depends on; a change to any of it times again."""
    return {
        "model": model_id,
        "model_files": _files_digest(model_dir),
        "window": window,
        "batch_size": batch_size,
        "lanes": lanes,
        "cores": cores,
        **_cpu(),
        "libraries": {name: _version(name) for name in _LIBRARIES},
    }


class ChoiceCache:
    """The file of choices made on this data dir, one per fingerprint."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CACHE_FILE

    def get(self, key: str) -> Choice | None:
        try:
            records = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return Choice.from_record(records.get(key)) if isinstance(records, dict) else None

    def put(self, key: str, choice: Choice, fingerprint: Mapping[str, object]) -> None:
        """Kept beside the other fingerprints' choices; written whole (atomically) or not at all:
        a data dir that cannot be written only costs the next start another timing."""
        try:
            records = json.loads(self.path.read_text())
            records = records if isinstance(records, dict) else {}
        except (OSError, ValueError):
            records = {}
        records[key] = choice.record(fingerprint)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp") as handle:
                json.dump(records, handle, indent=2, sort_keys=True)
            os.replace(handle.name, self.path)
        except OSError as error:
            log.warning("embedding_backend_not_cached", path=str(self.path), error=type(error).__name__)


def chosen(cache: ChoiceCache, fingerprint: Mapping[str, object], measure: Callable[[], Timing]) -> tuple[Choice, bool]:
    """The cached choice for ``fingerprint``, or the faster of a new timing (then cached); and
    whether it came from the cache."""
    key = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached, True
    choice = faster(measure())
    cache.put(key, choice, fingerprint)
    return choice, False


def _files_digest(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in _MODEL_FILES:
        path = model_dir / name
        if path.exists():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


def _cpu() -> dict[str, str]:
    """The CPU's model and a digest of its flags (what the kernels can use), from /proc/cpuinfo."""
    found = {"cpu": platform.processor() or platform.machine(), "cpu_flags": ""}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name" and not found.get("model_name"):
                found["cpu"] = found["model_name"] = value.strip()
            elif name.strip() in ("flags", "Features") and not found["cpu_flags"]:
                found["cpu_flags"] = hashlib.sha256(value.strip().encode()).hexdigest()[:16]
    except OSError:
        pass
    found.pop("model_name", None)
    return {**found, "machine": platform.machine()}


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""
