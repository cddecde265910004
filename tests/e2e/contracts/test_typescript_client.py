"""The TypeScript client package (clients/typescript) against the real stack: pytest starts the
stack and hands its gateway's address and tokens to the package's own tests (node:test), which
`npm test` builds from the protos and runs. `make setup` installed the package's dependencies
from its lockfile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.contracts import CAP

pytestmark = pytest.mark.e2e

PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "typescript"


def test_the_typescript_client_runs_the_platform_team_s_flow(stack, token):
    npm = shutil.which("npm")
    assert npm, "Node.js and npm are needed: `make setup` installs them"
    assert (PACKAGE / "node_modules" / "@grpc" / "grpc-js").is_dir(), "run `make setup` (npm ci in clients/typescript)"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")},
        "KNOWLEDGE_TEST_ADDRESS": stack["grpc"]["gateway"],
        "KNOWLEDGE_TEST_TOKEN": token("ts-client"),
        "KNOWLEDGE_TEST_TOKEN_EXPIRED": token("ts-client", ttl_s=-120),
        "KNOWLEDGE_TEST_TOKEN_INVALID": "not.a.jwt",
        "KNOWLEDGE_TEST_TOKEN_NO_SEARCH": token("ts-client", ["corpus.read"]),
        "KNOWLEDGE_TEST_MAX_UPLOAD_BYTES": str(CAP),
    }
    run = subprocess.run([npm, "test"], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=280)
    print(run.stdout[-4000:])
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert "# fail 0" in run.stdout and "# pass 2" in run.stdout
