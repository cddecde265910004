"""The OpenAPI 3 description of the REST API, generated from the protos.

Operations come from the ``google.api.http`` rules of the public services; schemas from their
messages, with the proto field names and the JSON the transcoder prints (int64 as strings,
enums as names, Timestamps as RFC 3339 strings, every non-optional scalar always present);
descriptions from the protos' comments. The description is committed as package data
(``openapi.json`` next to this module) and served by the gateway at
``/api/v1/knowledge/openapi.json``; a test fails when it drifts from the protos.

    python -m knowledge_gateway.openapi           # regenerate the committed file
    python -m knowledge_gateway.openapi --check   # exit 1 when it differs from the protos

Regenerating needs ``grpcio-tools`` (a development dependency) to read the protos' comments;
serving it needs nothing but the committed file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2
from knowledge_ingest.domain.formats import accepted_extensions, accepted_summary
from knowledge_runtime.refusals import Refusal, refusals_markdown

from knowledge_gateway.descriptors import public_service_descriptors, public_service_names
from knowledge_gateway.openapi_constraints import MESSAGE_CONSTRAINTS, NO_NUL, REQUEST_CONSTRAINTS, REQUIRED_INPUT

COMMITTED_NAME = "openapi.json"
REPO_ROOT = Path(__file__).resolve().parents[3]
# Compiled again, with comments; several public services may share a file.
PROTO_FILES = tuple(dict.fromkeys(service.file.name for service in public_service_descriptors()))

FD = descriptor_pb2.FieldDescriptorProto
_INTEGER32 = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32, FD.TYPE_UINT32, FD.TYPE_FIXED32}
_INTEGER64 = {FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64, FD.TYPE_UINT64, FD.TYPE_FIXED64}
_STATUS_REF = {"$ref": "#/components/schemas/google.rpc.Status"}
# Statuses every authenticated operation can answer, besides its own.
_COMMON_ERRORS = {
    "400": "The request is malformed (unknown field or query parameter, bad value).",
    "401": "No bearer token, or an expired, badly signed, wrong-issuer or wrong-audience one.",
    "403": "The token lacks the operation's capability (named in the message).",
    "429": "The tenant's request rate is over its limit; retry after `Retry-After` seconds.",
}


def openapi_text() -> str:
    """The committed description, as served by the gateway."""
    return resources.files("knowledge_gateway").joinpath(COMMITTED_NAME).read_text()


def committed_path() -> Path:
    return Path(__file__).with_name(COMMITTED_NAME)


def proto_descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The public protos compiled with their comments (source info) and imports."""
    import grpc_tools
    from grpc_tools import protoc

    include = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        args = [
            "grpc_tools.protoc",
            f"-I{REPO_ROOT / 'protos'}",
            f"-I{REPO_ROOT / 'third_party'}",
            f"-I{include}",
            "--include_imports",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            *PROTO_FILES,
        ]
        cwd = os.getcwd()
        os.chdir(REPO_ROOT / "protos")
        try:
            if protoc.main(args) != 0:
                raise RuntimeError("protoc failed on the public protos")
        finally:
            os.chdir(cwd)
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _clean(comment: str) -> str:
    return " ".join(line.strip() for line in comment.strip().splitlines()).strip()


