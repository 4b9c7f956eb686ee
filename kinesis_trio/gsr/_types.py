"""The values the Glue Schema Registry pieces share: a schema to write with, a registered
version, the registry's contract (issue 52); the errors are ``_errors``'s.

The serializers (``_wire``, the formats) and the registry client (``_aws/_glue.py`` and the
cache in ``_registry.py``) meet only here.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .._errors import DecodeError as DecodeError
from .._errors import SchemaError as SchemaError
from .._errors import SchemaIncompatibleError as SchemaIncompatibleError
from .._errors import SchemaMismatchError as SchemaMismatchError
from .._errors import SchemaNotFoundError as SchemaNotFoundError
from .._errors import SchemaRegistryError as SchemaRegistryError
from ._options import check_compatibility, check_description, check_tags

DataFormat = Literal["AVRO", "JSON", "PROTOBUF"]
DATA_FORMATS: tuple[DataFormat, ...] = ("AVRO", "JSON", "PROTOBUF")

#: The registry the Java client uses when none is named.
DEFAULT_REGISTRY = "default-registry"


@dataclass(frozen=True)
class SchemaSpec:
    """A schema records are written with: its name, registry, format and definition.

    ``compatibility``, ``description`` and ``tags`` apply only when auto-registration
    creates the schema (``None``: the registry's settings); ``metadata`` when it creates the
    schema or a version of it. Each is checked against Glue's rules here.
    """

    name: str
    definition: str
    data_format: DataFormat
    registry: str = DEFAULT_REGISTRY
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    description: str | None = field(default=None, compare=False)
    tags: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.compatibility is not None:
            check_compatibility(self.compatibility)
        if self.description is not None:
            check_description(self.description)
        check_tags(self.tags)


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema version as the registry knows it."""

    version_id: uuid.UUID
    data_format: DataFormat
    definition: str


class SchemaRegistry(Protocol):
    """What the serializers and the decoder need from a registry (cached or not)."""

    def cached_version(self, spec: SchemaSpec) -> uuid.UUID | None:
        """The version id when already known: no I/O (the put path)."""

    async def version_for(self, spec: SchemaSpec) -> uuid.UUID:
        """The version id of ``spec``'s definition, registering it when allowed."""

    async def schema_of(self, version_id: uuid.UUID) -> RegisteredSchema:
        """The definition and format of a version id (the reader's side)."""
