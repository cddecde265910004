"""Envoy's own answers (401, 404, 405, 413, 429, 431, 5xx) as ``google.rpc.Status`` JSON.

The services answer errors as a ``google.rpc.Status`` with one ``ErrorInfo``; the local reply
mappers make every answer Envoy gives itself look the same, except to a gRPC caller through
the gateway, which gets its status with a plain message.
"""

from __future__ import annotations

import json

from knowledge_runtime.errors import upload_too_large_message

from knowledge_gateway.config import MAX_REQUEST_HEADERS_KB, ORIGINAL_HEADERS, GatewayConfig
from knowledge_gateway.routes import path_regex, rest_methods

RATE_LIMITED_MESSAGE = "the tenant's request rate is over its limit; retry after 1 second"
HEADERS_TOO_LARGE_MESSAGE = (
    f"request headers too large: the URL, the bearer token and the other headers "
    f"must fit in {MAX_REQUEST_HEADERS_KB} KiB together"
)

# google.rpc.Code of each HTTP status Envoy itself answers with, and the ErrorInfo reason.
_LOCAL_REPLIES = {
    400: (3, "INVALID_REQUEST"),
    401: (16, "UNAUTHENTICATED"),
    404: (12, "METHOD_NOT_FOUND"),
    405: (12, "METHOD_NOT_ALLOWED"),
    408: (4, "REQUEST_TIMEOUT"),
    413: (8, "UPLOAD_TOO_LARGE"),
    429: (8, "RATE_LIMITED"),
    431: (3, "HEADERS_TOO_LARGE"),
    500: (13, "INTERNAL"),
    502: (14, "UPSTREAM_UNAVAILABLE"),
    503: (14, "UPSTREAM_UNAVAILABLE"),
    504: (4, "UPSTREAM_TIMEOUT"),
}


def _status_json(code: int, reason: str, message: str, metadata: dict[str, str] | None = None) -> dict:
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "knowledge.v1"}
    return {"code": code, "message": message, "details": [{**info, **({"metadata": metadata} if metadata else {})}]}


def local_reply_config(config: GatewayConfig) -> dict:
    """Envoy's own answers (401 from jwt_authn, 429, 413, no route...) as google.rpc.Status JSON.
    Every 413 (Lua's from the Content-Length, the body limit's while streaming) says the same."""
    messages = {
        429: RATE_LIMITED_MESSAGE,
        431: HEADERS_TOO_LARGE_MESSAGE,
    }
    # A gRPC caller's own request; a transcoded REST one has the gRPC content type too once the
    # transcoder has seen it, and the original path the transcoder keeps (see knowledge_gateway.lua).
    grpc_request = {
        "and_filter": {
            "filters": [
                {"header_filter": {"header": {"name": "content-type", "string_match": {"prefix": "application/grpc"}}}},
                {
                    "header_filter": {
                        "header": {"name": ORIGINAL_HEADERS[0], "present_match": True, "invert_match": True}
                    }
                },
            ]
        }
    }
    mappers = [
        {
            # A gRPC caller through the gateway gets its status with a plain message, not JSON.
            "filter": {
                "and_filter": {
                    "filters": [
                        *grpc_request["and_filter"]["filters"],
                        {
                            "status_code_filter": {
                                "comparison": {
                                    "op": "EQ",
                                    "value": {"default_value": 429, "runtime_key": "knowledge.local_reply.grpc_429"},
                                }
                            }
                        },
                    ]
                }
            },
            "body_format_override": {"text_format": RATE_LIMITED_MESSAGE},
        },
        {
            "filter": grpc_request,
            "body_format_override": {"text_format": "%LOCAL_REPLY_BODY%"},
        },
        {
            # The catch-all route's missing cluster ("NC"): a path the API does not have.
            "filter": {"response_flag_filter": {"flags": ["NC"]}},
            "status_code": 404,
            "body_format_override": {
                "json_format": _status_json(12, "METHOD_NOT_FOUND", "no such REST resource"),
                "content_type": "application/json",
            },
        },
        {
            # Envoy answers 403 itself only from jwt_authn (a token for another audience): a token
            # this API does not accept is 401. The services' own 403s are upstream answers, untouched.
            "filter": {
                "status_code_filter": {
                    "comparison": {
                        "op": "EQ",
                        "value": {"default_value": 403, "runtime_key": "knowledge.local_reply.403"},
                    }
                }
            },
            "status_code": 401,
            "body_format_override": {
                "json_format": _status_json(16, "UNAUTHENTICATED", "%LOCAL_REPLY_BODY%"),
                "content_type": "application/json",
            },
        },
        *_query_method_mappers(),
    ]
    for status, (code, reason) in _LOCAL_REPLIES.items():
        mappers.append(
            {
                "filter": {
                    "status_code_filter": {
                        "comparison": {
                            "op": "EQ",
                            "value": {"default_value": status, "runtime_key": f"knowledge.local_reply.{status}"},
                        }
                    }
                },
                "body_format_override": {
                    "json_format": too_large_status(config.max_body_bytes)
                    if status == 413
                    else _status_json(code, reason, messages.get(status, "%LOCAL_REPLY_BODY%")),
                    "content_type": "application/json",
                },
            }
        )
    return {"mappers": mappers}


def _query_method_mappers() -> list[dict]:
    """405 with ``Allow`` for QUERY on a REST path, as for any other method it lacks. Envoy refuses
    a QUERY request without a Content-Type (400) before routing, so the 405 route never sees it:
    that local reply is rewritten here instead."""
    mappers = []
    for template, methods in sorted(rest_methods().items()):
        allowed = ", ".join(sorted(set(methods)))
        code, reason = _LOCAL_REPLIES[405]
        mappers.append(
            {
                "filter": {
                    "and_filter": {
                        "filters": [
                            {
                                "status_code_filter": {
                                    "comparison": {
                                        "op": "EQ",
                                        "value": {
                                            "default_value": 400,
                                            "runtime_key": "knowledge.local_reply.query_400",
                                        },
                                    }
                                }
                            },
                            {"header_filter": {"header": {"name": ":method", "string_match": {"exact": "QUERY"}}}},
                            {
                                "header_filter": {
                                    "header": {
                                        "name": ":path",
                                        "string_match": {"safe_regex": {"regex": path_regex(template) + r"(\?.*)?"}},
                                    }
                                }
                            },
                        ]
                    }
                },
                "status_code": 405,
                "headers_to_add": [
                    {"header": {"key": "allow", "value": allowed}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
                ],
                "body_format_override": {
                    "json_format": _status_json(code, reason, f"{template} allows {allowed}"),
                    "content_type": "application/json",
                },
            }
        )
    return mappers


def too_large_message(max_body_bytes: int) -> str:
    """What ingest says of an upload over the cap, said of any body over it."""
    return upload_too_large_message(max_body_bytes)


def too_large_status(max_body_bytes: int) -> dict:
    """Every 413's google.rpc.Status: ingest's UPLOAD_TOO_LARGE, its message and max_bytes."""
    code, reason = _LOCAL_REPLIES[413]
    return _status_json(code, reason, too_large_message(max_body_bytes), {"max_bytes": str(max_body_bytes)})


def too_large_json(max_body_bytes: int) -> str:
    """The body of every 413, as the 413 local-reply mapper writes it."""
    return json.dumps(too_large_status(max_body_bytes), separators=(",", ":"))
