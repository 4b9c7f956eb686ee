"""The fake Glue registry's other calls, the ones a user's tooling makes over the registry
``_glue.FakeGlue`` keeps: the lists (paged), schema settings, version deletion, validity
checks, version metadata and tags.

Shapes as botocore's Glue model (``glue/2017-03-31``) gives them; where the model's
documentation decides a rule, the method's docstring quotes it.
"""

from __future__ import annotations

from typing import Any, Protocol

from ._compat import COMPATIBILITIES, definition_problem
from ._glue_model import (
    EXISTS,
    FORMATS,
    INPUT,
    LIMIT,
    MAX_METADATA,
    MAX_TAGS,
    NOT_FOUND,
    GlueSchema,
    GlueVersion,
    check_description,
    check_tags,
    fail,
    page,
    timestamp,
    version_range,
)
from ._model import ACCOUNT_ID, REGION

__all__ = ["GlueAdmin", "GlueTags"]

#: QuerySchemaVersionMetadataMaxResults: 1 to 50.
_MAX_METADATA_PAGE = 50
_ARN_PREFIX = f"arn:aws:glue:{REGION}:{ACCOUNT_ID}:"


class _Registry(Protocol):
    """What the calls here use of the registry (``_glue.FakeGlue``)."""

    registries: dict[str, dict[str, Any]]

    @property
    def tags(self) -> GlueTags: ...

    def arn(self, kind: str, *names: str) -> str: ...
    def registry_name(self, registry_id: Any, *, create_default: bool = False) -> str: ...
    def registry_answer(self, name: str) -> dict[str, Any]: ...
    def schemas(self) -> list[GlueSchema]: ...
    def schema(self, schema_id: Any) -> GlueSchema: ...
    def version_by_id(self, version_id: Any) -> GlueVersion: ...
    def version_by_number(self, schema: GlueSchema, wanted: Any) -> GlueVersion: ...
    def drop_versions(self, schema: GlueSchema, numbers: set[int]) -> None: ...


class GlueTags:
    """The tags of registries and schemas, by ARN (TagResource, UntagResource, GetTags and
    the ``Tags`` of CreateRegistry and CreateSchema)."""

    def __init__(self) -> None:
        self._by_arn: dict[str, dict[str, str]] = {}

    @classmethod
    def restored(cls, state: Any) -> GlueTags:
        """The tags :meth:`snapshot` gave."""
        tags = cls()
        tags._by_arn = {
            str(arn): {str(k): str(v) for k, v in t.items()} for arn, t in state.items()
        }
        return tags

    def snapshot(self) -> dict[str, dict[str, str]]:
        return {arn: dict(t) for arn, t in self._by_arn.items() if t}

    def of(self, arn: str) -> dict[str, str]:
        return dict(self._by_arn.get(arn, {}))

    def set(self, arn: str, tags: dict[str, str]) -> None:
        self._by_arn[arn] = dict(tags)

    def drop(self, arn: str) -> None:
        self._by_arn.pop(arn, None)


