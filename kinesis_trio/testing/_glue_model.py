"""The fake Glue registry's vocabulary: its records (schemas, versions), Glue's error codes,
the checks of names, descriptions and tags, the time strings, the pages and version ranges.

Shapes and bounds are botocore's Glue model (``glue/2017-03-31/service-2.json``): every
``CreatedTime`` and ``UpdatedTime`` of the registry calls is a ``CreatedTimestamp`` or
``UpdatedTimestamp`` shape, ``"type": "string"`` (not ``timestamp``), so the fake answers
ISO 8601 strings (:func:`timestamp`).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._model import _Fail

__all__ = ["GlueSchema", "GlueVersion"]

DEFAULT_REGISTRY = "default-registry"
FORMATS = ("AVRO", "JSON", "PROTOBUF")
#: Glue's quotas (moto's constants): versions per schema, metadata pairs per version.
MAX_VERSIONS = 1000
MAX_METADATA = 10
#: TagsMap: at most 50 pairs; TagKey 1 to 128 characters, TagValue 0 to 256.
MAX_TAGS = 50
#: ListRegistries, ListSchemas, ListSchemaVersions: MaxResultsNumber 1 to 100, "If the value
#: is not supplied, this will be defaulted to 25 per page." (the model's MaxResults)
DEFAULT_PAGE, MAX_PAGE = 25, 100
INPUT = "InvalidInputException"
NOT_FOUND = "EntityNotFoundException"
EXISTS = "AlreadyExistsException"
LIMIT = "ResourceNumberLimitExceededException"
#: The status DeleteSchema and DeleteRegistry answer ("A successful operation will return
#: the Deleting status": DeleteRegistryResponse.Status).
DELETING = "DELETING"

#: Registry and schema names (moto's ``RESOURCE_NAME_PATTERN``, up to 255 bytes).
_NAME = re.compile(r"[a-zA-Z0-9\-_$#.]+")
#: DescriptionString: up to 2048 characters of this class (the model's pattern).
_DESCRIPTION = re.compile("[\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff\r\n\t]*")
#: VersionsString: "a single version number, 5" or "a range, 5-8 : deletes versions 5, 6, 7,
#: 8" (DeleteSchemaVersionsInput.Versions; pattern ``[1-9][0-9]*|[1-9][0-9]*-[1-9][0-9]*``).
_VERSIONS = re.compile(r"([1-9][0-9]*)(?:-([1-9][0-9]*))?")


def fail(code: str, message: str) -> _Fail:
    """Glue's 400 error ``code``."""
    return _Fail(400, code, message)


def check_name(value: Any, parameter: str) -> str:
    """A registry or schema name, else Glue's InvalidInputException naming ``parameter``."""
    if not isinstance(value, str) or not value:
        raise fail(INPUT, f"{parameter} is required.")
    if len(value.encode()) > 255:
        raise fail(
            INPUT,
            "The resource name contains too many or too few characters. Parameter Name: "
            + parameter,
        )
    if not _NAME.fullmatch(value):
        raise fail(
            INPUT,
            "The parameter value contains one or more characters that are not valid. "
            "Parameter Name: " + parameter,
        )
    return value


def check_description(value: Any) -> str | None:
    """An optional DescriptionString (``None``: not given)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 2048 or not _DESCRIPTION.fullmatch(value):
        raise fail(INPUT, "Description is not valid: up to 2048 characters of text.")
    return value


def check_tags(tags: Any, parameter: str = "Tags") -> dict[str, str]:
    """A TagsMap (``{}`` when not given): string keys of 1 to 128 characters, string
    values of up to 256, at most 50 pairs."""
    if tags is None:
        return {}
    if not isinstance(tags, dict):
        raise fail(INPUT, f"{parameter} is not a map of tag keys to values.")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or not isinstance(value, str) or len(value) > 256:
            raise fail(
                INPUT,
                f"{parameter}: tag {key!r} is not valid (keys 1 to 128 characters, values a "
                "string of up to 256).",
            )
    if len(tags) > MAX_TAGS:
        raise fail(INPUT, f"{parameter}: at most {MAX_TAGS} tags a resource.")
    return dict(tags)


def timestamp(seconds: float) -> str:
    """A CreatedTimestamp/UpdatedTimestamp string: ISO 8601 UTC, milliseconds."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now() -> float:
    return datetime.datetime.now(datetime.timezone.utc).timestamp()


def same(data_format: str, a: str, b: str) -> bool:
    """Two definitions are one version: equal JSON for AVRO and JSON, equal text else."""
    if data_format in ("AVRO", "JSON"):
        try:
            return bool(json.loads(a) == json.loads(b))
        except ValueError:
            return a == b
    return a == b


def version_range(text: Any) -> tuple[int, int]:
    """DeleteSchemaVersions' ``Versions``: ``"5"`` or ``"5-8"`` as (first, last)."""
    match = _VERSIONS.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise fail(
            INPUT,
            f"Versions is not valid: {text!r}. Give a version number (5) or a range (5-8).",
        )
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if last < first:
        raise fail(INPUT, f"Versions is not valid: {text!r}: the range ends before it starts.")
    if last - first >= MAX_VERSIONS:
        raise fail(
            INPUT,
            f"Versions is not valid: {text!r}: a range spans at most {MAX_VERSIONS} versions "
            "(the versions a schema may hold).",
        )
    return first, last


