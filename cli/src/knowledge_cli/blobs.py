"""``knowledge blobs migrate``: move content-index's blobs from the filesystem to an object store.

It runs as content-index itself (its settings from the same ``KNOWLEDGE_*`` variables: the
database as its role, ``KNOWLEDGE_CONTENT_KEY`` or the key file, ``KNOWLEDGE_BLOB_ROOT`` as the
source) with ``KNOWLEDGE_BLOB_S3_*`` naming the target, and prints what it did. Without
``--switch`` it only copies and verifies (content-index may keep running); ``--switch``, with
content-index stopped, copies what is left and points every row at its object, then prints the
settings to start content-index with. Both are idempotent: an interrupted run is simply run
again. The steps and their guarantees: ``knowledge_content_index.migration``;
docs/operations.md, "Move the blobs to an object store".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict

from knowledge_cli.client import FAILED, OK

MAX_LISTED_FAILURES = 20


def _migrate(options: argparse.Namespace) -> int:
    from knowledge_content_index.bootstrap import open_migration
    from knowledge_content_index.config import ContentIndexSettings, ObjectStoreSettings
    from knowledge_runtime.logging import configure_logging
    from knowledge_runtime.settings import Env

    env = Env()
    settings = ContentIndexSettings.from_env(env)
    # The migration's own events (blob_not_migrated names each blob left behind) go to stderr as
    # JSON lines, as content-index logs them; stdout keeps the report.
    configure_logging("blobs-migrate", settings.common.log_level)
    target = settings.object_store or ObjectStoreSettings.from_env(env)

    async def run():
        async with open_migration(settings, target) as migration:
            return await (migration.switch() if options.switch else migration.copy())

    report = asyncio.run(run())
    if options.json:
        print(json.dumps({**asdict(report), "complete": report.complete}))
    else:
        print(
            f"{report.rows} blob(s) on the filesystem: {report.copied} copied ({report.copied_bytes} bytes), "
            f"{report.already_there} already in s3://{target.bucket}/{target.prefix}, {len(report.failed)} failed"
        )
    if not report.complete:
        listed = ", ".join(str(blob_id) for blob_id in report.failed[:MAX_LISTED_FAILURES])
        print(
            f"knowledge: not verified, left where they are: blob {listed}"
            + (" and more" if len(report.failed) > MAX_LISTED_FAILURES else "")
            + ("; nothing was switched" if options.switch and not report.switched else "")
            + " (each is logged above as blob_not_migrated, with why)",
            file=sys.stderr,
        )
        return FAILED
    if not options.json:
        if options.switch:
            print(f"switched {report.switched} blob(s); start content-index with:")
            for name, value in _settings(target).items():
                print(f"  {name}={value}")
        else:
            print("every blob is copied and verified; stop content-index and run `knowledge blobs migrate --switch`")
    return OK


def _settings(target) -> dict[str, str]:
    values = {"KNOWLEDGE_BLOB_STORE": "s3", "KNOWLEDGE_BLOB_S3_BUCKET": target.bucket}
    optional = {"PREFIX": target.prefix, "ENDPOINT": target.endpoint, "REGION": target.region}
    values |= {f"KNOWLEDGE_BLOB_S3_{name}": value for name, value in optional.items() if value}
    return values


def add_parser(commands) -> None:
    blobs = commands.add_parser("blobs", help="content-index's blob store: move the blobs to an object store")
    actions = blobs.add_subparsers(dest="blobs_command", required=True)
    migrate = actions.add_parser(
        "migrate",
        help="copy every blob from the filesystem (KNOWLEDGE_BLOB_ROOT) to the object store "
        "(KNOWLEDGE_BLOB_S3_*), verifying each hash; --switch then points them there",
        description="Copies every blob content-index holds on the filesystem to the same key in the object "
        "store, verifying each one's hash, and reports those it could not verify. Run it as often as you like "
        "while content-index runs. Then stop content-index and run it with --switch: it copies what is left and "
        "points every blob at its object (only when every blob verified), and prints the settings to start "
        "content-index with.",
    )
    migrate.add_argument(
        "--switch",
        action="store_true",
        help="after the copy, point every blob's row at its object (with content-index stopped)",
    )
    migrate.add_argument("--json", action="store_true", help="print the report as JSON")
    migrate.set_defaults(run=_migrate)
