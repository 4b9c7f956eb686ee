"""Typed input items: a Kinesis record, an SQS message, a DynamoDB-streams record.

Small immutable objects over the event's own dicts (``raw``): what costs something (the
base64 decoding of a Kinesis record's data, the deserialization of a DynamoDB image) is
done at the first read of the attribute and kept. The field names are those of the event
(``docs/lambda.md`` has the table); the values are what Powertools' data classes
(``aws_lambda_powertools.utilities.data_classes``) give for the same event.

DynamoDB images (``keys``, ``new_image``, ``old_image``) are deserialized with boto3's
``boto3.dynamodb.types.TypeDeserializer`` (numbers as ``Decimal``, sets as ``set``,
binary, base64 in the event, as ``boto3.dynamodb.types.Binary``), which every Lambda
Python runtime ships. Where boto3 is not installed (a container image), reading an image
raises an ``ImportError`` that says so; the images as the event has them stay readable
(``raw_keys``, ``raw_new_image``, ``raw_old_image``). The package does not depend on boto3.
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Mapping
from typing import Any, ClassVar

from ._batch import item_id, source_of

__all__ = ["DynamoDBRecord", "KinesisRecord", "Record", "SqsMessage", "typed"]

_UNSET: Any = object()


class _Typed:
    """What the three share: ``raw`` (the event's dict), ``item`` (its itemIdentifier), and
    no attribute set after construction but the lazy caches."""

    __slots__ = ("item", "raw")
    source: ClassVar[str] = ""
    item: str
    raw: Mapping[str, Any]

    def __init__(self, raw: Mapping[str, Any]) -> None:
        object.__setattr__(self, "raw", raw)
        object.__setattr__(self, "item", item_id(raw, self.source))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(item={self.item!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Typed) and type(other) is type(self) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.item))

    def _cached(self, slot: str) -> Any:
        return getattr(self, slot, _UNSET)

    def _keep(self, slot: str, value: Any) -> Any:
        object.__setattr__(self, slot, value)
        return value

    @property
    def event_source_arn(self) -> str | None:
        """``eventSourceARN``: the stream's or the queue's ARN."""
        found = self.raw.get("eventSourceARN")
        return None if found is None else str(found)


class KinesisRecord(_Typed):
    """A record of a Kinesis event (``eventSource`` ``aws:kinesis``)."""

    __slots__ = ("_data",)
    source: ClassVar[str] = "kinesis"

    @property
    def _kinesis(self) -> Mapping[str, Any]:
        found: Mapping[str, Any] = self.raw["kinesis"]
        return found

    @property
    def data(self) -> bytes:
        """The record's data, base64-decoded (once, at the first read)."""
        found = self._cached("_data")
        if found is _UNSET:
            found = self._keep("_data", base64.b64decode(self._kinesis["data"]))
        return bytes(found)

    @property
    def sequence_number(self) -> str:
        """``kinesis.sequenceNumber`` (the itemIdentifier)."""
        return str(self._kinesis["sequenceNumber"])

    @property
    def partition_key(self) -> str:
        """``kinesis.partitionKey``."""
        return str(self._kinesis["partitionKey"])

    @property
    def arrival_time(self) -> float | None:
        """``kinesis.approximateArrivalTimestamp``: seconds since the epoch."""
        found = self._kinesis.get("approximateArrivalTimestamp")
        return None if found is None else float(found)

    @property
    def event_id(self) -> str | None:
        """``eventID``: ``shardId-...:sequenceNumber``."""
        found = self.raw.get("eventID")
        return None if found is None else str(found)

    @property
    def shard_id(self) -> str | None:
        """The shard the record was read from (the part of ``eventID`` before ``:``)."""
        event_id = self.event_id
        return None if not event_id or ":" not in event_id else event_id.split(":", 1)[0]


class SqsMessage(_Typed):
    """A message of an SQS event (``eventSource`` ``aws:sqs``)."""

    __slots__ = ()
    source: ClassVar[str] = "sqs"

    @property
    def message_id(self) -> str:
        """``messageId`` (the itemIdentifier)."""
        return str(self.raw["messageId"])

    @property
    def body(self) -> str:
        """``body``, as SQS delivers it (text)."""
        return str(self.raw["body"])

    @property
    def receipt_handle(self) -> str | None:
        found = self.raw.get("receiptHandle")
        return None if found is None else str(found)

    @property
    def attributes(self) -> Mapping[str, str]:
        """``attributes``: the system attributes (``ApproximateReceiveCount``,
        ``SentTimestamp``, ``MessageGroupId``, ...), their values strings as SQS sends them."""
        found: Mapping[str, str] = self.raw.get("attributes") or {}
        return found

    @property
    def message_attributes(self) -> Mapping[str, Mapping[str, Any]]:
        """``messageAttributes``: each the event's own dict (``stringValue``,
        ``binaryValue``, ``dataType``, ...)."""
        found: Mapping[str, Mapping[str, Any]] = self.raw.get("messageAttributes") or {}
        return found

    @property
    def group_id(self) -> str | None:
        """FIFO queues: ``attributes.MessageGroupId`` (None for a standard queue)."""
        return self.attributes.get("MessageGroupId")

    @property
    def deduplication_id(self) -> str | None:
        """FIFO queues: ``attributes.MessageDeduplicationId``."""
        return self.attributes.get("MessageDeduplicationId")


class DynamoDBRecord(_Typed):
    """A record of a DynamoDB-streams event (``eventSource`` ``aws:dynamodb``)."""

    __slots__ = ("_keys", "_new", "_old")
    source: ClassVar[str] = "dynamodb"

    @property
    def _dynamodb(self) -> Mapping[str, Any]:
        found: Mapping[str, Any] = self.raw["dynamodb"]
        return found

    @property
    def sequence_number(self) -> str:
        """``dynamodb.SequenceNumber`` (the itemIdentifier)."""
        return str(self._dynamodb["SequenceNumber"])

    @property
    def event_name(self) -> str | None:
        """``eventName``: ``INSERT``, ``MODIFY`` or ``REMOVE``."""
        found = self.raw.get("eventName")
        return None if found is None else str(found)

    @property
    def event_id(self) -> str | None:
        found = self.raw.get("eventID")
        return None if found is None else str(found)

    @property
    def stream_view_type(self) -> str | None:
        found = self._dynamodb.get("StreamViewType")
        return None if found is None else str(found)

    @property
    def arrival_time(self) -> float | None:
        """``dynamodb.ApproximateCreationDateTime``: seconds since the epoch."""
        found = self._dynamodb.get("ApproximateCreationDateTime")
        return None if found is None else float(found)

    @property
    def size_bytes(self) -> int | None:
        found = self._dynamodb.get("SizeBytes")
        return None if found is None else int(found)

    @property
    def raw_keys(self) -> Mapping[str, Any] | None:
        """``dynamodb.Keys`` as the event has it (``{"Id": {"N": "101"}}``)."""
        found: Mapping[str, Any] | None = self._dynamodb.get("Keys")
        return found

    @property
    def raw_new_image(self) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = self._dynamodb.get("NewImage")
        return found

    @property
    def raw_old_image(self) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = self._dynamodb.get("OldImage")
        return found

    @property
    def keys(self) -> dict[str, Any] | None:
        """``dynamodb.Keys`` deserialized (``{"Id": Decimal("101")}``); needs boto3."""
        return self._image("_keys", self.raw_keys)

    @property
    def new_image(self) -> dict[str, Any] | None:
        """``dynamodb.NewImage`` deserialized (None where the stream view has none)."""
        return self._image("_new", self.raw_new_image)

    @property
    def old_image(self) -> dict[str, Any] | None:
        """``dynamodb.OldImage`` deserialized (None where the stream view has none)."""
        return self._image("_old", self.raw_old_image)

    def _image(self, slot: str, raw: Mapping[str, Any] | None) -> dict[str, Any] | None:
        found = self._cached(slot)
        if found is _UNSET:
            if raw is None:
                found = None
            else:
                load = _deserializer().deserialize
                found = {name: load(_wire(value)) for name, value in raw.items()}
            self._keep(slot, found)
        return None if found is None else dict(found)


#: a typed input item of any of the three sources
Record = KinesisRecord | SqsMessage | DynamoDBRecord
_CLASSES: dict[str, type[Record]] = {
    "kinesis": KinesisRecord,
    "sqs": SqsMessage,
    "dynamodb": DynamoDBRecord,
}
_TYPES: dict[str, Any] = {}


def _deserializer() -> Any:
    """boto3's TypeDeserializer, imported at the first image read."""
    found = _TYPES.get("deserializer")
    if found is None:
        try:
            types = importlib.import_module("boto3.dynamodb.types")
        except ImportError as exc:
            raise ImportError(
                "reading a DynamoDB image (keys, new_image, old_image) needs boto3's "
                "boto3.dynamodb.types.TypeDeserializer, which every Lambda Python runtime "
                "ships and this environment lacks (a container image?): install boto3 "
                "(pip install boto3), or read raw_keys / raw_new_image / raw_old_image"
            ) from exc
        found = _TYPES["deserializer"] = types.TypeDeserializer()
    return found


def _wire(value: Any) -> Any:
    """An attribute value as boto3's deserializer takes it: in the event, JSON, a binary
    (``B``, ``BS``) is base64 text; on the wire botocore hands boto3 bytes."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return value
    (kind, inner), *_ = value.items()
    if kind == "B" and isinstance(inner, str):
        return {"B": base64.b64decode(inner)}
    if kind == "BS":
        return {"BS": [base64.b64decode(v) if isinstance(v, str) else v for v in inner]}
    if kind == "L":
        return {"L": [_wire(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _wire(v) for k, v in inner.items()}}
    return value


def typed(record: Mapping[str, Any], source: str | None = None) -> Record:
    """The typed item of one record of a Kinesis, SQS or DynamoDB-streams event
    (``source``: ``"kinesis"``, ``"sqs"`` or ``"dynamodb"``; read from its ``eventSource``
    if not given)."""
    if source is None:
        source = source_of({"Records": [record]})
    cls = _CLASSES.get(source)
    if cls is None:
        raise ValueError(f"no typed record for source {source!r}")
    return cls(record)