_T = TypeVar("_T")


def page(
    operation: str,
    body: dict[str, Any],
    items: Sequence[_T],
    key: Callable[[_T], Any],
    *,
    max_results: int = MAX_PAGE,
) -> tuple[list[_T], dict[str, Any]]:
    """One page of ``items`` (sorted by ``key``, JSON values) as ``MaxResults`` and
    ``NextToken`` ask, and the members to add to the answer (``NextToken`` when more follow).

    The token names the operation and the last key given, so a page after a deletion
    still starts after the last item given (none is skipped or repeated)."""
    limit = body.get("MaxResults", DEFAULT_PAGE)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= max_results:
        raise fail(INPUT, f"MaxResults must be an integer from 1 to {max_results}.")
    token = body.get("NextToken")
    if token is not None:
        try:
            state = json.loads(base64.urlsafe_b64decode(str(token).encode()))
            if state["op"] != operation:
                raise ValueError(state["op"])
            after = state["after"]
            rest = [item for item in items if key(item) > after]
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise fail(INPUT, f"NextToken is not valid for {operation}.") from None
    else:
        rest = list(items)
    shown = rest[:limit]
    extra: dict[str, Any] = {}
    if len(rest) > limit:
        state = json.dumps({"op": operation, "after": key(shown[-1])})
        extra["NextToken"] = base64.urlsafe_b64encode(state.encode()).decode()
    return shown, extra


@dataclass
class GlueVersion:
    """One version of a schema as the fake keeps it."""

    version_id: str
    registry: str
    schema: str
    number: int
    definition: str
    status: str
    created: float
    #: the status it is shown with for ``pending_reads`` more reads (PENDING)
    pending: int = 0
    #: key -> its values, oldest first
    metadata: dict[str, list[str]] = field(default_factory=dict)
    #: key -> when each of its values was put (seconds; older states lack it)
    metadata_times: dict[str, list[float]] = field(default_factory=dict)

    def shown(self, *, read: bool = True) -> str:
        """The status a read shows (PENDING while ``pending`` reads remain; ``read=False``
        looks without counting a read)."""
        if self.pending > 0:
            if read:
                self.pending -= 1
            return "PENDING"
        return self.status

    def put_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = [*self.metadata.get(key, []), value]
        times = self.metadata_times.get(key, [self.created] * (len(self.metadata[key]) - 1))
        self.metadata_times[key] = [*times, now()]

    def remove_metadata(self, key: str, value: str) -> None:
        values = self.metadata[key]
        times = self.metadata_times.get(key, [self.created] * len(values))
        at = values.index(value)
        kept = [v for i, v in enumerate(values) if i != at]
        kept_times = [t for i, t in enumerate(times) if i != at]
        if kept:
            self.metadata[key], self.metadata_times[key] = kept, kept_times
        else:
            del self.metadata[key]
            self.metadata_times.pop(key, None)

    def metadata_info(self, key: str) -> dict[str, Any]:
        """The MetadataInfo of ``key``: its latest value, the others before it."""
        values = self.metadata[key]
        times = self.metadata_times.get(key, [self.created] * len(values))
        pairs = list(zip(values, times, strict=True))
        (value, at), others = pairs[-1], pairs[:-1]
        return {
            "MetadataValue": value,
            "CreatedTime": timestamp(at),
            "OtherMetadataValueList": [
                {"MetadataValue": v, "CreatedTime": timestamp(t)} for v, t in reversed(others)
            ],
        }


@dataclass
class GlueSchema:
    """A schema (a "schema set") as the fake keeps it: its settings and its versions."""

    registry: str
    name: str
    data_format: str
    compatibility: str
    description: str | None
    created: float
    versions: list[GlueVersion] = field(default_factory=list)
    #: the version compatibility checks start from (UpdateSchema's SchemaVersionNumber)
    checkpoint: int = 1
    #: the number the next version gets (numbers are not reused after a deletion)
    next_number: int = 0
    updated: float = 0.0

    @property
    def next_version(self) -> int:
        last = self.versions[-1].number if self.versions else 0
        return max(self.next_number, last + 1)

    def add(self, version: GlueVersion) -> None:
        self.versions.append(version)
        self.next_number = version.number + 1

    def update(
        self,
        *,
        compatibility: str | None = None,
        description: str | None = None,
        checkpoint: int | None = None,
    ) -> None:
        if compatibility is not None:
            self.compatibility = compatibility
        if description is not None:
            self.description = description
        if checkpoint is not None:
            self.checkpoint = checkpoint
        self.updated = now()

    def remove(self, numbers: set[int]) -> list[GlueVersion]:
        """Take the versions numbered ``numbers`` out; return them."""
        gone = [v for v in self.versions if v.number in numbers]
        self.next_number = self.next_version
        self.versions = [v for v in self.versions if v.number not in numbers]
        return gone
