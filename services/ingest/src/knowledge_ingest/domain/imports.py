"""Fenced imports, change findings and auto-indexing, as pure decisions.

A *binding* says, per corpus and import root, what a pass over the root does: ``auto`` ingests
its findings as jobs, ``suggest`` only records them, ``off`` does nothing. A *finding* is one
(path, content hash) a pass saw that the corpus has not seen before under that path: ``new`` when
the path itself is new, ``changed`` when it had another hash before. It is recorded once; a
dismissed one is kept (somebody looked), so the same bytes are never suggested twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from knowledge_runtime.errors import FailedPrecondition, InvalidField, NotFound

MAX_IMPORT_PATHS = 100  # paths per ImportPath call
MAX_FILES_PER_PASS = 10_000  # files one pass over a root looks at
AUTO_DECIDER = "auto-index"


class Mode(StrEnum):
    OFF = "off"
    SUGGEST = "suggest"
    AUTO = "auto"


class FindingState(StrEnum):
    OPEN = "open"
    ACCEPTED = "accepted"
    DISMISSED = "dismissed"


def parse_mode(text: str) -> Mode:
    try:
        return Mode(text.strip().lower())
    except ValueError:
        raise InvalidField("mode", "mode must be one of off, suggest, auto", reason="INVALID_REQUEST") from None


def parse_state_filter(text: str) -> FindingState | None:
    if not text:
        return None
    try:
        return FindingState(text.strip().lower())
    except ValueError:
        raise InvalidField(
            "state", "state must be one of open, accepted, dismissed", reason="INVALID_REQUEST"
        ) from None


@dataclass(frozen=True, slots=True)
class Binding:
    corpus_id: int
    root_name: str
    mode: Mode
    set_by: str
    update_time: datetime
    last_scan_time: datetime | None = None
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    finding_id: int
    corpus_id: int
    root_name: str
    path: str
    content_hash: str
    size_bytes: int
    kind: str
    state: FindingState
    job_id: uuid.UUID | None
    decided_by: str | None
    decided_time: datetime | None
    create_time: datetime


@dataclass(frozen=True, slots=True)
class SeenFile:
    """A file a pass read: where under the root, and its bytes' hash."""

    path: str
    content_hash: str
    size_bytes: int


@dataclass
class PassReport:
    roots: int = 0
    files_seen: int = 0
    findings_recorded: int = 0
    jobs_started: int = 0
    errors: int = 0

    def add(self, other: PassReport) -> None:
        self.roots += other.roots
        self.files_seen += other.files_seen
        self.findings_recorded += other.findings_recorded
        self.jobs_started += other.jobs_started
        self.errors += other.errors


def ingests_findings(mode: Mode) -> bool:
    return mode is Mode.AUTO


def records_findings(mode: Mode) -> bool:
    return mode is not Mode.OFF


def require_open(finding: Finding) -> None:
    """Only an open finding is accepted or dismissed; one already decided stays as it was (a
    dismissed one stays dismissed, an accepted one keeps its job)."""
    if finding.state is not FindingState.OPEN:
        raise FindingDecided(finding.finding_id, finding.state)


class ImportRootNotFound(NotFound):
    reason = "IMPORT_ROOT_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__("no import root of that name is configured for this tenant", metadata={"root": name[:64]})


class FindingNotFound(NotFound):
    reason = "FINDING_NOT_FOUND"

    def __init__(self, finding_id: str) -> None:
        super().__init__("finding not found", metadata={"finding_id": finding_id[:40]})


class FindingDecided(FailedPrecondition):
    reason = "FINDING_DECIDED"

    def __init__(self, finding_id: int, state: FindingState) -> None:
        super().__init__(f"the finding was already {state.value}", metadata={"finding_id": str(finding_id)})
