"""Schemathesis against the live gateway: every operation of the served description, every check."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.stack import BIN

pytestmark = pytest.mark.e2e

SCHEMATHESIS_CONFIG = Path(__file__).with_name("schemathesis.toml")  # its exceptions, and why


@pytest.mark.timeout(600)  # the run's own limit (540 s) and the stack's answers to it
def test_schemathesis_all_checks_find_nothing(stack, token, tmp_path):
    """Every operation of the served description, fuzzed with every check (examples, coverage,
    fuzzing and stateful phases, a bounded number of cases each, a fixed seed): no 5xx, every
    answer one the description allows (status, content type, headers, body schema), what the
    description refuses refused, what it allows accepted, an undeclared method 405."""
    started = time.monotonic()
    result = subprocess.run(
        [
            str(BIN / "st"),
            "--config-file",
            str(SCHEMATHESIS_CONFIG),
            "run",
            f"{stack['base']}/openapi.json",
            "--url",
            stack["root"],
            "-H",
            f"Authorization: Bearer {token('fuzz')}",
            "--checks",
            "all",
            "--max-examples",
            "30",
            "--seed",
            "20261130",
            "--generation-database",
            "none",
            "--no-color",
            "--request-timeout",
            "30",
            # GET /events streams until the client goes away (its own test is in test_streams.py).
            "--exclude-operation-id",
            "WatchEvents",
        ],
        capture_output=True,
        text=True,
        timeout=540,  # about 60 operations; the machine is shared
        cwd=tmp_path,
    )
    summary = [line for line in result.stdout.splitlines() if "generated" in line]
    print("schemathesis:", summary, f"in {time.monotonic() - started:.0f} s")
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    # Every operation but the never-ending WatchDocuments and WatchEvents.
    paths = httpx.get(f"{stack['base']}/openapi.json").json()["paths"]
    total = sum(1 for item in paths.values() for verb in item if verb in ("get", "post", "put", "patch", "delete"))
    assert summary and "failure" not in summary[-1] and f"{total - 2} selected / {total} total" in result.stdout
