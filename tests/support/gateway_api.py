"""What the gateway API's e2e modules share: the settings of their stack that they rely on, the
handbook they search, bearer headers, and the `knowledge` CLI run against the stack."""

from __future__ import annotations

import subprocess

from tests.support.stack import BIN

CAP = 8 * 1024 * 1024
ORIGIN = "https://app.example.com"
SEARCHABLE = "DOCUMENT_STATE_SEARCHABLE"
HANDBOOK = (
    "# Staff handbook\n\n## Vacation\n\nEvery employee receives thirty days of paid vacation per year, "
    "approved by the line manager.\n\n## Quokka program\n\nThe quokka mentoring program pairs new staff "
    "with a mentor for their first ninety days.\n"
)


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def knowledge(stack, *args: str) -> subprocess.CompletedProcess:
    env = {**stack["env"], "KNOWLEDGE_URL": stack["base"]}
    return subprocess.run([str(BIN / "knowledge"), *args], env=env, capture_output=True, text=True, timeout=240)
