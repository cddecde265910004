"""Envoy's own answers (a token refused, a path or method the API lacks, a body over the cap, the
rate limit, its headers, its upstreams' absence or time) as the services answer: a
``google.rpc.Status`` with one ``ErrorInfo`` whose reason is the catalogue's
(``knowledge_runtime.reasons``), the same reason and metadata a service gives for the same failure.

A REST caller gets the status as JSON with its HTTP status; a gRPC caller through the gateway gets
the code in ``grpc-status`` and the status itself in ``grpc-status-details-bin``, as from a
service. Each answer is one entry of :func:`_answers`: when Envoy gives it (an access-log filter),
its reason, message and metadata; the local reply mappers are generated from them, every gRPC
caller's first (the first mapper that matches is the one used).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from knowledge_runtime.auth import TOKEN_EXPIRED_MESSAGE, TOKEN_INVALID_MESSAGE, TOKEN_MISSING_MESSAGE
from knowledge_runtime.errors import ERROR_DOMAIN, upload_too_large_message
from knowledge_runtime.reasons import REASONS

from knowledge_gateway.config import (
    JWT_FAILURE_KEY,
    JWT_FILTER,
    MAX_REQUEST_HEADERS_KB,
    ORIGINAL_HEADERS,
    REPLY_NAMESPACE,
    GatewayConfig,
)
from knowledge_gateway.routes import path_regex, rest_methods

RATE_LIMITED_MESSAGE = "the tenant's request rate is over its limit; retry after 1 second"
HEADERS_TOO_LARGE_MESSAGE = (
    f"request headers too large: the URL, the bearer token and the other headers "
    f"must fit in {MAX_REQUEST_HEADERS_KB} KiB together"
)
NO_SUCH_METHOD_MESSAGE = "the API has no such method or path"
# jwt_authn's failure codes (jwt_verify_lib's Status) that the services tell apart; every other
# one is an invalid token.
JWT_MISSING, JWT_EXPIRED = 1, 3
# The reason and google.rpc.Code of each HTTP status Envoy answers with itself, where no more
# specific answer below applies.
_BY_STATUS = {
    400: "INVALID_REQUEST",
    404: "METHOD_NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "REQUEST_TIMEOUT",
    413: "UPLOAD_TOO_LARGE",
    429: "RATE_LIMITED",
    431: "HEADERS_TOO_LARGE",
    500: "INTERNAL",
    502: "UPSTREAM_UNAVAILABLE",
    503: "UPSTREAM_UNAVAILABLE",
    504: "UPSTREAM_TIMEOUT",
}


@dataclass(frozen=True)
class _Answer:
    when: dict  # an access-log filter: which of Envoy's local replies this answer is
    reason: str
    message: str  # may hold Envoy's command operators (%LOCAL_REPLY_BODY%)
    metadata: Mapping[str, str] = field(default_factory=dict)  # values may too (REST only)
    status: int | None = None  # the HTTP status a REST caller gets instead of Envoy's
    grpc: bool = True  # also answered to a gRPC caller (static metadata only)
    headers: tuple[tuple[str, str], ...] = ()  # added to a REST caller's answer


def _code(reason: str) -> int:
    return code_pb2.Code.Value(REASONS[reason].code)


def _status_json(reason: str, message: str, metadata: Mapping[str, str] | None = None) -> dict:
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": ERROR_DOMAIN}
    detail = {**info, **({"metadata": dict(metadata)} if metadata else {})}
    return {"code": _code(reason), "message": message, "details": [detail]}


def status_details_bin(reason: str, message: str, metadata: Mapping[str, str] | None = None) -> str:
    """``grpc-status-details-bin`` as a service sends it: the google.rpc.Status, base64 unpadded."""
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=dict(metadata or {})))
    status = status_pb2.Status(code=_code(reason), message=message, details=[detail])
    return base64.b64encode(status.SerializeToString()).decode().rstrip("=")


def _status_is(status: int, key: str) -> dict:
    comparison = {"op": "EQ", "value": {"default_value": status, "runtime_key": f"knowledge.local_reply.{key}"}}
    return {"status_code_filter": {"comparison": comparison}}


def _jwt_failure(code: int | None) -> dict:
    """jwt_authn refused the token (with ``code``; None: for any reason)."""
    value = {"present_match": True} if code is None else {"double_match": {"exact": code}}
    matcher = {"filter": JWT_FILTER, "path": [{"key": JWT_FAILURE_KEY}, {"key": "code"}], "value": value}
    return {"metadata_filter": {"matcher": matcher, "match_if_key_not_found": False}}


def _lua_refused(reason: str) -> dict:
    """The Lua filter refused the request body with ``reason`` (see knowledge_gateway.lua)."""
    matcher = {"filter": REPLY_NAMESPACE, "path": [{"key": "reason"}], "value": {"string_match": {"exact": reason}}}
    return {"metadata_filter": {"matcher": matcher, "match_if_key_not_found": False}}  # else it matches every reply


def _and(*filters: dict) -> dict:
    return {"and_filter": {"filters": list(filters)}}


def _answers(config: GatewayConfig) -> list[_Answer]:
    """Most specific first."""
    lua_field = {"field": f"%DYNAMIC_METADATA({REPLY_NAMESPACE}:field)%"}
    answers = [
        _Answer(_jwt_failure(JWT_MISSING), "TOKEN_MISSING", TOKEN_MISSING_MESSAGE, status=401),
        _Answer(_jwt_failure(JWT_EXPIRED), "TOKEN_EXPIRED", TOKEN_EXPIRED_MESSAGE, status=401),
        # A token for another audience is a 403 from jwt_authn: a token this API does not accept, 401.
        _Answer(_jwt_failure(None), "TOKEN_INVALID", f"{TOKEN_INVALID_MESSAGE} (%LOCAL_REPLY_BODY%)", status=401),
        # The catch-all route's missing cluster ("NC"): a path the API does not have.
        _Answer({"response_flag_filter": {"flags": ["NC"]}}, "METHOD_NOT_FOUND", NO_SUCH_METHOD_MESSAGE, status=404),
        _Answer(_lua_refused("UNKNOWN_FIELD"), "UNKNOWN_FIELD", "%LOCAL_REPLY_BODY%", lua_field, grpc=False),
        _Answer(_lua_refused("INVALID_REQUEST"), "INVALID_REQUEST", "%LOCAL_REPLY_BODY%", lua_field, grpc=False),
        *_query_method_answers(),
    ]
    messages = {429: RATE_LIMITED_MESSAGE, 431: HEADERS_TOO_LARGE_MESSAGE, 404: NO_SUCH_METHOD_MESSAGE}
    for status, reason in _BY_STATUS.items():
        message, metadata = messages.get(status, "%LOCAL_REPLY_BODY%"), {}
        if status == 413:  # every 413, whichever filter answered: ingest's own refusal of an upload
            message, metadata = too_large_message(config.max_body_bytes), {"max_bytes": str(config.max_body_bytes)}
        answers.append(_Answer(_status_is(status, str(status)), reason, message, metadata))
    return answers


def local_reply_config(config: GatewayConfig) -> dict:
    """The local reply mappers: each answer to a gRPC caller, then each to a REST caller, then a
    gRPC caller's plain status for any other local reply."""
    # A gRPC caller's own request; a transcoded REST one has the gRPC content type too once the
    # transcoder has seen it, and the original path the transcoder keeps (see knowledge_gateway.lua).
    grpc_request: list[dict] = [
        {"header_filter": {"header": {"name": "content-type", "string_match": {"prefix": "application/grpc"}}}},
        {"header_filter": {"header": {"name": ORIGINAL_HEADERS[0], "present_match": True, "invert_match": True}}},
    ]
    answers = _answers(config)
    mappers = [
        {
            "filter": _and(*grpc_request, answer.when),
            "headers_to_add": [
                _header("grpc-status", str(_code(answer.reason))),
                _header("grpc-status-details-bin", status_details_bin(answer.reason, _plain(answer), answer.metadata)),
            ],
            "body_format_override": {"text_format": answer.message},
        }
        for answer in answers
        if answer.grpc
    ]
    mappers.append({"filter": _and(*grpc_request), "body_format_override": {"text_format": "%LOCAL_REPLY_BODY%"}})
    for answer in answers:
        mapper: dict = {
            "filter": answer.when,
            "body_format_override": {
                "json_format": _status_json(answer.reason, answer.message, answer.metadata),
                "content_type": "application/json",
            },
        }
        if answer.status is not None:
            mapper["status_code"] = answer.status
        if answer.headers:
            mapper["headers_to_add"] = [_header(key, value) for key, value in answer.headers]
        mappers.append(mapper)
    return {"mappers": mappers}


