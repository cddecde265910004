"""``knowledge up | migrate | dev-token | mcp | eval | gc | blobs | corpora | upload | search | query | text | delete | passages | access``.

Exit codes: 0 success, 1 failure at run time, 2 bad configuration or arguments; the REST
client's commands add 3 not found, 4 auth, 5 conflict, 6 too large, 7 rate limited,
8 unreachable (knowledge_cli.client.EXIT_CODES).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from knowledge_runtime.auth import ADMIN_CAPABILITIES, ALL_CAPABILITIES, INTERNAL_CAPABILITIES, PUBLIC_CAPABILITIES
from knowledge_runtime.reach import GROUP_PREFIX, AccessListInvalid, ScopePath, access_list, parse_band
from knowledge_runtime.settings import SettingsError
from knowledge_runtime.system_corpora import PLATFORM_CAPABILITIES

if TYPE_CHECKING:
    from knowledge_cli.stack_settings import StackSettings


def up_settings(options: argparse.Namespace) -> StackSettings:
    """The stack's settings from the environment, ``--llm`` over ``KNOWLEDGE_LOCAL_LLM_MODEL``."""
    import dataclasses
    from pathlib import Path

    from knowledge_cli.stack_settings import StackSettings

    settings = StackSettings.from_env()
    if options.llm:
        settings = dataclasses.replace(settings, local_llm_model=Path(options.llm).expanduser().resolve())
    return settings


def _up(options: argparse.Namespace) -> int:
    from knowledge_cli.up import run_up

    return asyncio.run(run_up(up_settings(options)))


