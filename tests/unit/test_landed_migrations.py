"""A migration that has landed is never edited: a database that applied it refuses to start
(``migration … changed after it was applied``). The checksums of the landed ones are recorded
in ``knowledge_runtime/db/landed_migrations.sha256``; a new migration is not listed until it lands."""

from __future__ import annotations

from importlib import resources

from knowledge_runtime.db.migrate import load_migrations


def landed() -> dict[str, str]:
    text = (resources.files("knowledge_runtime.db") / "landed_migrations.sha256").read_text()
    rows = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return {name: checksum for checksum, name in rows}


def test_no_landed_migration_changed_or_went() -> None:
    current = {m.name: m.checksum for m in load_migrations()}
    recorded = landed()
    assert recorded, "the record of landed migrations is empty"
    missing = sorted(set(recorded) - set(current))
    changed = sorted(name for name, checksum in recorded.items() if current.get(name, checksum) != checksum)
    assert not missing, f"landed migrations removed: {missing}"
    assert not changed, f"landed migrations edited (add a new migration instead): {changed}"


def test_the_record_lists_each_version_once() -> None:
    versions = [name.split("_", 1)[0] for name in landed()]
    assert len(versions) == len(set(versions))