class _Builder:
    def __init__(self, files: descriptor_pb2.FileDescriptorSet) -> None:
        self.messages: dict[str, descriptor_pb2.DescriptorProto] = {}
        self.enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}
        self.comments: dict[str, str] = {}  # full name (message, field "Msg.field", service, method) -> text
        self.services: dict[str, descriptor_pb2.ServiceDescriptorProto] = {}
        for file in files.file:
            self._index(file)
        self.schemas: dict[str, dict] = {}

    def _index(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        by_path = {
            tuple(loc.path): _clean(loc.leading_comments)
            for loc in file.source_code_info.location
            if loc.leading_comments
        }
        package = file.package

        def messages(items, prefix: str, path: tuple) -> None:
            for index, message in enumerate(items):
                name = f"{prefix}.{message.name}"
                self.messages[name] = message
                self.comments[name] = by_path.get(path + (index,), "")
                for number, field in enumerate(message.field):
                    self.comments[f"{name}.{field.name}"] = by_path.get(path + (index, 2, number), "")
                messages(message.nested_type, name, path + (index, 3))
                for enum in message.enum_type:
                    self.enums[f"{name}.{enum.name}"] = enum

        messages(file.message_type, package, (4,))
        for index, enum in enumerate(file.enum_type):
            self.enums[f"{package}.{enum.name}"] = enum
            self.comments[f"{package}.{enum.name}"] = by_path.get((5, index), "")
        for index, service in enumerate(file.service):
            name = f"{package}.{service.name}"
            self.services[name] = service
            self.comments[name] = by_path.get((6, index), "")
            for number, method in enumerate(service.method):
                self.comments[f"{name}.{method.name}"] = by_path.get((6, index, 2, number), "")

    # -- schemas -------------------------------------------------------------------------------
    def field_schema(self, field: descriptor_pb2.FieldDescriptorProto, *, response: bool) -> dict:
        entry = self.messages.get(field.type_name.lstrip(".")) if field.type == FD.TYPE_MESSAGE else None
        if entry is not None and entry.options.map_entry:
            # proto3 JSON prints a map as an object of its values (never the entries' array).
            value = next(f for f in entry.field if f.name == "value")
            return {"type": "object", "additionalProperties": self.field_schema(value, response=response)}
        if field.type == FD.TYPE_MESSAGE or field.type == FD.TYPE_ENUM:
            schema = self.ref(field.type_name.lstrip("."), response=response)
        elif field.type in _INTEGER32:
            schema = {
                "type": "integer",
                "format": "int32" if field.type not in {FD.TYPE_UINT32, FD.TYPE_FIXED32} else "uint32",
            }
            if field.type in {FD.TYPE_UINT32, FD.TYPE_FIXED32}:
                schema["minimum"] = 0
            else:
                schema.update(minimum=-(2**31), maximum=2**31 - 1)
        elif field.type in _INTEGER64:
            # proto3 JSON prints 64-bit integers as decimal strings.
            schema = {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"}
        elif field.type in {FD.TYPE_DOUBLE, FD.TYPE_FLOAT}:
            schema = {"type": "number", "format": "double" if field.type == FD.TYPE_DOUBLE else "float"}
        elif field.type == FD.TYPE_BOOL:
            schema = {"type": "boolean"}
        elif field.type == FD.TYPE_BYTES:
            schema = {"type": "string", "format": "byte"}
        else:
            schema = {"type": "string"} if response else {"type": "string", "pattern": NO_NUL}
        if field.label == FD.LABEL_REPEATED:
            schema = {"type": "array", "items": schema}
        return schema

    @staticmethod
    def constrained(key: str, schema: dict) -> dict:
        extra = REQUEST_CONSTRAINTS.get(key)
        if extra and "$ref" in schema:  # OpenAPI 3.0 ignores a $ref's siblings
            return {"allOf": [schema], **extra}
        return {**schema, **extra} if extra else schema

    def ref(self, full_name: str, *, response: bool) -> dict:
        if full_name == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        if full_name == "google.protobuf.Struct":  # any JSON object (metadata: its limits are in the comments)
            return {"type": "object", "additionalProperties": True}
        if full_name == "google.protobuf.FieldMask":  # proto3 JSON: the paths joined by commas
            return {"type": "string", "pattern": "^[a-z_*,]*$"}
        if full_name in self.enums:
            enum = self.enums[full_name]
            self.schemas.setdefault(
                full_name,
                {
                    "type": "string",
                    "enum": [value.name for value in enum.value],
                    "description": self.comments.get(full_name, ""),
                },
            )
            return {"$ref": f"#/components/schemas/{full_name}"}
        name = full_name if response else f"{full_name}.Input"
        if name not in self.schemas:
            self.schemas[name] = {}  # a placeholder against recursion
            self.schemas[name] = self.message_schema(full_name, response=response)
        return {"$ref": f"#/components/schemas/{name}"}

    def message_schema(self, full_name: str, *, response: bool, skip: frozenset[str] = frozenset()) -> dict:
        message = self.messages[full_name]
        properties: dict[str, dict] = {}
        required: list[str] = []
        for field in message.field:
            if field.name in skip:
                continue
            schema = self.field_schema(field, response=response)
            if not response:
                schema = self.constrained(f"{full_name}.{field.name}", schema)
            description = self.comments.get(f"{full_name}.{field.name}", "")
            if description and "$ref" not in schema:
                schema["description"] = description
            properties[field.name] = schema
            # The transcoder prints every non-optional scalar, enum and list (always_print_primitive_fields).
            if (
                response
                and not field.proto3_optional
                and field.type != FD.TYPE_MESSAGE
                or response
                and field.label == FD.LABEL_REPEATED
            ):
                required.append(field.name)
        message_schema: dict = {"type": "object", "properties": properties, "additionalProperties": False}
        if not response and full_name in MESSAGE_CONSTRAINTS:
            message_schema.update(MESSAGE_CONSTRAINTS[full_name])
        if not response:
            required = [name for name in REQUIRED_INPUT.get(full_name, []) if name in properties]
        if required:
            message_schema["required"] = required
        if self.comments.get(full_name):
            message_schema["description"] = self.comments[full_name]
        return message_schema

    # -- operations ------------------------------------------------------------------------------
    def operation(
        self, service: str, method: descriptor_pb2.MethodDescriptorProto, rule: http_pb2.HttpRule, verb: str, path: str
    ) -> dict:
        request = method.input_type.lstrip(".")
        response = method.output_type.lstrip(".")
        path_params = [part.split("}")[0] for part in path.split("{")[1:]]
        message = self.messages[request]
        fields = {f.name: f for f in message.field}
        parameters = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": self.constrained(f"{request}.{name}", {"type": "string", "minLength": 1}),
                "description": self.comments.get(f"{request}.{name}", ""),
            }
            for name in path_params
        ]
        operation: dict = {
            "operationId": method.name,
            "tags": [service.rsplit(".", 1)[-1]],
            "summary": self.comments.get(f"{service}.{method.name}", "").split(". ")[0].rstrip(".") + ".",
            "description": self.comments.get(f"{service}.{method.name}", ""),
        }
        errors = dict(_COMMON_ERRORS)
        if path_params or method.name in {"UploadDocument", "MoveDocuments", "IngestText"}:
            errors["404"] = "The resource is not the caller tenant's, or does not exist."
        if method.name == "CreateCorpus":
            errors["409"] = "The tenant already has a corpus with this name."
        if rule.body == "http_body":
            for name in (n for n in fields if n != "http_body"):
                parameters.append(
                    {
                        "name": name,
                        "in": "query",
                        "required": False,
                        "schema": self.field_schema(fields[name], response=False),
                        "description": self.comments.get(f"{request}.{name}", ""),
                    }
                )
            operation["requestBody"] = {
                "required": True,
                "description": "The file: the raw bytes (with ?corpus_id=&filename=) or a browser's multipart form "
                "(parts corpus_id, then file), with a Content-Length or chunked. A body over the upload cap "
                "is 413: refused from its Content-Length before a byte is read, or cut off while it "
                "streams (no document, no job). Accepted formats, known by their bytes (a name or type "
                f"only confirms): {accepted_summary()} ({' '.join(accepted_extensions())}); any other "
                "file ends its job FAILED with UNSUPPORTED_FORMAT.",
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                # Any text (a part is text); unused when ?corpus_id= is given.
                                "corpus_id": {
                                    "description": "A part before the file, or the ?corpus_id= query "
                                    "parameter (which wins when both are given)."
                                },
                                "file": {"type": "string", "format": "binary"},
                            },
                            "required": ["file"],
                        }
                    },
                },
            }
            errors["413"] = "The body is larger than the upload cap."
        elif rule.body == "*":
            body = self.message_schema(request, response=False, skip=frozenset(path_params))
            name = f"{request}.Body" if path_params else f"{request}.Input"
            self.schemas[name] = body
            operation["requestBody"] = {
                "required": bool(body["properties"]),
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
            }
            errors["413"] = "The body is larger than the upload cap."
        elif rule.body:  # one field is the body: its message, as that message's JSON
            inner = fields[rule.body].type_name.lstrip(".")
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": self.ref(inner, response=False)}},
            }
            errors["413"] = "The body is larger than the upload cap."
        else:
            for name, field in fields.items():
                if name in path_params or field.type == FD.TYPE_MESSAGE:
                    continue
                parameters.append(
                    {
                        "name": name,
                        "in": "query",
                        "required": name in REQUIRED_INPUT.get(request, ()),
                        "schema": self.constrained(f"{request}.{name}", self.field_schema(field, response=False)),
                        "description": self.comments.get(f"{request}.{name}", ""),
                    }
                )
        if parameters:
            operation["parameters"] = parameters
        if method.server_streaming:  # transcoded with stream_newline_delimited: one message per line
            responses = {
                "200": {
                    "description": "A stream, sent as it comes: one JSON object per line (newline-delimited JSON), "
                    "until the client goes away or the server ends it.",
                    "content": {"application/x-ndjson": {"schema": self.ref(response, response=True)}},
                }
            }
        else:
            responses = {
                "200": {
                    "description": "OK",
                    "content": {"application/json": {"schema": self.ref(response, response=True)}},
                }
            }
        for status in sorted(errors):
            responses[status] = {
                "description": errors[status],
                "content": {"application/json": {"schema": _STATUS_REF}},
            }
        responses["default"] = {
            "description": "Any other error, as a google.rpc.Status.",
            "content": {"application/json": {"schema": _STATUS_REF}},
        }
        if "429" in responses:
            responses["429"]["headers"] = {
                "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}
            }
        operation["responses"] = responses
        return operation

    def document(self) -> dict:
        paths: dict[str, dict] = {}
        for service_name in public_service_names():
            for method in self.services[service_name].method:
                if not method.options.HasExtension(annotations_pb2.http):
                    continue  # gRPC only
                rule = method.options.Extensions[annotations_pb2.http]
                verb = rule.WhichOneof("pattern")
                path = getattr(rule, verb)
                paths.setdefault(path, {})[verb] = self.operation(service_name, method, rule, verb, path)
        self.schemas["google.rpc.Status"] = {
            "type": "object",
            "description": "An error: the gRPC status code, a message, and one google.rpc.ErrorInfo.",
            "properties": {
                "code": {"type": "integer", "description": "google.rpc.Code"},
                "message": {"type": "string"},
                "details": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "@type": {"type": "string"},
                            "reason": {
                                "type": "string",
                                "description": "UPPER_SNAKE, a name of knowledge.v1.ErrorReason without its "
                                "prefix (docs/api.md, Errors: each with its code, status and metadata keys); "
                                "for a refusal one of the closed set: " + ", ".join(r.value for r in Refusal),
                            },
                            "domain": {"type": "string"},
                            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                        "required": ["@type"],
                    },
                },
            },
            "required": ["code", "message"],
        }
        return {
            "openapi": "3.0.3",
            "info": {
                "title": "Knowledge service REST API",
                "version": "v1",
                "description": "Corpora, uploads with durable ingestion jobs, hybrid search and cited answers, per "
                "tenant. Every call carries a bearer JWT whose `tenant` and `capabilities` claims "
                "decide what it sees and may do; a resource of another tenant answers 404. Generated "
                "from protos/knowledge/v1 (google.api.http rules); JSON uses the proto field names.\n\n"
                "A request may be refused (well formed, but not done now for this caller) for one reason of "
                "a closed set, knowledge.v1.RefusalReason, carried in the error's ErrorInfo.reason:\n\n"
                + refusals_markdown(),
            },
            "servers": [{"url": "/"}],
            "security": [{"bearer": []}],
            "paths": dict(sorted(paths.items())),
            "components": {
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
                "schemas": dict(sorted(self.schemas.items())),
            },
        }


def generate() -> str:
    return json.dumps(_Builder(proto_descriptor_set()).document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knowledge_gateway.openapi", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    options = parser.parse_args(argv)
    fresh = generate()
    if options.check:
        if committed_path().read_text() != fresh:
            print(
                f"{committed_path()} differs from the protos; run python -m knowledge_gateway.openapi", file=sys.stderr
            )
            return 1
        return 0
    committed_path().write_text(fresh)
    print(committed_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
