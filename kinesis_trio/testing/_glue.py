"""The fake's Glue Schema Registry: registries, schemas, versions, metadata, tags and the
compatibility checks (``_compat``), answered with Glue's error codes and messages.

Served on the fake's own port: a request whose ``X-Amz-Target`` starts with ``AWSGlue.``
comes here (``FakeKinesis._handle``). The messages are the ones AWS answers and moto copies
(``moto/glue/exceptions.py``), the Java client branching on two of them: "Schema is not
found." and "Schema version is not found.". Unlike moto, GetSchemaByDefinition on a schema
that exists but has no such version answers the latter, as AWS does (the Java client's
``SchemaByDefinitionFetcher`` registers a version on it).

This module keeps the state and serves the calls that create, read, register and delete;
``_glue_admin`` serves the lists, UpdateSchema, version deletion, validity checks, metadata
and tags over it. Deletions finish before the answer: what Glue shows as
``DELETING`` for a while is gone at once ("Hard deletes will be enforced on the database",
DeleteSchemaVersions' documentation), so no call shows a deleted registry, schema or version.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ._compat import COMPATIBILITIES, definition_problem, incompatibility
from ._glue_admin import GlueAdmin, GlueTags
from ._glue_model import (
    DEFAULT_REGISTRY,
    DELETING,
    EXISTS,
    FORMATS,
    INPUT,
    LIMIT,
    MAX_VERSIONS,
    NOT_FOUND,
    GlueSchema,
    GlueVersion,
    check_description,
    check_name,
    check_tags,
    fail,
    now,
    same,
    timestamp,
)
from ._model import ACCOUNT_ID, REGION, _Fail

__all__ = ["FakeGlue", "GlueVersion"]

_NO_SCHEMA_ID = "At least one of (registryName and schemaName) or schemaArn has to be provided."
#: The registry members GetRegistry answers (the rest of a registry's record is the fake's).
_REGISTRY_ANSWER = ("RegistryName", "RegistryArn", "Description", "Status")


class FakeGlue:
    """The Glue schema registry subset the fake serves (see the module's docstring).

    ``pending_reads``: a version a compatibility check applies to is answered PENDING this
    many times (its RegisterSchemaVersion, then its GetSchemaVersion reads) before its
    final status, AVAILABLE or FAILURE, as Glue's asynchronous check does (0: at once).
    """

    def __init__(self) -> None:
        #: name -> its record (RegistryName, RegistryArn, Description, Status, CreatedTime
        #: and UpdatedTime in seconds)
        self.registries: dict[str, dict[str, Any]] = {}
        self._schemas: dict[tuple[str, str], GlueSchema] = {}
        self._versions: dict[str, GlueVersion] = {}
        self.tags: GlueTags = GlueTags()
        self.pending_reads = 0
        self._admin = GlueAdmin(self)

    # -- for tests ----------------------------------------------------------------------

    def versions(self, schema: str, registry: str = DEFAULT_REGISTRY) -> list[GlueVersion]:
        """A schema's versions, oldest first (empty when there is no such schema)."""
        found = self._schemas.get((registry, schema))
        return list(found.versions) if found is not None else []

    def schemas(self) -> list[GlueSchema]:
        """Every schema, by registry and name."""
        return [self._schemas[k] for k in sorted(self._schemas)]

    # -- kept on disk (``kinesis-trio local --data``: ``_persist`` keeps it in ``meta``) --

    def snapshot(self) -> str:
        """The registries, schemas, versions and tags as JSON ("" when there are none)."""
        if not self.registries and not self._schemas:
            return ""
        state: dict[str, Any] = {
            "registries": self.registries,
            "schemas": [
                {k: v for k, v in vars(s).items() if k != "versions"}
                | {"versions": [vars(v) for v in s.versions]}
                for s in self._schemas.values()
            ],
        }
        if self.tags.snapshot():
            state["tags"] = self.tags.snapshot()
        return json.dumps(state, sort_keys=True)

    def restore(self, text: str) -> None:
        """Take the state :meth:`snapshot` wrote (``ValueError`` if it is not one)."""
        try:
            state = json.loads(text) if text else {"registries": {}, "schemas": []}
            registries = {str(k): dict(v) for k, v in state["registries"].items()}
            schemas: dict[tuple[str, str], GlueSchema] = {}
            versions: dict[str, GlueVersion] = {}
            for raw in state["schemas"]:
                found = [GlueVersion(**v) for v in raw.pop("versions")]
                schema = GlueSchema(**raw, versions=found)
                schemas[schema.registry, schema.name] = schema
                versions.update((v.version_id, v) for v in found)
            tags = GlueTags.restored(state.get("tags", {}))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a Glue registry state ({type(exc).__name__}: {exc})") from None
        self.registries, self._schemas, self._versions = registries, schemas, versions
        self.tags = tags

    # -- serving ------------------------------------------------------------------------

    def answer(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """Glue's answer to ``operation``; raises ``_Fail`` with Glue's error."""
        method = getattr(self, f"_op_{operation}", None) or getattr(
            self._admin, f"op_{operation}", None
        )
        if method is None:
            raise _Fail(400, "UnknownOperationException", operation)
        result: dict[str, Any] = method(body)
        return result

    def arn(self, kind: str, *names: str) -> str:
        return f"arn:aws:glue:{REGION}:{ACCOUNT_ID}:{kind}/{'/'.join(names)}"

    def registry_name(self, registry_id: Any, *, create_default: bool = False) -> str:
        """The registry a RegistryId names (none: ``default-registry``)."""
        if not registry_id:
            name = DEFAULT_REGISTRY
        elif not isinstance(registry_id, dict):
            raise fail(INPUT, "RegistryId is not an object.")
        elif registry_id.get("RegistryName") and registry_id.get("RegistryArn"):
            raise fail(
                INPUT,
                "One of registryName or registryArn has to be provided, both cannot be provided.",
            )
        else:
            name = str(registry_id.get("RegistryName") or registry_id.get("RegistryArn", ""))
            name = name.rsplit("/", 1)[-1]
        if name not in self.registries:
            if name == DEFAULT_REGISTRY and create_default:
                self._op_CreateRegistry({"RegistryName": name})
            else:
                raise fail(NOT_FOUND, f"Registry is not found. RegistryName: {name}")
        return name

    def schema(self, schema_id: Any) -> GlueSchema:
        """The schema a SchemaId names."""
        if not isinstance(schema_id, dict):
            raise fail(INPUT, _NO_SCHEMA_ID)
        arn = schema_id.get("SchemaArn")
        registry, name = schema_id.get("RegistryName"), schema_id.get("SchemaName")
        if arn:
            if registry or name:
                raise fail(
                    INPUT,
                    "One of (registryName and schemaName) or schemaArn has to be provided, "
                    "both cannot be provided.",
                )
            registry, name = ["", *str(arn).split("/")][-2:]
        elif not registry or not name:
            raise fail(INPUT, _NO_SCHEMA_ID)
        found = self._schemas.get((registry, name))
        if found is None:
            raise fail(
                NOT_FOUND,
                f"Schema is not found. RegistryName: {registry}, SchemaName: {name}, "
                f"SchemaArn: {arn or 'null'}",
            )
        return found

    def version_by_id(self, version_id: Any) -> GlueVersion:
        found = self._versions.get(str(version_id))
        if found is None:
            raise fail(NOT_FOUND, f"Schema version is not found. SchemaVersionId: {version_id}")
        return found

    def version_by_number(self, schema: GlueSchema, wanted: Any) -> GlueVersion:
        """The version a SchemaVersionNumber (``VersionNumber`` or ``LatestVersion``) names."""
        if not isinstance(wanted, dict) or not wanted:
            raise fail(INPUT, "One of version number (or) latest version is required.")
        latest, number = bool(wanted.get("LatestVersion")), wanted.get("VersionNumber")
        matches = [v for v in schema.versions if latest or v.number == number]
        if not matches:
            raise fail(
                NOT_FOUND,
                f"Schema version is not found. RegistryName: {schema.registry}, SchemaName: "
                f"{schema.name}, SchemaArn: null, VersionNumber: {number}, isLatestVersion: "
                f"{str(latest).lower()}",
            )
        return matches[-1]

    def drop_versions(self, schema: GlueSchema, numbers: set[int]) -> None:
        for version in schema.remove(numbers):
            del self._versions[version.version_id]

    def _drop_schema(self, schema: GlueSchema) -> None:
        self.drop_versions(schema, {v.number for v in schema.versions})
        del self._schemas[schema.registry, schema.name]
        self.tags.drop(self.arn("schema", schema.registry, schema.name))

    # -- registries -----------------------------------------------------------------------

    def _op_CreateRegistry(self, body: dict[str, Any]) -> dict[str, Any]:
        name = check_name(body.get("RegistryName"), "registryName")
        description = check_description(body.get("Description"))
        tags = check_tags(body.get("Tags"))
        if name in self.registries:
            raise fail(EXISTS, f"Registry already exists. RegistryName: {name}")
        created = now()
        self.registries[name] = {
            "RegistryName": name,
            "RegistryArn": self.arn("registry", name),
            "Description": description or "",
            "Status": "AVAILABLE",
            "CreatedTime": created,
            "UpdatedTime": created,
        }
        self.tags.set(self.arn("registry", name), tags)
        answer = {k: self.registries[name][k] for k in ("RegistryArn", "RegistryName")}
        return answer | {"Description": description or ""} | ({"Tags": tags} if tags else {})

    def registry_answer(self, name: str) -> dict[str, Any]:
        """A registry as GetRegistry and ListRegistries show it."""
        record = self.registries[name]
        answer = {k: record[k] for k in _REGISTRY_ANSWER if k in record}
        for member in ("CreatedTime", "UpdatedTime"):
            if isinstance(record.get(member), (int, float)):
                answer[member] = timestamp(record[member])
        return answer

    def _op_GetRegistry(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("RegistryId"):
            raise fail(INPUT, "RegistryId is required.")
        return self.registry_answer(self.registry_name(body["RegistryId"]))

    def _op_UpdateRegistry(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("RegistryId"):
            raise fail(INPUT, "RegistryId is required.")
        description = check_description(body.get("Description"))
        if description is None:
            raise fail(INPUT, "Description is required.")
        name = self.registry_name(body["RegistryId"])
        self.registries[name] = self.registries[name] | {
            "Description": description,
            "UpdatedTime": now(),
        }
        return {"RegistryName": name, "RegistryArn": self.arn("registry", name)}

    def _op_DeleteRegistry(self, body: dict[str, Any]) -> dict[str, Any]:
        """Its schemas and their versions go with it (DeleteRegistry: "Delete the entire
        registry including schema and all of its versions.")."""
        if not body.get("RegistryId"):
            raise fail(INPUT, "RegistryId is required.")
        name = self.registry_name(body["RegistryId"])
        for schema in [s for s in self._schemas.values() if s.registry == name]:
            self._drop_schema(schema)
        del self.registries[name]
        self.tags.drop(self.arn("registry", name))
        return {"RegistryName": name, "RegistryArn": self.arn("registry", name), "Status": DELETING}

    # -- schemas --------------------------------------------------------------------------

    def _check_definition(self, data_format: str, definition: Any) -> str:
        if not isinstance(definition, str) or not definition.strip():
            raise fail(INPUT, "SchemaDefinition is required.")
        problem = definition_problem(data_format, definition)
        if problem is not None:
            raise fail(
                INPUT, f"Schema definition of {data_format} data format is invalid: {problem}"
            )
        return definition

    def _op_CreateSchema(self, body: dict[str, Any]) -> dict[str, Any]:
        registry = self.registry_name(body.get("RegistryId"), create_default=True)
        name = check_name(body.get("SchemaName"), "schemaName")
        data_format = body.get("DataFormat")
        if data_format not in FORMATS:
            raise fail(INPUT, "Data format is not valid.")
        compatibility = body.get("Compatibility", "BACKWARD")
        if compatibility not in COMPATIBILITIES:
            raise fail(INPUT, "Compatibility is not valid.")
        description = check_description(body.get("Description"))
        tags = check_tags(body.get("Tags"))
        definition = body.get("SchemaDefinition")
        if definition is not None:
            self._check_definition(data_format, definition)
        if (registry, name) in self._schemas:
            raise fail(EXISTS, f"Schema already exists. SchemaName: {name}")
        created = now()
        schema = GlueSchema(
            registry, name, data_format, compatibility, description, created, updated=created
        )
        self._schemas[(registry, name)] = schema
        self.tags.set(self.arn("schema", registry, name), tags)
        version = None
        if definition is not None:
            version = self._add_version(schema, definition, "AVAILABLE")
        answer = self._schema_answer(schema)
        if tags:
            answer["Tags"] = tags
        if version is not None:
            answer["SchemaVersionId"] = version.version_id
            answer["SchemaVersionStatus"] = version.status
        return answer

    def _schema_answer(self, schema: GlueSchema) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "RegistryName": schema.registry,
            "RegistryArn": self.arn("registry", schema.registry),
            "SchemaName": schema.name,
            "SchemaArn": self.arn("schema", schema.registry, schema.name),
            # "If description is not provided, there will not be any automatic default
            # value for this." (CreateSchemaInput.Description)
            **({"Description": schema.description} if schema.description is not None else {}),
            "DataFormat": schema.data_format,
            "Compatibility": schema.compatibility,
            "SchemaCheckpoint": schema.checkpoint,
            "NextSchemaVersion": schema.next_version,
            "SchemaStatus": "AVAILABLE",
        }
        if schema.versions:  # VersionLongNumber: 1 to 100,000
            answer["LatestSchemaVersion"] = schema.versions[-1].number
        return answer

    def _op_GetSchema(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = self.schema(body.get("SchemaId"))
        answer = self._schema_answer(schema)
        answer["CreatedTime"] = timestamp(schema.created)
        answer["UpdatedTime"] = timestamp(schema.updated or schema.created)
        return answer

    def _op_DeleteSchema(self, body: dict[str, Any]) -> dict[str, Any]:
        """DeleteSchema: "Deletes the entire schema set, including the schema set and all of
        its versions."; answered with Status DELETING, gone for the next call."""
        schema = self.schema(body.get("SchemaId"))
        self._drop_schema(schema)
        return {
            "SchemaArn": self.arn("schema", schema.registry, schema.name),
            "SchemaName": schema.name,
            "Status": DELETING,
        }

    # -- versions -------------------------------------------------------------------------

    def _add_version(
        self, schema: GlueSchema, definition: str, status: str, *, pending: int = 0
    ) -> GlueVersion:
        version = GlueVersion(
            str(uuid.uuid4()),
            schema.registry,
            schema.name,
            schema.next_version,
            definition,
            status,
            now(),
            pending,
        )
        schema.add(version)
        self._versions[version.version_id] = version
        return version

    def _op_RegisterSchemaVersion(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = self.schema(body.get("SchemaId"))
        definition = self._check_definition(schema.data_format, body.get("SchemaDefinition"))
        for version in schema.versions:
            # "If the same schema definition is already stored in Schema Registry as a
            # version, the schema ID of the existing schema is returned to the caller."
            if same(schema.data_format, version.definition, definition):
                return self._version_answer(version)
        if schema.compatibility == "DISABLED":
            raise fail(
                INPUT,
                "Compatibility DISABLED does not allow versioning. SchemaId: SchemaId(schemaArn="
                f"null, schemaName={schema.name}, registryName={schema.registry})",
            )
        if len(schema.versions) >= MAX_VERSIONS:
            raise fail(
                LIMIT,
                "More schema versions cannot be created. The maximum limit has been reached.",
            )
        # checked against the available versions from the checkpoint on (SchemaCheckpoint:
        # "The version number of the checkpoint (the last time the compatibility mode was
        # changed)")
        available = [
            v.definition
            for v in schema.versions
            if v.status == "AVAILABLE" and v.number >= schema.checkpoint
        ]
        problem = incompatibility(schema.data_format, schema.compatibility, definition, available)
        # Glue keeps a version that fails its check, with status FAILURE
        checked = schema.compatibility != "NONE" and bool(available)
        version = self._add_version(
            schema,
            definition,
            "FAILURE" if problem else "AVAILABLE",
            pending=self.pending_reads if checked else 0,
        )
        return self._version_answer(version)

    def _version_answer(self, version: GlueVersion) -> dict[str, Any]:
        return {
            "SchemaVersionId": version.version_id,
            "VersionNumber": version.number,
            "Status": version.shown(),
        }

    def _op_GetSchemaVersion(self, body: dict[str, Any]) -> dict[str, Any]:
        version_id = body.get("SchemaVersionId")
        if version_id:
            if body.get("SchemaId") or body.get("SchemaVersionNumber"):
                raise fail(
                    INPUT,
                    "No other input parameters can be specified when fetching by SchemaVersionId.",
                )
            version = self.version_by_id(version_id)
        else:
            schema = self.schema(body.get("SchemaId"))
            version = self.version_by_number(schema, body.get("SchemaVersionNumber"))
        schema = self._schemas[(version.registry, version.schema)]
        return {
            "SchemaVersionId": version.version_id,
            "SchemaDefinition": version.definition,
            "DataFormat": schema.data_format,
            "SchemaArn": self.arn("schema", version.registry, version.schema),
            "VersionNumber": version.number,
            "Status": version.shown(),
            "CreatedTime": timestamp(version.created),
        }

    def _op_GetSchemaByDefinition(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = self.schema(body.get("SchemaId"))
        definition = body.get("SchemaDefinition")
        if not isinstance(definition, str) or not definition:
            raise fail(INPUT, "SchemaDefinition is required.")
        for version in schema.versions:
            if same(schema.data_format, version.definition, definition):
                return {
                    "SchemaVersionId": version.version_id,
                    "SchemaArn": self.arn("schema", schema.registry, schema.name),
                    "DataFormat": schema.data_format,
                    "Status": version.shown(read=False),
                    "CreatedTime": timestamp(version.created),
                }
        raise fail(
            NOT_FOUND,
            f"Schema version is not found. RegistryName: {schema.registry}, SchemaName: "
            f"{schema.name}, SchemaArn: null",
        )