def _plain(answer: _Answer) -> str:
    """The message in a gRPC caller's details: what it says without Envoy's operators (a header
    value is not formatted)."""
    return answer.message.replace(" (%LOCAL_REPLY_BODY%)", "").replace("%LOCAL_REPLY_BODY%", answer.reason)


def _header(key: str, value: str) -> dict:
    return {"header": {"key": key, "value": value}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}


def _query_method_answers() -> list[_Answer]:
    """405 with ``Allow`` for QUERY on a REST path, as for any other method it lacks. Envoy refuses
    a QUERY request without a Content-Type (400) before routing, so the 405 route never sees it:
    that local reply is rewritten here instead."""
    answers = []
    for template, methods in sorted(rest_methods().items()):
        allowed = ", ".join(sorted(set(methods)))
        path = {"name": ":path", "string_match": {"safe_regex": {"regex": path_regex(template) + r"(\?.*)?"}}}
        when = _and(
            _status_is(400, "query_400"),
            {"header_filter": {"header": {"name": ":method", "string_match": {"exact": "QUERY"}}}},
            {"header_filter": {"header": path}},
        )
        message = f"{template} allows {allowed}"
        answers.append(
            _Answer(when, "METHOD_NOT_ALLOWED", message, status=405, grpc=False, headers=(("allow", allowed),))
        )
    return answers


def too_large_message(max_body_bytes: int) -> str:
    """What ingest says of an upload over the cap, said of any body over it."""
    return upload_too_large_message(max_body_bytes)


def too_large_status(max_body_bytes: int) -> dict:
    """Every 413's google.rpc.Status: ingest's UPLOAD_TOO_LARGE, its message and max_bytes."""
    return _status_json("UPLOAD_TOO_LARGE", too_large_message(max_body_bytes), {"max_bytes": str(max_body_bytes)})


def too_large_json(max_body_bytes: int) -> str:
    """The body of every 413, as the 413 local-reply mapper writes it."""
    return json.dumps(too_large_status(max_body_bytes), separators=(",", ":"))
