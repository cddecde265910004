"""``knowledge types|classify|extract|process``: the document-AI service through the
REST API like the rest of the client (``knowledge_cli.rest_command``)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import TextIO

from knowledge_cli.client import EXIT_CODES, OK, USAGE, ApiError, Client
from knowledge_cli.rest_command import common_options, print_json, rest_command


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    types = commands.add_parser("types", help="the tenant's document types and their schemas", epilog=epilog)
    actions = types.add_subparsers(dest="types_command", required=True)
    listing = actions.add_parser("list", help="the document types by name", epilog=epilog)
    listing.add_argument("--all", action="store_true", help="retired types too")
    common_options(listing)
    listing.set_defaults(run=rest_command(_types_list))
    add = actions.add_parser("add", help="add a document type (needs taxonomy.edit)", epilog=epilog)
    add.add_argument("name", help="lowercase letters, digits and '_' (e.g. invoice)")
    add.add_argument("--description", required=True)
    add.add_argument("--example", action="append", default=[], help="an example text (repeatable)")
    add.add_argument("--reason", default="", help="why it is added (kept as provenance)")
    common_options(add)
    add.set_defaults(run=rest_command(_types_add))
    for verb, helptext in (("retire", "take a type out of classification"), ("restore", "put a retired type back")):
        action = actions.add_parser(verb, help=helptext, epilog=epilog)
        action.add_argument("name")
        common_options(action)
        action.set_defaults(run=rest_command(partial(_types_set_retired, retired=verb == "retire")))
    schema = actions.add_parser("schema", help="add a schema version to a type from a JSON Schema file", epilog=epilog)
    schema.add_argument("name")
    schema.add_argument("file", type=Path, help="a JSON Schema of an object; every property has a description")
    common_options(schema)
    schema.set_defaults(run=rest_command(_types_schema))
    schemas = actions.add_parser("schemas", help="every schema version of a type, newest first", epilog=epilog)
    schemas.add_argument("name")
    common_options(schemas)
    schemas.set_defaults(run=rest_command(_types_schemas))

    classify = commands.add_parser("classify", help="the type of a document, with its evidence", epilog=epilog)
    classify.add_argument("document")
    common_options(classify)
    classify.set_defaults(run=rest_command(_classify))

    extract = commands.add_parser(
        "extract", help="a document's tables, or a type's schema fields with evidence (--schema)", epilog=epilog
    )
    extract.add_argument("document")
    extract.add_argument("--schema", default="", help="the type whose schema to fill (needs an LLM)")
    extract.add_argument("--version", type=int, default=0, help="the schema version (default: the newest)")
    common_options(extract)
    extract.set_defaults(run=rest_command(_extract))

    process = commands.add_parser(
        "process", help="classify, grow the taxonomy, extract and store the result", epilog=epilog
    )
    process.add_argument("document")
    process.add_argument("--results", action="store_true", help="list the document's stored results instead")
    common_options(process)
    process.set_defaults(run=rest_command(_process))


def _emit(out: TextIO, options, value: dict, text: str) -> None:
    """``value`` as JSON with ``--json``, else ``text`` for a person."""
    if options.json:
        print_json(out, value)
    else:
        out.write(text)


def _type_line(kind: dict) -> str:
    flags = " (retired)" if kind.get("retired") else ""
    return (
        f"{kind['name']}\t{kind.get('origin', '')}\tschema v{kind.get('schema_version', 0)}\t"
        f"{kind['description']}{flags}\n"
    )


def _types_list(client: Client, options, out: TextIO) -> int:
    kinds = list(client.document_types(include_retired=options.all))
    if options.json:
        print_json(out, kinds)
    else:
        out.writelines(_type_line(k) for k in kinds)
    return OK


def _types_add(client: Client, options, out: TextIO) -> int:
    kind = client.create_document_type(options.name, options.description, options.example, options.reason)
    _emit(out, options, kind, _type_line(kind))
    return OK


def _types_set_retired(client: Client, options, out: TextIO, *, retired: bool) -> int:
    kind = client.set_document_type_retired(options.name, retired)
    _emit(out, options, kind, _type_line(kind))
    return OK


def _types_schema(client: Client, options, out: TextIO) -> int:
    try:
        text = options.file.read_text(encoding="utf-8")
    except OSError as error:
        raise ApiError(f"{options.file}: {error.strerror}", USAGE) from None
    schema = client.create_extraction_schema(options.name, text)
    _emit(out, options, schema, f"{schema['type_name']}\tv{schema['version']}\n")
    return OK


def _types_schemas(client: Client, options, out: TextIO) -> int:
    schemas = client.extraction_schemas(options.name)
    if options.json:
        print_json(out, schemas)
        return OK
    for schema in schemas:
        fields = ", ".join(json.loads(schema["json_schema"]).get("properties", {}))
        out.write(f"v{schema['version']}\t{schema.get('origin', '')}\t{fields}\n")
    return OK


def _classify(client: Client, options, out: TextIO) -> int:
    reply = client.classify_document(options.document)
    _emit(out, options, reply, reply["card"]["markdown"] + "\n")
    return OK


def _extract(client: Client, options, out: TextIO) -> int:
    reply = client.extract_document(options.document, options.schema, options.version)
    _emit(out, options, reply, reply["card"]["markdown"] + "\n")
    return OK


def _process(client: Client, options, out: TextIO) -> int:
    if options.results:
        results = client.processing_results(options.document)
        if options.json:
            print_json(out, results)
        else:
            out.writelines(_result_line(r) for r in results)
        return OK
    reply = client.process_document(options.document)
    if options.json:
        print_json(out, reply)
        return OK
    out.write(_result_line(reply["result"]))
    for field in reply["result"].get("fields", []):
        evidence = field["evidence"]
        out.write(f'  {field["name"]} = {field["value_json"]}\t(chunk {evidence["chunk_id"]}: "{evidence["quote"]}")\n')
    out.writelines(f"  {dropped['name']} dropped: {dropped['why']}\n" for dropped in reply["result"].get("dropped", []))
    out.writelines(f"  note: {note}\n" for note in reply["result"].get("notes", []))
    return OK


def _result_line(result: dict) -> str:
    proposed = " (proposed)" if result.get("proposed_type") else ""
    return (
        f"{result['result_id']}\t{result['type_name']}{proposed}\t{result.get('confidence', 0):.0%}\t"
        f"schema v{result.get('schema_version', 0)}\t{len(result.get('fields', []))} field(s)\n"
    )
