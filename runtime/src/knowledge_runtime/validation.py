"""What every request message must be before any service reads it; the one check of both rules.

- No field the service does not know. A caller's misspelt or newer field arrives as an unknown
  field, which protobuf keeps and the service would silently ignore (a misspelt ``corpus_id``
  would search the whole tenant): INVALID_ARGUMENT, reason ``UNKNOWN_FIELD``, naming its number.
- No NUL (0x00) in any string field, at any depth. PostgreSQL's text cannot hold it, and no name,
  query, URL or document text needs it: INVALID_ARGUMENT, reason ``NUL_CHARACTER``, naming the
  field's path (``filters.corpus_id``, ``document_ids[2]``). Bytes fields are not text and may
  hold anything.

The server runs this on every ``knowledge.v1`` request message (``RequestValidationInterceptor``),
so use cases never see either.
"""

from __future__ import annotations

from google.protobuf import unknown_fields
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from knowledge_runtime.errors import InvalidArgument


class UnknownField(InvalidArgument):
    reason = "UNKNOWN_FIELD"

    def __init__(self, path: str, number: int) -> None:
        where = f"{path}." if path else ""
        super().__init__(
            f"the request carries a field this service does not know ({where}#{number}); check its name",
            metadata={"field": f"{where}#{number}"},
        )


class NulCharacter(InvalidArgument):
    reason = "NUL_CHARACTER"

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} must not contain a NUL (0x00) character", metadata={"field": path[:200]})


def check_request(message: Message) -> None:
    """Raise :class:`UnknownField` or :class:`NulCharacter` for the first offending field."""
    _check(message, "")


def _check(message: Message, path: str) -> None:
    for unknown in unknown_fields.UnknownFieldSet(message):  # type: ignore[attr-defined]  # iterable; the stub says not
        raise UnknownField(path, unknown.field_number)
    for field, value in message.ListFields():
        name = f"{path}.{field.name}" if path else field.name
        if field.type == FieldDescriptor.TYPE_STRING:
            if not field.is_repeated:
                if "\x00" in value:
                    raise NulCharacter(name)
                continue
            for index, text in enumerate(value):
                if "\x00" in text:
                    raise NulCharacter(f"{name}[{index}]")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            assert field.message_type is not None  # a message field has its type
            if field.message_type.GetOptions().map_entry:
                _check_map(field, value, name)
            elif field.is_repeated:
                for index, item in enumerate(value):
                    _check(item, f"{name}[{index}]")
            else:
                _check(value, name)


def _check_map(field: FieldDescriptor, mapping, name: str) -> None:
    assert field.message_type is not None  # a map field is a message field
    value_field = field.message_type.fields_by_name["value"]
    for key, value in mapping.items():
        if isinstance(key, str) and "\x00" in key:
            raise NulCharacter(f"{name} (a key)")
        if value_field.type == FieldDescriptor.TYPE_MESSAGE:
            _check(value, f"{name}[{key!r}]")
        elif isinstance(value, str) and "\x00" in value:
            raise NulCharacter(f"{name}[{key!r}]")
