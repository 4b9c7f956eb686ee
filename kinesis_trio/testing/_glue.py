"""The fake's Glue Schema Registry: registries, schemas, versions, metadata and the
compatibility checks (``_compat``), answered with Glue's error codes and messages.

Served on the fake's own port: a request whose ``X-Amz-Target`` starts with ``AWSGlue.``
comes here (``FakeKinesis._handle``). The messages are the ones AWS answers and moto copies
(``moto/glue/exceptions.py``), the Java client branching on two of them: "Schema is not
found." and "Schema version is not found.". Unlike moto, GetSchemaByDefinition on a schema
that exists but has no such version answers the latter, as AWS does (the Java client's
``SchemaByDefinitionFetcher`` registers a version on it).
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from ._compat import COMPATIBILITIES, definition_problem, incompatibility
from ._model import ACCOUNT_ID, REGION, _Fail

__all__ = ["FakeGlue", "GlueVersion"]

DEFAULT_REGISTRY = "default-registry"
_FORMATS = ("AVRO", "JSON", "PROTOBUF")
#: Glue's quotas (moto's constants): versions per schema, metadata pairs per version.
MAX_VERSIONS = 1000
MAX_METADATA = 10
_INPUT = "InvalidInputException"
_NOT_FOUND = "EntityNotFoundException"
_EXISTS = "AlreadyExistsException"
_NO_SCHEMA_ID = "At least one of (registryName and schemaName) or schemaArn has to be provided."


def _fail(code: str, message: str) -> _Fail:
    return _Fail(400, code, message)


#: Registry and schema names (moto's ``RESOURCE_NAME_PATTERN``, up to 255 bytes).
_NAME = re.compile(r"[a-zA-Z0-9\-_$#.]+")


def _check_name(value: Any, parameter: str) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(_INPUT, f"{parameter} is required.")
    if len(value.encode()) > 255:
        raise _fail(
            _INPUT,
            "The resource name contains too many or too few characters. Parameter Name: "
            + parameter,
        )
    if not _NAME.fullmatch(value):
        raise _fail(
            _INPUT,
            "The parameter value contains one or more characters that are not valid. "
            "Parameter Name: " + parameter,
        )
    return value


def _now() -> float:
    return datetime.datetime.now(datetime.timezone.utc).timestamp()


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
    metadata: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class _Schema:
    registry: str
    name: str
    data_format: str
    compatibility: str
    description: str | None
    created: float
    versions: list[GlueVersion] = field(default_factory=list)


def _same(data_format: str, a: str, b: str) -> bool:
    """Two definitions are one version: equal JSON for AVRO and JSON, equal text else."""
    if data_format in ("AVRO", "JSON"):
        try:
            return bool(json.loads(a) == json.loads(b))
        except ValueError:
            return a == b
    return a == b


class FakeGlue:
    """The Glue schema registry subset the fake serves (see the module's docstring).

    ``pending_reads``: a version a compatibility check applies to is answered PENDING this
    many times (its RegisterSchemaVersion, then its GetSchemaVersion reads) before its
    final status, AVAILABLE or FAILURE, as Glue's asynchronous check does (0: at once).
    """

    def __init__(self) -> None:
        self.registries: dict[str, dict[str, Any]] = {}
        self._schemas: dict[tuple[str, str], _Schema] = {}
        self._versions: dict[str, GlueVersion] = {}
        self.pending_reads = 0

    # -- for tests ----------------------------------------------------------------------

    def versions(self, schema: str, registry: str = DEFAULT_REGISTRY) -> list[GlueVersion]:
        """A schema's versions, oldest first (empty when there is no such schema)."""
        found = self._schemas.get((registry, schema))
        return list(found.versions) if found is not None else []

    # -- kept on disk (``kinesis-trio local --data``: ``_persist`` keeps it in ``meta``) --

    def snapshot(self) -> str:
        """The registries, schemas and versions as JSON ("" when there are none)."""
        if not self.registries and not self._schemas:
            return ""
        return json.dumps(
            {
                "registries": self.registries,
                "schemas": [
                    {
                        "registry": s.registry,
                        "name": s.name,
                        "data_format": s.data_format,
                        "compatibility": s.compatibility,
                        "description": s.description,
                        "created": s.created,
                        "versions": [vars(v) for v in s.versions],
                    }
                    for s in self._schemas.values()
                ],
            },
            sort_keys=True,
        )

    def restore(self, text: str) -> None:
        """Take the state :meth:`snapshot` wrote (``ValueError`` if it is not one)."""
        try:
            state = json.loads(text) if text else {"registries": {}, "schemas": []}
            registries = {str(k): dict(v) for k, v in state["registries"].items()}
            schemas: dict[tuple[str, str], _Schema] = {}
            versions: dict[str, GlueVersion] = {}
            for raw in state["schemas"]:
                found = [GlueVersion(**v) for v in raw.pop("versions")]
                schema = _Schema(**raw, versions=found)
                schemas[schema.registry, schema.name] = schema
                versions.update((v.version_id, v) for v in found)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a Glue registry state ({type(exc).__name__}: {exc})") from None
        self.registries, self._schemas, self._versions = registries, schemas, versions

    # -- serving ------------------------------------------------------------------------

    def answer(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """Glue's answer to ``operation``; raises ``_Fail`` with Glue's error."""
        method = getattr(self, f"_op_{operation}", None)
        if method is None:
            raise _Fail(400, "UnknownOperationException", operation)
        result: dict[str, Any] = method(body)
        return result

    def _arn(self, kind: str, *names: str) -> str:
        return f"arn:aws:glue:{REGION}:{ACCOUNT_ID}:{kind}/{'/'.join(names)}"

    def _registry_name(self, registry_id: Any, *, create_default: bool = False) -> str:
        if not registry_id:
            name = DEFAULT_REGISTRY
        elif not isinstance(registry_id, dict):
            raise _fail(_INPUT, "RegistryId is not an object.")
        elif registry_id.get("RegistryName") and registry_id.get("RegistryArn"):
            raise _fail(
                _INPUT,
                "One of registryName or registryArn has to be provided, both cannot be provided.",
            )
        else:
            name = str(registry_id.get("RegistryName") or registry_id.get("RegistryArn", ""))
            name = name.rsplit("/", 1)[-1]
        if name not in self.registries:
            if name == DEFAULT_REGISTRY and create_default:
                self._op_CreateRegistry({"RegistryName": name})
            else:
                raise _fail(_NOT_FOUND, f"Registry is not found. RegistryName: {name}")
        return name

    def _schema(self, schema_id: Any) -> _Schema:
        if not isinstance(schema_id, dict):
            raise _fail(
                _INPUT,
                "At least one of (registryName and schemaName) or schemaArn has to be provided.",
            )
        arn = schema_id.get("SchemaArn")
        registry, name = schema_id.get("RegistryName"), schema_id.get("SchemaName")
        if arn:
            if registry or name:
                raise _fail(
                    _INPUT,
                    "One of (registryName and schemaName) or schemaArn has to be provided, "
                    "both cannot be provided.",
                )
            registry, name = str(arn).split("/")[-2:]
        elif not registry or not name:
            raise _fail(
                _INPUT,
                "At least one of (registryName and schemaName) or schemaArn has to be provided.",
            )
        found = self._schemas.get((registry, name))
        if found is None:
            raise _fail(
                _NOT_FOUND,
                f"Schema is not found. RegistryName: {registry}, SchemaName: {name}, "
                f"SchemaArn: {arn or 'null'}",
            )
        return found

    def _version_by_id(self, version_id: Any) -> GlueVersion:
        found = self._versions.get(str(version_id))
        if found is None or found.status == "DELETING":
            raise _fail(_NOT_FOUND, f"Schema version is not found. SchemaVersionId: {version_id}")
        return found

    def _shown(self, version: GlueVersion) -> str:
        """The status a read shows (PENDING while ``pending`` reads remain)."""
        if version.pending > 0:
            version.pending -= 1
            return "PENDING"
        return version.status

    # -- registries -----------------------------------------------------------------------

    def _op_CreateRegistry(self, body: dict[str, Any]) -> dict[str, Any]:
        name = _check_name(body.get("RegistryName"), "registryName")
        if name in self.registries:
            raise _fail(_EXISTS, f"Registry already exists. RegistryName: {name}")
        now = _now()
        self.registries[name] = {
            "RegistryName": name,
            "RegistryArn": self._arn("registry", name),
            "Description": body.get("Description") or "",
            "Status": "AVAILABLE",
            "CreatedTime": now,
            "UpdatedTime": now,
        }
        return {k: self.registries[name][k] for k in ("RegistryArn", "RegistryName", "Description")}

    def _op_GetRegistry(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("RegistryId"):
            raise _fail(_INPUT, "RegistryId is required.")
        return dict(self.registries[self._registry_name(body["RegistryId"])])

    # -- schemas --------------------------------------------------------------------------

    def _check_definition(self, data_format: str, definition: Any) -> str:
        if not isinstance(definition, str) or not definition.strip():
            raise _fail(_INPUT, "SchemaDefinition is required.")
        problem = definition_problem(data_format, definition)
        if problem is not None:
            raise _fail(
                _INPUT, f"Schema definition of {data_format} data format is invalid: {problem}"
            )
        return definition

    def _op_CreateSchema(self, body: dict[str, Any]) -> dict[str, Any]:
        registry = self._registry_name(body.get("RegistryId"), create_default=True)
        name = _check_name(body.get("SchemaName"), "schemaName")
        data_format = body.get("DataFormat")
        if data_format not in _FORMATS:
            raise _fail(_INPUT, "Data format is not valid.")
        compatibility = body.get("Compatibility", "BACKWARD")
        if compatibility not in COMPATIBILITIES:
            raise _fail(_INPUT, "Compatibility is not valid.")
        definition = body.get("SchemaDefinition")
        if definition is not None:
            self._check_definition(data_format, definition)
        if (registry, name) in self._schemas:
            raise _fail(_EXISTS, f"Schema already exists. SchemaName: {name}")
        schema = _Schema(
            registry, name, data_format, compatibility, body.get("Description"), _now()
        )
        self._schemas[(registry, name)] = schema
        version = None
        if definition is not None:
            version = self._add_version(schema, definition, "AVAILABLE")
        answer = self._schema_answer(schema)
        if version is not None:
            answer["SchemaVersionId"] = version.version_id
            answer["SchemaVersionStatus"] = version.status
        return answer

    def _schema_answer(self, schema: _Schema) -> dict[str, Any]:
        latest = schema.versions[-1].number if schema.versions else 0
        return {
            "RegistryName": schema.registry,
            "RegistryArn": self._arn("registry", schema.registry),
            "SchemaName": schema.name,
            "SchemaArn": self._arn("schema", schema.registry, schema.name),
            "Description": schema.description or "",
            "DataFormat": schema.data_format,
            "Compatibility": schema.compatibility,
            "SchemaCheckpoint": 1,
            "LatestSchemaVersion": latest,
            "NextSchemaVersion": latest + 1,
            "SchemaStatus": "AVAILABLE",
        }

    def _op_GetSchema(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = self._schema(body.get("SchemaId"))
        answer = self._schema_answer(schema)
        answer["CreatedTime"] = answer["UpdatedTime"] = schema.created
        return answer

    # -- versions -------------------------------------------------------------------------

    def _add_version(self, schema: _Schema, definition: str, status: str) -> GlueVersion:
        number = schema.versions[-1].number + 1 if schema.versions else 1
        version = GlueVersion(
            str(uuid.uuid4()), schema.registry, schema.name, number, definition, status, _now()
        )
        schema.versions.append(version)
        self._versions[version.version_id] = version
        return version

    def _op_RegisterSchemaVersion(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = self._schema(body.get("SchemaId"))
        definition = self._check_definition(schema.data_format, body.get("SchemaDefinition"))
        for version in schema.versions:
            # "If the same schema definition is already stored in Schema Registry as a
            # version, the schema ID of the existing schema is returned to the caller."
            if _same(schema.data_format, version.definition, definition):
                return self._version_answer(version)
        if schema.compatibility == "DISABLED":
            raise _fail(
                _INPUT,
                "Compatibility DISABLED does not allow versioning. SchemaId: SchemaId(schemaArn="
                f"null, schemaName={schema.name}, registryName={schema.registry})",
            )
        if len(schema.versions) >= MAX_VERSIONS:
            raise _fail(
                "ResourceNumberLimitExceededException",
                "More schema versions cannot be created. The maximum limit has been reached.",
            )
        available = [v.definition for v in schema.versions if v.status == "AVAILABLE"]
        problem = incompatibility(schema.data_format, schema.compatibility, definition, available)
        # Glue keeps a version that fails its check, with status FAILURE
        version = self._add_version(schema, definition, "FAILURE" if problem else "AVAILABLE")
        if schema.compatibility != "NONE" and available:
            version.pending = self.pending_reads
        return self._version_answer(version)

    def _version_answer(self, version: GlueVersion) -> dict[str, Any]:
        return {
            "SchemaVersionId": version.version_id,
            "VersionNumber": version.number,
            "Status": self._shown(version),
        }

    def _op_GetSchemaVersion(self, body: dict[str, Any]) -> dict[str, Any]:
        version_id = body.get("SchemaVersionId")
        if version_id:
            if body.get("SchemaId") or body.get("SchemaVersionNumber"):
                raise _fail(
                    _INPUT,
                    "No other input parameters can be specified when fetching by SchemaVersionId.",
                )
            version = self._version_by_id(version_id)
        else:
            schema = self._schema(body.get("SchemaId"))
            wanted = body.get("SchemaVersionNumber") or {}
            if not wanted:
                raise _fail(_INPUT, "One of version number (or) latest version is required.")
            number = wanted.get("VersionNumber")
            matches = [
                v
                for v in schema.versions
                if (wanted.get("LatestVersion") or v.number == number) and v.status != "DELETING"
            ]
            if not matches:
                raise _fail(
                    _NOT_FOUND,
                    f"Schema version is not found. RegistryName: {schema.registry}, SchemaName: "
                    f"{schema.name}, SchemaArn: null, VersionNumber: {number}, isLatestVersion: "
                    f"{str(bool(wanted.get('LatestVersion'))).lower()}",
                )
            version = matches[-1]
        schema = self._schemas[(version.registry, version.schema)]
        return {
            "SchemaVersionId": version.version_id,
            "SchemaDefinition": version.definition,
            "DataFormat": schema.data_format,
            "SchemaArn": self._arn("schema", version.registry, version.schema),
            "VersionNumber": version.number,
            "Status": self._shown(version),
            "CreatedTime": datetime.datetime.fromtimestamp(
                version.created, datetime.timezone.utc
            ).isoformat(),
        }

    def _op_GetSchemaByDefinition(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = self._schema(body.get("SchemaId"))
        definition = body.get("SchemaDefinition")
        if not isinstance(definition, str) or not definition:
            raise _fail(_INPUT, "SchemaDefinition is required.")
        for version in schema.versions:
            if version.status != "DELETING" and _same(
                schema.data_format, version.definition, definition
            ):
                return {
                    "SchemaVersionId": version.version_id,
                    "SchemaArn": self._arn("schema", schema.registry, schema.name),
                    "DataFormat": schema.data_format,
                    "Status": version.status if version.pending <= 0 else "PENDING",
                    "CreatedTime": version.created,
                }
        raise _fail(
            _NOT_FOUND,
            f"Schema version is not found. RegistryName: {schema.registry}, SchemaName: "
            f"{schema.name}, SchemaArn: null",
        )

    def _op_PutSchemaVersionMetadata(self, body: dict[str, Any]) -> dict[str, Any]:
        pair = body.get("MetadataKeyValue") or {}
        key, value = pair.get("MetadataKey"), pair.get("MetadataValue")
        if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
            raise _fail(_INPUT, "MetadataKeyValue needs a MetadataKey and a MetadataValue.")
        version = self._version_by_id(body.get("SchemaVersionId"))
        if sum(len(v) for v in version.metadata.values()) >= MAX_METADATA:
            raise _fail(
                "ResourceNumberLimitExceededException",
                "Your resource limits for Schema Version Metadata have been exceeded.",
            )
        values = version.metadata.setdefault(key, [])
        if value in values:
            raise _fail(
                _EXISTS,
                f"Resource already exist for schema version id: {version.version_id}, "
                f"metadata key: {key}, metadata value: {value}",
            )
        values.append(value)
        return {
            "SchemaVersionId": version.version_id,
            "LatestVersion": False,
            "VersionNumber": version.number,
            "MetadataKey": key,
            "MetadataValue": value,
        }

    def _op_QuerySchemaVersionMetadata(self, body: dict[str, Any]) -> dict[str, Any]:
        version = self._version_by_id(body.get("SchemaVersionId"))
        return {
            "SchemaVersionId": version.version_id,
            "MetadataInfoMap": {
                k: {"MetadataValue": v[-1], "CreatedTime": "", "OtherMetadataValueList": []}
                for k, v in version.metadata.items()
            },
        }
