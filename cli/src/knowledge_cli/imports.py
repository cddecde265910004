"""``knowledge import|imports|findings``: files from the operator's import roots, passes over
them, change findings and auto-indexing, through the REST API like the rest of the
client (``knowledge_cli.rest_command``)."""

from __future__ import annotations

import sys
from typing import TextIO

from knowledge_cli.client import EXIT_CODES, FAILED, OK, Client
from knowledge_cli.rest_command import common_options, print_json, rest_command
from knowledge_cli.uploads import follow


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    one = commands.add_parser(
        "import", help="ingest files under the operator's import roots and follow their jobs", epilog=epilog
    )
    one.add_argument("paths", nargs="+", metavar="PATH", help="absolute path of a file under an import root")
    one.add_argument("--corpus", required=True, help="target corpus id")
    one.add_argument("--no-wait", action="store_true", help="print the job ids and return at once")
    common_options(one)
    one.set_defaults(run=rest_command(_import))

    imports = commands.add_parser("imports", help="import roots, a corpus's bindings, passes", epilog=epilog)
    actions = imports.add_subparsers(dest="imports_command", required=True)
    roots = actions.add_parser("roots", help="the import roots open to the tenant", epilog=epilog)
    common_options(roots)
    roots.set_defaults(run=rest_command(_roots))
    bind = actions.add_parser(
        "bind", help="what passes over a root do for a corpus (needs imports.admin)", epilog=epilog
    )
    bind.add_argument("root")
    bind.add_argument("--corpus", required=True)
    bind.add_argument("--mode", required=True, choices=("auto", "suggest", "off"))
    common_options(bind)
    bind.set_defaults(run=rest_command(_bind))
    listing = actions.add_parser("list", help="a corpus's bindings", epilog=epilog)
    listing.add_argument("--corpus", required=True)
    common_options(listing)
    listing.set_defaults(run=rest_command(_bindings))
    scan = actions.add_parser("scan", help="a pass now over the corpus's bound roots", epilog=epilog)
    scan.add_argument("--corpus", required=True)
    common_options(scan)
    scan.set_defaults(run=rest_command(_scan))

    findings = commands.add_parser("findings", help="list, accept or dismiss change findings", epilog=epilog)
    verbs = findings.add_subparsers(dest="findings_command", required=True)
    shown = verbs.add_parser("list", help="a corpus's findings, oldest first", epilog=epilog)
    shown.add_argument("--corpus", required=True)
    shown.add_argument("--state", choices=("open", "accepted", "dismissed"), default="")
    common_options(shown)
    shown.set_defaults(run=rest_command(_findings))
    for verb, helptext in (("accept", "ingest the findings' files"), ("dismiss", "dismiss the findings (kept)")):
        action = verbs.add_parser(verb, help=helptext, epilog=epilog)
        action.add_argument("findings", nargs="+", metavar="FINDING_ID")
        common_options(action)
        action.set_defaults(run=rest_command(_accept if verb == "accept" else _dismiss))


def _import(client: Client, options, out: TextIO) -> int:
    items = client.import_paths(options.paths, options.corpus)
    if options.no_wait:
        if options.json:
            print_json(out, items)
        else:
            out.writelines(f"{item['job']['job_id']}\t{item['resolved_path']}\n" for item in items)
        return OK
    finals = follow(client, [i["job"]["job_id"] for i in items], [i["resolved_path"] for i in items], sys.stderr)
    if options.json:
        print_json(out, finals)
        return OK
    failed = 0
    for item, job in zip(items, finals):
        result = job.get("result") or {}
        if job["state"] == "DOCUMENT_STATE_SEARCHABLE":
            out.write(f"{result.get('document_id', '')}\t{result.get('chunk_count', 0)}\t{item['resolved_path']}\n")
        else:
            failed += 1
            print(f"knowledge: {item['resolved_path']}: {job.get('error') or job['stage']}", file=sys.stderr)
    return FAILED if failed else OK


def _roots(client: Client, options, out: TextIO) -> int:
    roots = client.import_roots()
    if options.json:
        print_json(out, roots)
    else:
        out.writelines(f"{root['name']}\t{root['path']}\n" for root in roots)
    return OK


def _binding_line(binding: dict) -> str:
    return f"{binding['root']}\t{binding['mode']}\t{binding.get('set_by', '')}\t{binding.get('last_scan_time', '-')}\n"


def _bind(client: Client, options, out: TextIO) -> int:
    binding = client.set_import_binding(options.corpus, options.root, options.mode)
    if options.json:
        print_json(out, binding)
    else:
        out.write(_binding_line(binding))
    return OK


def _bindings(client: Client, options, out: TextIO) -> int:
    bindings = client.import_bindings(options.corpus)
    if options.json:
        print_json(out, bindings)
        return OK
    out.write("root\tmode\tset_by\tlast_scan_time\n")
    out.writelines(_binding_line(b) for b in bindings)
    return OK


def _scan(client: Client, options, out: TextIO) -> int:
    report = client.scan_imports(options.corpus)
    if options.json:
        print_json(out, report)
    else:
        out.write(
            f"{report.get('roots', 0)} root(s), {report.get('files_seen', 0)} file(s) read, "
            f"{report.get('findings_recorded', 0)} finding(s) recorded, {report.get('jobs_started', 0)} job(s) "
            f"started, {report.get('errors', 0)} error(s)\n"
        )
    return OK


def _findings(client: Client, options, out: TextIO) -> int:
    found = list(client.findings(options.corpus, options.state))
    if options.json:
        print_json(out, found)
        return OK
    out.write("finding_id\tstate\tkind\troot\tpath\tjob_id\n")
    out.writelines(
        f"{f['finding_id']}\t{f['state']}\t{f['kind']}\t{f['root']}\t{f['path']}\t{f.get('job_id', '')}\n"
        for f in found
    )
    return OK


def _accept(client: Client, options, out: TextIO) -> int:
    answers = [client.accept_finding(finding_id) for finding_id in options.findings]
    if options.json:
        print_json(out, answers)
    else:
        out.writelines(f"{a['finding']['finding_id']}\taccepted\t{a['job']['job_id']}\n" for a in answers)
    return OK


def _dismiss(client: Client, options, out: TextIO) -> int:
    answers = [client.dismiss_finding(finding_id) for finding_id in options.findings]
    if options.json:
        print_json(out, answers)
    else:
        out.writelines(f"{a['finding_id']}\tdismissed\n" for a in answers)
    return OK
