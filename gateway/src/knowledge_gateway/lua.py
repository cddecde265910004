"""The Lua filter's source: the package's ``lua/*.lua`` files with their values filled in.

``lua/json_fields.lua`` checks a JSON body's field names against the request message (the
tables of fields are generated here from the descriptors); ``lua/entry_points.lua`` is Envoy's
``envoy_on_request`` and ``envoy_on_response``. A file marks each value the Python side gives
it as ``@NAME@``.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from google.api import annotations_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from knowledge_gateway.config import (
    LOG_NAMESPACE,
    ORIGINAL_HEADERS,
    REPLY_NAMESPACE,
    TENANT_HEADER,
    UNROUTED_HEADER,
    GatewayConfig,
)
from knowledge_gateway.descriptors import http_rules
from knowledge_gateway.local_replies import too_large_json, too_large_message

# Ingest's reason for an upload that crossed the cap while streaming (RESOURCE_EXHAUSTED, so 429).
UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE"
MAX_ERROR_BODY_BYTES = 64 * 1024  # the most of a 429 answer the Lua filter reads to find that reason
# A value the Python side fills into the Lua files (@NAME@: not Lua syntax, so never a clash).
_LUA_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


def lua_source(config: GatewayConfig) -> str:
    """Before anything else: drop client-sent internal headers, and refuse a body over the cap by
    its Content-Length before reading it, then check a JSON body's field names.

    The field check (``lua/json_fields.lua``): the transcoder drops a JSON key it does not know
    (proto3 JSON parsing) and has no option to refuse one, so a misspelt field (`corpus` for
    `corpus_id`) would be ignored without a word. It walks the body once, skipping strings with
    string.find, and answers 400 UNKNOWN_FIELD naming the first unknown field in its ``field``
    (INVALID_REQUEST for a null, which proto3 JSON reads as "absent"), as a service names an
    unknown field of a gRPC request. A body it cannot read as JSON is left to the transcoder,
    which refuses it.

    On the way back (``lua/entry_points.lua``), as the last filter to see the response: ingest's
    answer to a streamed upload that crossed the cap (see knowledge_gateway.filters), which the
    transcoder made a 429 JSON status, becomes the same 413 a sized upload gets. It is recognised
    by status 429 and the ErrorInfo reason UPLOAD_TOO_LARGE, so a rate limit's 429 stays one; only
    a small JSON 429 is ever read.
    """
    fields = lua_file("json_fields.lua", SCHEMAS=_body_schemas_lua() + "\n" + _stream_routes_lua())
    entry_points = lua_file(
        "entry_points.lua",
        TENANT_HEADER=TENANT_HEADER,
        UNROUTED_HEADER=UNROUTED_HEADER,
        ORIGINAL_PATH_HEADER=ORIGINAL_HEADERS[0],
        ORIGINAL_METHOD_HEADER=ORIGINAL_HEADERS[1],
        LOG_NAMESPACE=LOG_NAMESPACE,
        REPLY_NAMESPACE=REPLY_NAMESPACE,
        MAX_BODY_BYTES=config.max_body_bytes,
        TOO_LARGE_MESSAGE=too_large_message(config.max_body_bytes),
        MAX_ERROR_BODY_BYTES=MAX_ERROR_BODY_BYTES,
        UPLOAD_TOO_LARGE=UPLOAD_TOO_LARGE,
        TOO_LARGE_JSON=too_large_json(config.max_body_bytes),
    )
    return "".join("\n" + chunk for chunk in (fields, entry_points))  # each chunk after a blank line


def lua_file(name: str, **values: object) -> str:
    """A Lua file of this package with each ``@NAME@`` filled in: every one given, none left over."""
    text = (resources.files("knowledge_gateway") / "lua" / name).read_text()
    wanted = set(_LUA_PLACEHOLDER.findall(text))
    if wanted != set(values):
        raise ValueError(f"lua/{name}: placeholders {sorted(wanted)}, values for {sorted(values)}")
    return _LUA_PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), text)


# Calls whose empty body the transcoder would read as an empty list, which clears an access list
# (a document open to every reader of its corpus): the list is said, never implied.
BODY_REQUIRED = frozenset({"knowledge.v1.SetDocumentAccessRequest", "knowledge.v1.SetCorpusDefaultAccessRequest"})


def _json_body_routes() -> list[tuple[str, str, Descriptor]]:
    """(method, Lua pattern of the path, the body's message) of every REST call with a JSON body:
    the request (``body: "*"``) or the message of the one field that is the body."""
    routes = []
    for method, verb, template in http_rules():
        body = method.GetOptions().Extensions[annotations_pb2.http].body
        field = method.input_type.fields_by_name.get(body) if body and body != "*" else None
        message = method.input_type if body == "*" else (field.message_type if field is not None else None)
        if message is None or message.full_name.startswith("google."):  # none, or an upload's HttpBody
            continue
        routes.append((verb.upper(), _lua_pattern(template), message))
    return routes


def _lua_pattern(template: str) -> str:
    """A path template (``/corpora/{corpus_id}``) as an anchored Lua pattern."""
    pattern = "".join(
        "[^/]+" if part.startswith("{") else re.sub(r"(\W)", r"%\1", part)
        for part in re.split(r"(\{[^}]+\})", template)
    )
    return f"^{pattern}$"


def _stream_routes_lua() -> str:
    """(method, pattern) of every REST call that answers a stream: its 200 is newline-delimited
    JSON, which the transcoder labels application/json; the response says what it is."""
    return "\n".join(
        f"stream_routes[#stream_routes + 1] = {{{json.dumps(verb.upper())}, {json.dumps(_lua_pattern(template))}}}"
        for method, verb, template in http_rules()
        if method.server_streaming
    )


# A map value of these types must be a JSON number (64-bit integers may also be JSON strings).
NUMBER_TYPES = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_DOUBLE,
        FieldDescriptor.CPPTYPE_FLOAT,
    }
)


def _body_schemas_lua() -> str:
    """The fields each request message takes, as Lua tables: ``true`` for a value whose inside is
    not checked (a scalar, an enum, a map, a well-known type), another message's table for a
    message. Both spellings the transcoder accepts (proto name and lowerCamel JSON name). Repeated
    fields are listed too: the transcoder reads a lone value as a one-item list, which the
    description (and every other client) says is an array."""
    messages: dict[str, Descriptor] = {}

    def visit(message: Descriptor) -> None:
        if message.full_name in messages or message.full_name.startswith("google."):
            return
        messages[message.full_name] = message
        for member in message.fields:
            if member.message_type is not None and not member.message_type.GetOptions().map_entry:
                visit(member.message_type)

    for _, _, message in _json_body_routes():
        visit(message)
    lines = [f"schemas[{json.dumps(name)}] = {{}}" for name in sorted(messages)]
    for name in sorted(messages):
        for member in messages[name].fields:
            nested = member.message_type
            value = (
                f"schemas[{json.dumps(nested.full_name)}]"
                if nested is not None and nested.full_name in messages
                else "true"
            )
            mapped = nested is not None and nested.GetOptions().map_entry
            listed = member.is_repeated and not mapped
            numbers = nested is not None and mapped and nested.fields_by_name["value"].cpp_type in NUMBER_TYPES
            table = f"schemas[{json.dumps(name)}]"
            flags = [registry for registry, on in (("number_maps", numbers), ("lists", listed)) if on]
            for spelling in sorted({member.name, member.json_name}):
                lines.append(f"{table}[{json.dumps(spelling)}] = {value}")
                for registry in flags:  # a field's kind, looked up by its message's table
                    lines.append(
                        f"{registry}[{table}] = {registry}[{table}] or {{}}; "
                        f"{registry}[{table}][{json.dumps(spelling)}] = true"
                    )
    for verb, pattern, message in _json_body_routes():
        needs_body = "true" if message.full_name in BODY_REQUIRED else "false"
        lines.append(
            f"json_routes[#json_routes + 1] = {{{json.dumps(verb)}, {json.dumps(pattern)}, "
            f"schemas[{json.dumps(message.full_name)}], {needs_body}}}"
        )
    return "\n".join(lines)