def _migrate(options: argparse.Namespace) -> int:
    from knowledge_runtime.db.migrate import MigrationError, migrate

    from knowledge_cli.stack_settings import StackSettings

    settings = StackSettings.from_env()
    dimension = settings.embedding_dimension()
    embedded = None
    if settings.database_url:
        url = settings.database_url
    else:
        from knowledge_runtime.db.embedded import start_embedded

        embedded = start_embedded(settings.data_dir)
        url = embedded.url()
    try:
        applied = asyncio.run(migrate(url, embedding_dimension=dimension))
    except MigrationError as error:
        print(f"knowledge: migration failed: {error}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()
    print("knowledge: applied " + (", ".join(applied) if applied else "nothing (up to date)"))
    return 0


def _dev_token(options: argparse.Namespace) -> int:
    from knowledge_cli.devtoken import mint_local_token

    capabilities = None
    base = ALL_CAPABILITIES if options.internal else PUBLIC_CAPABILITIES + ADMIN_CAPABILITIES
    known = tuple(dict.fromkeys(base + PLATFORM_CAPABILITIES))
    if options.capabilities is not None:
        capabilities = [c.strip() for c in options.capabilities.split(",") if c.strip()]
        unknown = sorted(set(capabilities) - set(known))
        if unknown:
            hint = " (internal ones need --internal)" if set(unknown) & set(INTERNAL_CAPABILITIES) else ""
            print(
                f"knowledge: unknown capabilities: {', '.join(unknown)}{hint} (known: {', '.join(known)})",
                file=sys.stderr,
            )
            return 2
    try:
        ScopePath.parse(options.scope)
        clearance = parse_band(options.clearance.upper()).value if options.clearance else None
        groups = None if options.groups is None else _groups(options.groups)
    except (ValueError, AccessListInvalid) as error:
        print(f"knowledge: {error}", file=sys.stderr)
        return 2
    try:
        token = mint_local_token(
            options.tenant,
            capabilities=capabilities,
            ttl_s=options.ttl,
            service="dev" if options.internal else None,
            subject=options.subject,
            scope=options.scope,
            clearance=clearance,
            groups=groups,
        )
    except FileNotFoundError as error:
        print(f"knowledge: {error}", file=sys.stderr)
        return 1
    print(token)
    return 0


def _groups(text: str) -> list[str]:
    """--groups as the claim carries it: the names, comma-separated, each checked as the
    principal group:<name> an access list would hold."""
    names = [g.strip() for g in text.split(",") if g.strip()]
    access_list([f"{GROUP_PREFIX}{g}" for g in names], "--groups")
    return names


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="knowledge", description="The knowledge service.")
    commands = root.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run the whole stack locally until Ctrl-C / SIGTERM")
    up.add_argument(
        "--llm",
        metavar="MODEL.gguf",
        help="also run a local OpenAI-compatible LLM server (llama.cpp) with this GGUF model, and answer "
        "with it (default: KNOWLEDGE_LOCAL_LLM_MODEL; `make local-llm` assembles one)",
    )
    up.set_defaults(run=_up)
    mig = commands.add_parser("migrate", help="apply the database migrations")
    mig.set_defaults(run=_migrate)
    token = commands.add_parser("dev-token", help="print a JWT signed with the local development key")
    token.add_argument("--tenant", required=True, help="the tenant claim")
    token.add_argument(
        "--capabilities",
        help="comma-separated; the public capabilities when omitted; system.write and platform.admin "
        "(the platform's: housekeeping and platform-wide corpora, tenants' settings) only when named",
    )
    token.add_argument("--subject", default="dev", help="the sub claim: the user pre-fetch suggests for (default dev)")
    token.add_argument(
        "--internal",
        action="store_true",
        help="a service token (subject service:dev) that may carry the internal capabilities "
        "(blob.*, embed), all of them when --capabilities is omitted; for calling "
        "content-index or the embedder directly",
    )
    token.add_argument("--ttl", type=int, default=3600, help="seconds until the token expires (default 3600)")
    token.add_argument(
        "--scope",
        default="/",
        help="the scope node the token reads from: '/' (the tenant root, the default), 'workspace:X', "
        "'workspace:X/project:Y' or 'workspace:X/project:Y/mission:Z'; it reads the corpora bound to that "
        "node and its ancestors. A token without one reads nothing",
    )
    token.add_argument(
        "--clearance",
        help="the highest confidentiality band the token reads: GENERAL, TENANT (the default when "
        "omitted), CONFIDENTIAL or RESTRICTED",
    )
    token.add_argument(
        "--groups",
        help="comma-separated group names, the token's groups claim (e.g. hr,finance): it reads the "
        "documents whose access list names group:<name> for one of them, or user:<subject>, or is empty",
    )
    token.set_defaults(run=_dev_token)
    from knowledge_cli.evaluate import add_parser as add_eval

    add_eval(commands)
    from knowledge_cli.gc import add_parser as add_gc

    add_gc(commands)
    from knowledge_cli.blobs import add_parser as add_blobs

    add_blobs(commands)  # blobs migrate
    from knowledge_cli.rest import add_parsers as add_rest

    add_rest(commands)  # corpora, upload, search, query, text, delete: the REST API's client
    from knowledge_cli.imports import add_parsers as add_imports

    add_imports(commands)  # import, imports, findings
    from knowledge_cli.docai import add_parsers as add_docai

    add_docai(commands)  # types, classify, extract, process
    from knowledge_cli.passages import add_parsers as add_passages

    add_passages(commands)  # passages index, remove, check
    from knowledge_cli.access import add_parsers as add_access

    add_access(commands)  # access show, set, default
    from knowledge_cli.mcp import add_parser as add_mcp

    add_mcp(commands)  # the tools over MCP on stdio
    from knowledge_cli.webhooks import add_parsers as add_webhooks

    add_webhooks(commands)  # webhooks create, list, get, pause, resume, types, delete, rotate, replay, deliveries
    from knowledge_cli.models import add_parsers as add_models

    add_models(commands)  # models change, status, swap, rollback, cancel
    return root


def main(argv: list[str] | None = None) -> None:
    options = parser().parse_args(argv)
    try:
        code = options.run(options)
    except SettingsError as error:
        print(f"knowledge: configuration error: {error}", file=sys.stderr)
        code = 2
    sys.exit(code)
