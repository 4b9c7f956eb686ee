"""What auto-registration sends when it creates a schema, as the Java serde's settings do:
the schema's name (given, or made by a :class:`SchemaNaming` from the stream and the record
type), its compatibility, description and tags; each checked when given, against botocore's
Glue model (``glue/2017-03-31/service-2.json``), so a bad one fails at once, not at the
first put.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass

from .._errors import SchemaError

__all__ = [
    "BY_RECORD_TYPE",
    "BY_STREAM",
    "BY_STREAM_AND_RECORD_TYPE",
    "COMPATIBILITIES",
    "SchemaNaming",
    "check_compatibility",
    "check_description",
    "check_schema_name",
    "check_tags",
]

#: ``Compatibility``: ``"enum": ["NONE", "DISABLED", "BACKWARD", "BACKWARD_ALL", "FORWARD",
#: "FORWARD_ALL", "FULL", "FULL_ALL"]``
COMPATIBILITIES = frozenset(
    ("NONE", "DISABLED", "BACKWARD", "BACKWARD_ALL", "FORWARD", "FORWARD_ALL", "FULL", "FULL_ALL")
)
#: ``SchemaRegistryNameString``: ``"max": 255, "min": 1, "pattern": "[a-zA-Z0-9-_$#.]+"``
_NAME = re.compile(r"[a-zA-Z0-9\-_$#.]+")
_NAME_MAX = 255
#: ``DescriptionString``: ``"max": 2048``, its pattern: XML's characters (no control
#: characters but tab, CR and LF)
_DESCRIPTION_MAX = 2048
_DESCRIPTION = re.compile("[\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff\r\n\t]*")
#: ``TagsMap``: ``"max": 50``; ``TagKey``: ``"max": 128, "min": 1``; ``TagValue``: ``"max": 256``
_TAGS_MAX = 50
_TAG_KEY_MAX = 128
_TAG_VALUE_MAX = 256


def check_schema_name(name: object) -> str:
    """A schema name Glue takes, or :class:`SchemaError` saying why not."""
    if not isinstance(name, str) or not name:
        raise SchemaError(f"a schema name must be a non-empty str, got {name!r}")
    if len(name) > _NAME_MAX or not _NAME.fullmatch(name):
        raise SchemaError(
            f"schema name {name!r}: at most {_NAME_MAX} of the characters a-z A-Z 0-9 - _ $ # ."
        )
    return name


def check_compatibility(value: object) -> str:
    if value not in COMPATIBILITIES:
        raise SchemaError(
            f"compatibility {value!r} is not one of Glue's: {', '.join(sorted(COMPATIBILITIES))}"
        )
    return str(value)


def check_description(value: object) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"a schema description must be a str, got {type(value).__name__}")
    if len(value) > _DESCRIPTION_MAX:
        raise SchemaError(f"a schema description is at most {_DESCRIPTION_MAX} characters")
    if not _DESCRIPTION.fullmatch(value):
        raise SchemaError("a schema description may not hold control characters (but \\t \\r \\n)")
    return value


def check_tags(tags: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(tags, Mapping):
        raise SchemaError(f"schema tags must be a mapping of str to str, got {type(tags).__name__}")
    if len(tags) > _TAGS_MAX:
        raise SchemaError(f"a schema has at most {_TAGS_MAX} tags, got {len(tags)}")
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= _TAG_KEY_MAX:
            raise SchemaError(f"tag key {key!r}: a str of 1 to {_TAG_KEY_MAX} characters")
        if not isinstance(value, str) or len(value) > _TAG_VALUE_MAX:
            raise SchemaError(f"tag {key!r}: its value must be a str of at most {_TAG_VALUE_MAX}")
    return dict(tags)


@dataclass(frozen=True)
class SchemaNaming:
    """A schema's registry name made from ``{stream}`` (the name of the stream a record is
    put to) and ``{record_type}`` (the Avro record's full name, the JSON Schema's ``title``,
    the protobuf message's full name), as the Java serde's ``AWSSchemaNamingStrategy``
    implementations make it from the transport name and the record: for example
    ``SchemaNaming("{stream}-{record_type}")``. :data:`BY_STREAM` is the Java serde's default
    strategy (``AWSSchemaNamingStrategyDefaultImpl``: the stream's name)."""

    template: str

    def __post_init__(self) -> None:
        fields = {f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None}
        if not fields or not fields <= {"stream", "record_type"}:
            raise SchemaError(
                f"schema naming {self.template!r}: use {{stream}} and/or {{record_type}}, "
                "nothing else"
            )

    @property
    def needs_stream(self) -> bool:
        """Does the name depend on the stream (so it is known only at a put)?"""
        return any(f == "stream" for _, f, _, _ in string.Formatter().parse(self.template))

    def name(self, record_type: str, stream: str | None = None) -> str:
        """The schema name (checked as Glue's rule says)."""
        return check_schema_name(self.template.format(stream=stream, record_type=record_type))


#: the stream's name (the Java serde's default naming strategy)
BY_STREAM = SchemaNaming("{stream}")
#: the record type's full name
BY_RECORD_TYPE = SchemaNaming("{record_type}")
#: both, as in the Java serde's example ``CustomerProvidedSchemaNamingStrategy``
BY_STREAM_AND_RECORD_TYPE = SchemaNaming("{stream}-{record_type}")
