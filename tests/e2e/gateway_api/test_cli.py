"""The `knowledge` CLI client over REST, end to end, with its exit codes."""

from __future__ import annotations

import json

import pytest

from tests.support.gateway_api import CAP, knowledge

pytestmark = pytest.mark.e2e


def test_cli_end_to_end_with_exit_codes(stack, tmp_path):
    created = knowledge(stack, "corpora", "create", "Policies", "--tenant", "cli")
    assert created.returncode == 0, created.stderr
    corpus_id = created.stdout.split("\t")[0]
    assert knowledge(stack, "corpora", "create", "Policies", "--tenant", "cli").returncode == 5
    listed = knowledge(stack, "corpora", "list", "--json", "--tenant", "cli")
    assert [c["name"] for c in json.loads(listed.stdout)] == ["Policies"]
    first, second = tmp_path / "travel.md", tmp_path / "security.md"
    first.write_text("# Travel\n\nTrain journeys over four hours may be booked in first class.\n")
    second.write_text("# Security\n\nBadges must be worn visibly inside the wombat building.\n")
    uploaded = knowledge(stack, "upload", str(first), str(second), "--corpus", corpus_id, "--tenant", "cli")
    assert uploaded.returncode == 0, uploaded.stderr
    assert "100.0% searchable travel.md" in uploaded.stderr and "100.0% searchable security.md" in uploaded.stderr
    rows = [line.split("\t") for line in uploaded.stdout.splitlines()]
    assert [row[2] for row in rows] == ["travel.md", "security.md"]
    security_id = rows[1][0]
    blank = tmp_path / "blank.md"
    blank.write_text("")
    warned = knowledge(stack, "upload", str(blank), "--corpus", corpus_id, "--tenant", "cli")
    assert warned.returncode == 0 and "knowledge: blank.md: warning: the file is empty" in warned.stderr
    found = knowledge(stack, "search", "wombat building badges", "--corpus", corpus_id, "--tenant", "cli")
    assert found.returncode == 0 and "security.md" in found.stdout.splitlines()[1]
    asked = knowledge(stack, "query", "Where must badges be worn?", "--tenant", "cli")
    assert asked.returncode == 0 and "[1] security.md" in asked.stdout
    text = knowledge(stack, "text", security_id, "--tenant", "cli")
    assert text.returncode == 0 and "wombat building" in text.stdout
    assert knowledge(stack, "text", security_id, "--tenant", "someone-else").returncode == 3
    removed = knowledge(stack, "delete", security_id, "--reason", "replaced", "--tenant", "cli")
    assert removed.returncode == 0 and f"deleted document {security_id}" in removed.stdout
    assert "filename: security.md" in removed.stdout and "reason: replaced" in removed.stdout
    listed = knowledge(stack, "tombstones", "--corpus", corpus_id, "--tenant", "cli")
    assert listed.returncode == 0 and listed.stdout.startswith("tombstone\tdocument")
    assert [line.split("\t")[1] for line in listed.stdout.splitlines()[1:]] == [security_id]
    gone = knowledge(stack, "text", security_id, "--tenant", "cli")
    assert gone.returncode == 3 and "DOCUMENT_NOT_FOUND" in gone.stderr
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * (CAP + 1))
    assert knowledge(stack, "upload", str(big), "--corpus", corpus_id, "--tenant", "cli").returncode == 6
    assert knowledge(stack, "corpora", "list", "--token", "nope").returncode == 4
    assert knowledge(stack, "corpora", "list").returncode == 2  # no token anywhere