class GlueAdmin:
    """The calls served over ``registry`` (its ``op_<Operation>`` methods)."""

    def __init__(self, registry: _Registry) -> None:
        self._registry = registry

    # -- lists ----------------------------------------------------------------------------

    def op_ListRegistries(self, body: dict[str, Any]) -> dict[str, Any]:
        """By name, 25 a page unless ``MaxResults`` (1 to 100) says."""
        glue = self._registry
        names, extra = page("ListRegistries", body, sorted(glue.registries), lambda n: n)
        return {"Registries": [glue.registry_answer(n) for n in names], **extra}

    def op_ListSchemas(self, body: dict[str, Any]) -> dict[str, Any]:
        """ListSchemas: "When the RegistryId is not provided, all the schemas across
        registries will be part of the API response." By registry and name."""
        glue = self._registry
        schemas = glue.schemas()
        if body.get("RegistryId"):
            registry = glue.registry_name(body["RegistryId"])
            schemas = [s for s in schemas if s.registry == registry]
        shown, extra = page("ListSchemas", body, schemas, lambda s: [s.registry, s.name])
        items = [
            {
                "RegistryName": s.registry,
                "SchemaName": s.name,
                "SchemaArn": glue.arn("schema", s.registry, s.name),
                **({"Description": s.description} if s.description is not None else {}),
                "SchemaStatus": "AVAILABLE",
                "CreatedTime": timestamp(s.created),
                "UpdatedTime": timestamp(s.updated or s.created),
            }
            for s in shown
        ]
        return {"Schemas": items, **extra}

    def op_ListSchemaVersions(self, body: dict[str, Any]) -> dict[str, Any]:
        """ListSchemaVersions: "Schema versions in Deleted status will not be included in
        the results." By version number; a FAILURE version is listed with its status."""
        glue = self._registry
        schema = glue.schema(body.get("SchemaId"))
        shown, extra = page("ListSchemaVersions", body, schema.versions, lambda v: v.number)
        arn = glue.arn("schema", schema.registry, schema.name)
        items = [
            {
                "SchemaArn": arn,
                "SchemaVersionId": v.version_id,
                "VersionNumber": v.number,
                "Status": v.shown(read=False),
                "CreatedTime": timestamp(v.created),
            }
            for v in shown
        ]
        return {"Schemas": items, **extra}

    # -- schema settings ------------------------------------------------------------------

    def op_UpdateSchema(self, body: dict[str, Any]) -> dict[str, Any]:
        """UpdateSchema's documentation: "If the value for Compatibility is provided, the
        VersionNumber (a checkpoint) is also required. [...] If the value for the
        VersionNumber (checkpoint) is provided, Compatibility is optional and this can be
        used to set/reset a checkpoint for the schema."; SchemaVersionNumber: "One of
        VersionNumber or Compatibility has to be provided." (a Description alone is taken
        too: the call "Updates the description, compatibility setting, or version
        checkpoint"). The checkpoint must be an AVAILABLE version of the schema."""
        glue = self._registry
        schema = glue.schema(body.get("SchemaId"))
        compatibility = body.get("Compatibility")
        if compatibility is not None and compatibility not in COMPATIBILITIES:
            raise fail(INPUT, "Compatibility is not valid.")
        description = check_description(body.get("Description"))
        wanted = body.get("SchemaVersionNumber")
        if compatibility is not None and not wanted:
            raise fail(
                INPUT,
                "SchemaVersionNumber (the checkpoint) is required when Compatibility is given.",
            )
        if not wanted and description is None:
            raise fail(INPUT, "One of VersionNumber or Compatibility has to be provided.")
        checkpoint = None
        if wanted:
            version = glue.version_by_number(schema, wanted)
            if version.shown(read=False) != "AVAILABLE":
                raise fail(
                    INPUT,
                    f"Schema version {version.number} is {version.shown(read=False)}: only an "
                    "AVAILABLE version can be the checkpoint.",
                )
            checkpoint = version.number
        schema.update(compatibility=compatibility, description=description, checkpoint=checkpoint)
        return {
            "SchemaArn": glue.arn("schema", schema.registry, schema.name),
            "SchemaName": schema.name,
            "RegistryName": schema.registry,
        }

    # -- version deletion and validity ----------------------------------------------------

    def op_DeleteSchemaVersions(self, body: dict[str, Any]) -> dict[str, Any]:
        """DeleteSchemaVersions' documentation: ``Versions`` is "a single version number, 5"
        or "a range, 5-8"; "When the range of version numbers contain check pointed
        version, the API will return a 409 conflict and will not proceed with the deletion"
        (the code is not named: InvalidInputException here, nothing deleted); "You cannot
        use the DeleteSchemaVersions API to delete the first schema version in the schema
        set" and a number without a version are reported in ``SchemaVersionErrors``, the
        others deleted with their metadata."""
        glue = self._registry
        schema = glue.schema(body.get("SchemaId"))
        first, last = version_range(body.get("Versions"))
        if first <= schema.checkpoint <= last:
            raise fail(
                INPUT,
                f"Versions {first}-{last} contain the checkpoint, version {schema.checkpoint}: "
                "move the checkpoint (UpdateSchema) before deleting it.",
            )
        held = {v.number for v in schema.versions}
        earliest = min(held, default=0)
        errors: list[dict[str, Any]] = []
        doomed: set[int] = set()
        for number in range(first, last + 1):
            if number not in held:
                code, message = NOT_FOUND, f"Schema version is not found. VersionNumber: {number}"
            elif number == earliest:
                code = INPUT
                message = "The first schema version can only be deleted by DeleteSchema."
            else:
                doomed.add(number)
                continue
            errors.append(
                {
                    "VersionNumber": number,
                    "ErrorDetails": {"ErrorCode": code, "ErrorMessage": message},
                }
            )
        glue.drop_versions(schema, doomed)
        return {"SchemaVersionErrors": errors}

    def op_CheckSchemaVersionValidity(self, body: dict[str, Any]) -> dict[str, Any]:
        """CheckSchemaVersionValidity: "This call has no side effects [...] no compatibility
        checks are performed." ``Valid``, and ``Error`` (1 to 5,000 characters) when not."""
        data_format = body.get("DataFormat")
        if data_format not in FORMATS:
            raise fail(INPUT, "Data format is not valid.")
        definition = body.get("SchemaDefinition")
        if not isinstance(definition, str) or not definition.strip():
            raise fail(INPUT, "SchemaDefinition is required.")
        problem = definition_problem(data_format, definition)
        if problem is None:
            return {"Valid": True}
        return {"Valid": False, "Error": (problem or "not valid")[:5000]}

    # -- version metadata -----------------------------------------------------------------

    def _version(self, body: dict[str, Any]) -> GlueVersion:
        """The version a metadata call names: ``SchemaVersionId``, or ``SchemaId`` with
        ``SchemaVersionNumber``."""
        glue = self._registry
        if body.get("SchemaVersionId"):
            return glue.version_by_id(body["SchemaVersionId"])
        if body.get("SchemaId"):
            return glue.version_by_number(
                glue.schema(body["SchemaId"]), body.get("SchemaVersionNumber")
            )
        raise fail(INPUT, "One of SchemaVersionId or SchemaId has to be provided.")

    def _metadata_answer(self, version: GlueVersion, key: str, value: str) -> dict[str, Any]:
        glue = self._registry
        schema = glue.schema({"RegistryName": version.registry, "SchemaName": version.schema})
        return {
            "SchemaArn": glue.arn("schema", version.registry, version.schema),
            "SchemaName": version.schema,
            "RegistryName": version.registry,
            "LatestVersion": version is schema.versions[-1],
            "VersionNumber": version.number,
            "SchemaVersionId": version.version_id,
            "MetadataKey": key,
            "MetadataValue": value,
        }

    @staticmethod
    def _pair(body: dict[str, Any]) -> tuple[str, str]:
        pair = body.get("MetadataKeyValue")
        if not isinstance(pair, dict):
            raise fail(INPUT, "MetadataKeyValue is required: a MetadataKey and a MetadataValue.")
        key, value = pair.get("MetadataKey"), pair.get("MetadataValue")
        if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
            raise fail(INPUT, "MetadataKeyValue needs a MetadataKey and a MetadataValue.")
        return key, value

    def op_PutSchemaVersionMetadata(self, body: dict[str, Any]) -> dict[str, Any]:
        key, value = self._pair(body)
        version = self._version(body)
        if sum(len(v) for v in version.metadata.values()) >= MAX_METADATA:
            raise fail(
                LIMIT, "Your resource limits for Schema Version Metadata have been exceeded."
            )
        if value in version.metadata.get(key, []):
            raise fail(
                EXISTS,
                f"Resource already exist for schema version id: {version.version_id}, "
                f"metadata key: {key}, metadata value: {value}",
            )
        version.put_metadata(key, value)
        return self._metadata_answer(version, key, value)

    def op_QuerySchemaVersionMetadata(self, body: dict[str, Any]) -> dict[str, Any]:
        """Every key, or those ``MetadataList`` names (a pair with a value: that value);
        each key's latest value first, the others in ``OtherMetadataValueList``."""
        version = self._version(body)
        wanted = body.get("MetadataList")
        keys = sorted(version.metadata)
        if wanted:
            if not isinstance(wanted, list) or not all(isinstance(p, dict) for p in wanted):
                raise fail(INPUT, "MetadataList is not a list of MetadataKeyValuePair.")
            keys = [
                k
                for k in keys
                if any(
                    p.get("MetadataKey") == k
                    and p.get("MetadataValue") in (None, *version.metadata[k])
                    for p in wanted
                )
            ]
        shown, extra = page(
            "QuerySchemaVersionMetadata", body, keys, lambda k: k, max_results=_MAX_METADATA_PAGE
        )
        return {
            "MetadataInfoMap": {k: version.metadata_info(k) for k in shown},
            "SchemaVersionId": version.version_id,
            **extra,
        }

    def op_RemoveSchemaVersionMetadata(self, body: dict[str, Any]) -> dict[str, Any]:
        key, value = self._pair(body)
        version = self._version(body)
        if value not in version.metadata.get(key, []):
            raise fail(
                NOT_FOUND,
                f"Schema version metadata is not found. SchemaVersionId: {version.version_id}, "
                f"metadata key: {key}, metadata value: {value}",
            )
        version.remove_metadata(key, value)
        return self._metadata_answer(version, key, value)

    # -- tags -----------------------------------------------------------------------------

    def _resource(self, arn: Any) -> str:
        """A registry's or schema's ARN that names one the registry holds."""
        glue = self._registry
        if not isinstance(arn, str) or not arn:
            raise fail(INPUT, "ResourceArn is required.")
        kind = arn.removeprefix(_ARN_PREFIX).partition("/")[0]
        if not arn.startswith(_ARN_PREFIX) or kind not in ("registry", "schema"):
            raise fail(
                INPUT,
                f"ResourceArn is not a registry or schema ARN of this account: {arn}",
            )
        if kind == "registry":
            glue.registry_name({"RegistryArn": arn})
        else:
            glue.schema({"SchemaArn": arn})
        return arn

    def op_TagResource(self, body: dict[str, Any]) -> dict[str, Any]:
        arn = self._resource(body.get("ResourceArn"))
        if body.get("TagsToAdd") is None:
            raise fail(INPUT, "TagsToAdd is required.")
        adding = check_tags(body["TagsToAdd"], "TagsToAdd")
        tags = self._registry.tags
        merged = tags.of(arn) | adding
        if len(merged) > MAX_TAGS:
            raise fail(INPUT, f"TagsToAdd: at most {MAX_TAGS} tags a resource.")
        tags.set(arn, merged)
        return {}

    def op_UntagResource(self, body: dict[str, Any]) -> dict[str, Any]:
        arn = self._resource(body.get("ResourceArn"))
        keys = body.get("TagsToRemove")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise fail(INPUT, "TagsToRemove is required: a list of tag keys.")
        tags = self._registry.tags
        tags.set(arn, {k: v for k, v in tags.of(arn).items() if k not in keys})
        return {}

    def op_GetTags(self, body: dict[str, Any]) -> dict[str, Any]:
        arn = self._resource(body.get("ResourceArn"))
        return {"Tags": self._registry.tags.of(arn)}
