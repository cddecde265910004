"""``knowledge webhooks create|list|get|pause|resume|types|delete|rotate|replay|deliveries``:
signed webhooks through the REST API (a ``webhooks.admin`` token).

``create`` and ``rotate`` print the signing secret: it is shown this once, keep it.
"""

from __future__ import annotations

from typing import TextIO

from knowledge_cli.client import EXIT_CODES, OK, Client
from knowledge_cli.rest_command import common_options, print_json, rest_command

STATE_PREFIX = "WEBHOOK_STATE_"


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    hooks = commands.add_parser("webhooks", help="push the tenant's events to signed HTTPS endpoints", epilog=epilog)
    verbs = hooks.add_subparsers(dest="webhooks_command", required=True)

    def verb(name: str, help_text: str, run, *, with_id: bool = True):
        parser = verbs.add_parser(name, help=help_text, epilog=epilog)
        if with_id:
            parser.add_argument("webhook_id")
        common_options(parser)
        parser.set_defaults(run=rest_command(run))
        return parser

    create = verb("create", "register an endpoint; prints its secret, shown only this once", _create, with_id=False)
    # Not "url": --url is the REST base URL of every command.
    create.add_argument(
        "endpoint", metavar="URL", help="https://... (plain http only for KNOWLEDGE_WEBHOOK_ALLOW_HOSTS)"
    )
    create.add_argument("--types", default="", help="event types, comma-separated (default: all)")
    create.add_argument("--description", default="")
    verb("list", "the webhooks of the token's scope node", _list, with_id=False)
    verb("get", "one webhook and where its delivery is", _get)
    verb("pause", "send nothing until resumed (its place is kept)", _pause)
    verb("resume", "deliver again (a disabled webhook too), from where it stopped", _resume)
    types = verb("types", "change the event types it is sent", _types)
    types.add_argument("types", help="event types, comma-separated")
    verb("delete", "delete it and its delivery attempts", _delete)
    rotate = verb("rotate", "a new secret; the old one still signs for the grace period", _rotate)
    rotate.add_argument("--grace-seconds", type=int, default=0, help="default a day, at most 7 days")
    replay = verb("replay", "send the events after a cursor again, in order", _replay)
    replay.add_argument("--after", default="", help="an event's cursor (default: the oldest event kept)")
    deliveries = verb("deliveries", "the latest delivery attempts, newest first", _deliveries)
    deliveries.add_argument("--limit", type=int, default=20)


def _split(types: str) -> list[str]:
    return [t.strip() for t in types.split(",") if t.strip()]


def _line(webhook: dict) -> str:
    state = str(webhook.get("state", "")).removeprefix(STATE_PREFIX).lower()
    types = ",".join(webhook.get("event_types", [])) or "*"
    disabled = f"\t{webhook['disabled_reason']}" if webhook.get("disabled_reason") else ""
    return f"{webhook.get('webhook_id', '')}\t{state}\t{webhook.get('cursor', '')}\t{types}\t{webhook.get('url', '')}{disabled}\n"


def _show(out: TextIO, options, answer: dict) -> int:
    if options.json:
        print_json(out, answer)
    else:
        out.write(_line(answer.get("webhook", answer)))
        if answer.get("secret"):
            out.write(f"secret\t{answer['secret']}\t(shown only now: keep it)\n")
    return OK


def _create(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.create_webhook(options.endpoint, _split(options.types), options.description))


def _list(client: Client, options, out: TextIO) -> int:
    webhooks = list(client.webhooks())
    if options.json:
        print_json(out, webhooks)
    else:
        out.write("id\tstate\tcursor\ttypes\turl\n")
        out.writelines(_line(w) for w in webhooks)
    return OK


def _get(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.webhook(options.webhook_id))


def _pause(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.update_webhook(options.webhook_id, {"state": STATE_PREFIX + "PAUSED"}))


def _resume(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.update_webhook(options.webhook_id, {"state": STATE_PREFIX + "ACTIVE"}))


def _types(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.update_webhook(options.webhook_id, {"event_types": _split(options.types)}))


def _delete(client: Client, options, out: TextIO) -> int:
    deleted = client.delete_webhook(options.webhook_id)
    if options.json:
        print_json(out, deleted)
    else:
        out.write(f"deleted webhook {deleted.get('webhook_id', options.webhook_id)}\n")
    return OK


def _rotate(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.rotate_webhook_secret(options.webhook_id, options.grace_seconds))


def _replay(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.replay_webhook(options.webhook_id, options.after))


def _deliveries(client: Client, options, out: TextIO) -> int:
    attempts = client.webhook_deliveries(options.webhook_id, options.limit)
    if options.json:
        print_json(out, attempts)
        return OK
    out.write("time\tcursor\ttype\tattempt\tstatus\tlatency_ms\terror\n")
    for a in attempts:
        status = a.get("status_code", 0) or "-"
        row = (a.get("attempt_time", ""), a.get("cursor", ""), a.get("type", ""), a.get("attempt", 0), status)
        out.write("\t".join(str(v) for v in row) + f"\t{a.get('latency_ms', 0)}\t{a.get('error', '')}\n")
    return OK
