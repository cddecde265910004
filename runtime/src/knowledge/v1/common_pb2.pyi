from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RefusalReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REFUSAL_REASON_UNSPECIFIED: _ClassVar[RefusalReason]
    REFUSAL_REASON_FEATURE_DISABLED: _ClassVar[RefusalReason]
    REFUSAL_REASON_QUOTA_EXHAUSTED: _ClassVar[RefusalReason]
    REFUSAL_REASON_BUDGET_EXHAUSTED: _ClassVar[RefusalReason]
    REFUSAL_REASON_CAPABILITY_MISSING: _ClassVar[RefusalReason]
    REFUSAL_REASON_SCOPE_UNRESOLVED: _ClassVar[RefusalReason]
    REFUSAL_REASON_INDEXING: _ClassVar[RefusalReason]
    REFUSAL_REASON_APPROVAL_REQUIRED: _ClassVar[RefusalReason]
    REFUSAL_REASON_RUNTIME_UNAVAILABLE: _ClassVar[RefusalReason]
    REFUSAL_REASON_PLAN_REQUIRED: _ClassVar[RefusalReason]
REFUSAL_REASON_UNSPECIFIED: RefusalReason
REFUSAL_REASON_FEATURE_DISABLED: RefusalReason
REFUSAL_REASON_QUOTA_EXHAUSTED: RefusalReason
REFUSAL_REASON_BUDGET_EXHAUSTED: RefusalReason
REFUSAL_REASON_CAPABILITY_MISSING: RefusalReason
REFUSAL_REASON_SCOPE_UNRESOLVED: RefusalReason
REFUSAL_REASON_INDEXING: RefusalReason
REFUSAL_REASON_APPROVAL_REQUIRED: RefusalReason
REFUSAL_REASON_RUNTIME_UNAVAILABLE: RefusalReason
REFUSAL_REASON_PLAN_REQUIRED: RefusalReason

class Vector(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ("amount", "currency", "input_tokens", "output_tokens", "items")
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    amount: float
    currency: str
    input_tokens: int
    output_tokens: int
    items: _containers.RepeatedCompositeFieldContainer[CostItem]
    def __init__(self, amount: _Optional[float] = ..., currency: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., items: _Optional[_Iterable[_Union[CostItem, _Mapping]]] = ...) -> None: ...

class CostItem(_message.Message):
    __slots__ = ("model_id", "operation", "texts", "input_tokens", "output_tokens", "amount")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    operation: str
    texts: int
    input_tokens: int
    output_tokens: int
    amount: float
    def __init__(self, model_id: _Optional[str] = ..., operation: _Optional[str] = ..., texts: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., amount: _Optional[float] = ...) -> None: ...
