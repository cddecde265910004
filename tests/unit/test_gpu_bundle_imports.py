"""What ``bench/embedder.py --queue-only`` imports on a GPU node is what ``bench/bundle.py`` packs.

Such a node has PyTorch, sentence-transformers and their own needs, and nothing of this project's
environment: every other top-level module that the queue and the encoder pull in must be one of
the bundle's wheels, or the benchmark fails there, after a machine has been started for it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bundle

# The wheels' distribution names, as the modules they install are named.
BUNDLED = {
    "structlog": {"structlog"},
    "platformdirs": {"platformdirs"},
    "prometheus-client": {"prometheus_client"},
    "opentelemetry-api": {"opentelemetry"},
    "opentelemetry-sdk": {"opentelemetry"},
    "opentelemetry-semantic-conventions": {"opentelemetry"},
    "typing-extensions": {"typing_extensions"},
}

# Imports the queue and the encoder with every top-level module refused that is neither on such
# a node (the standard library, what PyTorch and sentence-transformers loaded) nor ours nor
# bundled: an optional import (structlog's console colours) falls back as it would there.
PROBE = """
import importlib.abc, json, sys
import numpy, torch, sentence_transformers, tokenizers  # what the node already has
allowed = {name.split(".")[0] for name in sys.modules} | set(sys.stdlib_module_names) | set(json.loads(sys.argv[1]))
refused = set()

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in allowed:
            refused.add(name.split(".")[0])
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, Refuse())
try:
    import knowledge_embedder.adapters.torch_encoder, knowledge_embedder.batching.queue, knowledge_embedder.batching.runner
except ImportError as error:
    print(json.dumps({"failed": str(error), "refused": sorted(refused)}))
else:
    print(json.dumps({"failed": None, "refused": sorted(refused)}))
"""


def test_the_queue_and_encoder_import_with_only_the_bundle_beside_pytorch() -> None:
    assert set(BUNDLED) == set(bundle.PACKAGES)
    allowed = sorted({"knowledge_embedder", "knowledge_runtime", "knowledge"}.union(*BUNDLED.values()))
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(allowed)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["failed"] is None, f"needs a package bench/bundle.py does not pack: {outcome}"


def test_the_probe_fails_where_a_needed_package_is_not_bundled() -> None:
    allowed = sorted({"knowledge_embedder", "knowledge_runtime", "knowledge"})  # no structlog and the rest
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(allowed)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["failed"] is not None
