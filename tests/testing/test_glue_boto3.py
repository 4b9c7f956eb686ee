"""The local engine's Glue Schema Registry through boto3's glue client (``endpoint_url``):
every schema-registry operation the engine serves, as a user's tooling calls it.

boto3 validates each request against botocore's glue model (``glue/2017-03-31``) and parses
each answer with it; every successful answer is also checked against the operation's
output shape (required members, enums, lengths, ranges, members the model does not name:
``test_boto3._check_answer``'s rules) and the string patterns Python's ``re`` can compile
(:func:`_pattern_violations`, matched in full; the model's DescriptionString class is
written in UTF-16 surrogates, which ``re`` refuses, so the engine checks descriptions
itself), and every error's code against the operation's error shapes.

Where the model's documentation decides a behaviour, the test's docstring quotes it. The
session's ``python_engine`` is shared: each test names its registries and schemas anew and
leaves ``default-registry`` alone.
"""

from __future__ import annotations

import datetime
import re
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support.emulators import EmulatorEndpoint
from tests.testing.test_boto3 import _shape_violations

pytestmark = pytest.mark.integration

AVRO_V1 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"int"}]}'
AVRO_V2 = (
    '{"type":"record","name":"Order","fields":[{"name":"id","type":"int"},'
    '{"name":"note","type":"string","default":""}]}'
)
#: "id" changes type: no reader of one reads the other
AVRO_BAD = '{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}'


def _avro(*fields: str) -> str:
    """An Avro record of optional string fields (each a compatible step from the last)."""
    items = ['{"name":"id","type":"int"}']
    items += [f'{{"name":"{f}","type":"string","default":""}}' for f in fields]
    return f'{{"type":"record","name":"Order","fields":[{",".join(items)}]}}'


def _pattern_violations(shape: Any, value: Any, path: str) -> list[str]:
    """Where ``value`` breaks a string pattern of ``shape`` that Python can compile."""
    kind = shape.type_name
    found: list[str] = []
    if kind == "structure" and isinstance(value, dict):
        for member, item in value.items():
            if member in shape.members:
                found += _pattern_violations(shape.members[member], item, f"{path}.{member}")
    elif kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            found += _pattern_violations(shape.member, item, f"{path}[{i}]")
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            found += _pattern_violations(shape.value, item, f"{path}[{key!r}]")
    elif kind == "string" and isinstance(value, str) and shape.metadata.get("pattern"):
        try:
            pattern = re.compile(shape.metadata["pattern"])
        except re.error:  # a UTF-16 surrogate class (DescriptionString)
            return []
        if not pattern.fullmatch(value):
            found.append(f"{path}: {value!r} does not match {pattern.pattern}")
    return found


def _check_glue_answer(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
    """``after-call`` hook: a successful answer follows the operation's output shape; an
    error's code is one the model lists for the operation."""
    if http_response.status_code >= 300:
        code = parsed["Error"]["Code"]
        assert code in {e.name for e in model.error_shapes}, f"{model.name} answered {code}"
        return
    if model.output_shape is None:
        return
    body = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
    found = _shape_violations(model.output_shape, body, model.name, patterns=False)
    found += _pattern_violations(model.output_shape, body, model.name)
    assert not found, f"{model.name} answered outside the model: {found}"


def glue_client(endpoint_url: str, *, validate: bool = True) -> Any:
    """boto3's glue client of the engine: dummy credentials, us-east-1, no retries."""
    session = boto3.session.Session(
        aws_access_key_id="AKIDLOCALENGINE",
        aws_secret_access_key="local-engine-secret",
        region_name="us-east-1",
    )
    client = session.client(
        "glue",
        endpoint_url=endpoint_url,
        config=Config(
            retries={"total_max_attempts": 1},
            connect_timeout=5,
            read_timeout=60,
            parameter_validation=validate,
        ),
    )
    client.meta.events.register("after-call.glue", _check_glue_answer)
    return client


@pytest.fixture(scope="module")
def glue(python_engine: EmulatorEndpoint) -> Any:
    return glue_client(python_engine.endpoint_url)


@pytest.fixture(scope="module")
def unvalidated(python_engine: EmulatorEndpoint) -> Any:
    """The same without boto3's parameter validation: bad arguments reach the engine."""
    return glue_client(python_engine.endpoint_url, validate=False)


@pytest.fixture
def registry(glue: Any) -> str:
    """A registry no other test uses."""
    name = f"reg-{uuid.uuid4().hex[:10]}"
    glue.create_registry(RegistryName=name)
    return name


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> str:
    """Error.Code of a ClientError, after checking it has a message and HTTP 400."""
    response = exc.value.response
    assert response["Error"]["Message"], response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400, response
    return str(response["Error"]["Code"])


def schema_id(registry: str, name: str) -> dict[str, str]:
    return {"RegistryName": registry, "SchemaName": name}


def recent(text: str) -> datetime.datetime:
    """A CreatedTime/UpdatedTime string, checked to be an ISO 8601 time of the last hour."""
    assert isinstance(text, str), text
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs(now - moment) < datetime.timedelta(hours=1), text
    return moment


# -- the model ----------------------------------------------------------------------------


def test_the_registry_times_are_strings_in_the_model(glue: Any) -> None:
    """Every CreatedTime/UpdatedTime of the registry calls is a CreatedTimestamp or
    UpdatedTimestamp shape, ``"type": "string"`` in glue/2017-03-31/service-2.json: botocore
    hands them over unparsed, so the engine answers ISO 8601 strings."""
    model = glue.meta.service_model
    assert model.shape_for("CreatedTimestamp").type_name == "string"
    assert model.shape_for("UpdatedTimestamp").type_name == "string"
    for operation, members in [
        ("GetRegistry", ("CreatedTime", "UpdatedTime")),
        ("GetSchema", ("CreatedTime", "UpdatedTime")),
        ("GetSchemaVersion", ("CreatedTime",)),
        ("GetSchemaByDefinition", ("CreatedTime",)),
    ]:
        output = model.operation_model(operation).output_shape
        assert [output.members[m].type_name for m in members] == ["string"] * len(members)


# -- registries ---------------------------------------------------------------------------


def test_a_registry_is_created_described_updated_and_deleted(glue: Any) -> None:
    """DeleteRegistry: "Delete the entire registry including schema and all of its
    versions."; DeleteRegistryResponse.Status: "A successful operation will return the
    Deleting status." The engine finishes the deletion before it answers. Source: the
    model's documentation, as the Glue API reference gives it (https://docs.aws.amazon.com/glue/latest/webapi/API_DeleteRegistry.html)."""
    name = f"reg-{uuid.uuid4().hex[:10]}"
    created = glue.create_registry(RegistryName=name, Description="ours", Tags={"team": "pay"})
    arn = f"arn:aws:glue:us-east-1:123456789012:registry/{name}"
    assert (created["RegistryName"], created["RegistryArn"]) == (name, arn)
    assert created["Description"] == "ours" and created["Tags"] == {"team": "pay"}
    found = glue.get_registry(RegistryId={"RegistryName": name})
    assert found["Status"] == "AVAILABLE" and found["Description"] == "ours"
    assert recent(found["CreatedTime"]) == recent(found["UpdatedTime"])
    assert glue.get_tags(ResourceArn=arn)["Tags"] == {"team": "pay"}

    updated = glue.update_registry(RegistryId={"RegistryArn": arn}, Description="theirs")
    assert (updated["RegistryName"], updated["RegistryArn"]) == (name, arn)
    again = glue.get_registry(RegistryId={"RegistryArn": arn})
    assert again["Description"] == "theirs"
    assert recent(again["UpdatedTime"]) >= recent(again["CreatedTime"])

    glue.create_schema(
        RegistryId={"RegistryName": name},
        SchemaName="orders",
        DataFormat="AVRO",
        SchemaDefinition=AVRO_V1,
    )
    version = glue.get_schema_version(
        SchemaId=schema_id(name, "orders"), SchemaVersionNumber={"LatestVersion": True}
    )["SchemaVersionId"]
    deleted = glue.delete_registry(RegistryId={"RegistryName": name})
    assert deleted == deleted | {"RegistryName": name, "RegistryArn": arn, "Status": "DELETING"}
    for call, args in [
        (glue.get_registry, {"RegistryId": {"RegistryName": name}}),
        (glue.get_schema, {"SchemaId": schema_id(name, "orders")}),
        (glue.get_schema_version, {"SchemaVersionId": version}),
        (glue.get_tags, {"ResourceArn": arn}),
        (glue.delete_registry, {"RegistryId": {"RegistryName": name}}),
    ]:
        with pytest.raises(ClientError) as gone:
            call(**args)
        assert code_of(gone) == "EntityNotFoundException", call
    glue.create_registry(RegistryName=name)  # the name is free again
    assert glue.get_tags(ResourceArn=arn)["Tags"] == {}
    with pytest.raises(ClientError) as taken:
        glue.create_registry(RegistryName=name)
    assert code_of(taken) == "AlreadyExistsException"
    glue.delete_registry(RegistryId={"RegistryName": name})


def test_registries_are_listed_page_by_page(glue: Any) -> None:
    """ListRegistries: MaxResults 1 to 100, "defaulted to 25 per page", NextToken while
    more follow; botocore's paginator (paginators-1.json) walks them."""
    mine = {f"list-{uuid.uuid4().hex[:10]}" for _ in range(5)}
    for name in mine:
        glue.create_registry(RegistryName=name, Description=f"registry {name}")
    pages = list(glue.get_paginator("list_registries").paginate(PaginationConfig={"PageSize": 2}))
    listed = [r for p in pages for r in p["Registries"]]
    names = [r["RegistryName"] for r in listed]
    assert len(names) == len(set(names)), "a registry listed twice"
    assert mine <= set(names)
    assert all(len(p["Registries"]) <= 2 for p in pages)
    assert all("NextToken" in p for p in pages[:-1]) and "NextToken" not in pages[-1]
    for item in listed:
        if item["RegistryName"] in mine:
            assert item["Status"] == "AVAILABLE"
            assert item["Description"] == f"registry {item['RegistryName']}"
            assert recent(item["UpdatedTime"]) >= recent(item["CreatedTime"])
    first = glue.list_registries(MaxResults=1)
    assert len(first["Registries"]) == 1 and first["NextToken"]


def test_a_bad_page_request_is_invalid_input(glue: Any, unvalidated: Any, registry: str) -> None:
    cases: list[tuple[Any, dict[str, Any]]] = [
        (glue.list_registries, {"NextToken": "not-a-token"}),
        (glue.list_schemas, {"NextToken": "bm90IGpzb24="}),
        (unvalidated.list_schemas, {"MaxResults": 0}),
        (unvalidated.list_schemas, {"MaxResults": 101}),
    ]
    for call, args in cases:
        with pytest.raises(ClientError) as refused:
            call(**args)
        assert code_of(refused) == "InvalidInputException", args
    # a token of one list is not a token of another
    for n in range(3):
        glue.create_schema(
            RegistryId={"RegistryName": registry}, SchemaName=f"s{n}", DataFormat="AVRO"
        )
    token = glue.list_schemas(RegistryId={"RegistryName": registry}, MaxResults=1)["NextToken"]
    with pytest.raises(ClientError) as refused:
        glue.list_registries(NextToken=token)
    assert code_of(refused) == "InvalidInputException"


# -- schemas ------------------------------------------------------------------------------


def test_a_schema_keeps_its_description_and_tags(glue: Any, registry: str) -> None:
    """CreateSchemaInput.Description: "If description is not provided, there will not be
    any automatic default value for this."; Tags "follows the Amazon Web Services
    tags-on-create pattern" (CreateSchemaResponse.Tags, GetTags)."""
    created = glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        Compatibility="FULL",
        Description="orders as the shop sends them",
        Tags={"team": "shop", "tier": "1"},
        SchemaDefinition=AVRO_V1,
    )
    assert created["Description"] == "orders as the shop sends them"
    assert created["Tags"] == {"team": "shop", "tier": "1"}
    assert (created["SchemaCheckpoint"], created["LatestSchemaVersion"]) == (1, 1)
    assert (created["NextSchemaVersion"], created["SchemaVersionStatus"]) == (2, "AVAILABLE")
    found = glue.get_schema(SchemaId=schema_id(registry, "orders"))
    assert found["Description"] == "orders as the shop sends them"
    assert found["Compatibility"] == "FULL" and found["SchemaStatus"] == "AVAILABLE"
    assert recent(found["UpdatedTime"]) >= recent(found["CreatedTime"])
    assert glue.get_tags(ResourceArn=found["SchemaArn"])["Tags"] == created["Tags"]

    bare = glue.create_schema(
        RegistryId={"RegistryName": registry}, SchemaName="bare", DataFormat="JSON"
    )
    assert "Description" not in bare and "Tags" not in bare
    assert "LatestSchemaVersion" not in bare  # no version yet (VersionLongNumber: min 1)
    assert "Description" not in glue.get_schema(SchemaId=schema_id(registry, "bare"))
    assert glue.get_tags(ResourceArn=bare["SchemaArn"])["Tags"] == {}


def test_schemas_are_listed_page_by_page(glue: Any, registry: str) -> None:
    """ListSchemas: "When the RegistryId is not provided, all the schemas across
    registries will be part of the API response."; an unknown registry is not found."""
    names = [f"schema-{n}" for n in range(7)]
    for name in names:
        glue.create_schema(
            RegistryId={"RegistryName": registry},
            SchemaName=name,
            DataFormat="AVRO",
            Description=f"about {name}",
            SchemaDefinition=AVRO_V1,
        )
    pages = list(
        glue.get_paginator("list_schemas").paginate(
            RegistryId={"RegistryName": registry}, PaginationConfig={"PageSize": 3}
        )
    )
    assert [len(p["Schemas"]) for p in pages] == [3, 3, 1]
    listed = [s for p in pages for s in p["Schemas"]]
    assert [s["SchemaName"] for s in listed] == names
    first = listed[0]
    assert first["RegistryName"] == registry and first["SchemaStatus"] == "AVAILABLE"
    assert first["Description"] == "about schema-0"
    assert first["SchemaArn"] == f"arn:aws:glue:us-east-1:123456789012:schema/{registry}/schema-0"
    assert recent(first["UpdatedTime"]) >= recent(first["CreatedTime"])

    everywhere = [
        (s["RegistryName"], s["SchemaName"])
        for p in glue.get_paginator("list_schemas").paginate()
        for s in p["Schemas"]
    ]
    assert {(registry, n) for n in names} <= set(everywhere)
    with pytest.raises(ClientError) as unknown:
        glue.list_schemas(RegistryId={"RegistryName": f"none-{uuid.uuid4().hex[:8]}"})
    assert code_of(unknown) == "EntityNotFoundException"


def test_update_schema_changes_compatibility_description_and_checkpoint(
    glue: Any, registry: str
) -> None:
    """UpdateSchema: "If the value for Compatibility is provided, the VersionNumber (a
    checkpoint) is also required."; SchemaCheckpoint: "The version number of the
    checkpoint (the last time the compatibility mode was changed)": a later version is
    checked against the versions from the checkpoint on."""
    ref = schema_id(registry, "orders")
    glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        Compatibility="BACKWARD",
        SchemaDefinition=AVRO_V1,
    )
    assert glue.register_schema_version(SchemaId=ref, SchemaDefinition=AVRO_BAD)["Status"] == (
        "FAILURE"
    )
    with pytest.raises(ClientError) as no_checkpoint:
        glue.update_schema(SchemaId=ref, Compatibility="NONE")
    assert code_of(no_checkpoint) == "InvalidInputException"
    with pytest.raises(ClientError) as failed_checkpoint:  # version 2 is FAILURE
        glue.update_schema(
            SchemaId=ref, Compatibility="NONE", SchemaVersionNumber={"VersionNumber": 2}
        )
    assert code_of(failed_checkpoint) == "InvalidInputException"
    with pytest.raises(ClientError) as no_version:
        glue.update_schema(SchemaId=ref, SchemaVersionNumber={"VersionNumber": 9})
    assert code_of(no_version) == "EntityNotFoundException"
    with pytest.raises(ClientError) as nothing:
        glue.update_schema(SchemaId=ref)
    assert code_of(nothing) == "InvalidInputException"

    answer = glue.update_schema(
        SchemaId=ref,
        Compatibility="NONE",
        SchemaVersionNumber={"VersionNumber": 1},
        Description="now anything goes",
    )
    assert answer == answer | {"SchemaName": "orders", "RegistryName": registry}
    schema = glue.get_schema(SchemaId=ref)
    assert (schema["Compatibility"], schema["SchemaCheckpoint"]) == ("NONE", 1)
    assert schema["Description"] == "now anything goes"
    # NONE: the type change is a version now (another definition than the FAILURE one)
    changed = AVRO_BAD.replace('"string"}', '"string","doc":"text ids"}')
    third = glue.register_schema_version(SchemaId=ref, SchemaDefinition=changed)
    assert (third["VersionNumber"], third["Status"]) == (3, "AVAILABLE")

    # BACKWARD_ALL from version 3 on: version 1 (an int id) is no longer checked
    glue.update_schema(
        SchemaId=ref, Compatibility="BACKWARD_ALL", SchemaVersionNumber={"LatestVersion": True}
    )
    assert glue.get_schema(SchemaId=ref)["SchemaCheckpoint"] == 3
    fourth = glue.register_schema_version(
        SchemaId=ref, SchemaDefinition=changed.replace("text ids", "still text")
    )
    assert fourth["Status"] == "AVAILABLE"
    assert glue.register_schema_version(SchemaId=ref, SchemaDefinition=AVRO_V2)["Status"] == (
        "FAILURE"
    )
    glue.update_schema(SchemaId=ref, Description="only the description")
    assert glue.get_schema(SchemaId=ref)["Description"] == "only the description"


def test_check_schema_version_validity(glue: Any) -> None:
    """CheckSchemaVersionValidity: "This call has no side effects [...] no compatibility
    checks are performed." Error: 1 to 5,000 characters."""
    for data_format, definition in [("AVRO", AVRO_V1), ("JSON", '{"type": "object"}')]:
        answer = glue.check_schema_version_validity(
            DataFormat=data_format, SchemaDefinition=definition
        )
        assert answer["Valid"] is True and "Error" not in answer
    for data_format, definition in [
        ("AVRO", '{"type": "record", "name": "r"}'),
        ("JSON", "{not json"),
        ("PROTOBUF", "syntax = 'proto3';"),
    ]:
        answer = glue.check_schema_version_validity(
            DataFormat=data_format, SchemaDefinition=definition
        )
        assert answer["Valid"] is False and answer["Error"], answer


# -- versions -----------------------------------------------------------------------------


def test_versions_are_listed_and_deleted(glue: Any, unvalidated: Any, registry: str) -> None:
    """DeleteSchemaVersions: Versions is "a single version number, 5" or "a range, 5-8";
    "When the range of version numbers contain check pointed version, the API will return
    a 409 conflict and will not proceed with the deletion" (the code not named: the engine
    answers InvalidInputException); "You cannot use the DeleteSchemaVersions API to delete
    the first schema version in the schema set"; "This operation will also delete the
    attached SchemaVersionMetadata". ListSchemaVersions: "Schema versions in Deleted status
    will not be included in the results."; GetSchemaVersion: "Schema versions in Deleted
    status will not be included in the results." (EntityNotFoundException). Sources: the
    model's documentation, as the Glue API reference gives it
    (https://docs.aws.amazon.com/glue/latest/webapi/API_DeleteSchemaVersions.html,
    API_ListSchemaVersions.html and API_GetSchemaVersion.html)."""
    ref = schema_id(registry, "orders")
    glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        Compatibility="BACKWARD",
        SchemaDefinition=_avro(),
    )
    ids = {1: _version_id(glue, ref, 1)}
    for n in range(2, 7):
        ids[n] = glue.register_schema_version(
            SchemaId=ref, SchemaDefinition=_avro(*[f"f{i}" for i in range(2, n + 1)])
        )["SchemaVersionId"]
    pages = list(
        glue.get_paginator("list_schema_versions").paginate(
            SchemaId=ref, PaginationConfig={"PageSize": 4}
        )
    )
    assert [len(p["Schemas"]) for p in pages] == [4, 2]
    listed = [v for p in pages for v in p["Schemas"]]
    assert [(v["VersionNumber"], v["SchemaVersionId"]) for v in listed] == sorted(ids.items())
    assert {v["Status"] for v in listed} == {"AVAILABLE"}
    recent(listed[0]["CreatedTime"])
    glue.put_schema_version_metadata(
        SchemaVersionId=ids[3], MetadataKeyValue={"MetadataKey": "k", "MetadataValue": "v"}
    )

    assert glue.delete_schema_versions(SchemaId=ref, Versions="3-4")["SchemaVersionErrors"] == []
    assert _numbers(glue, ref) == [1, 2, 5, 6]
    for gone in (3, 4):
        with pytest.raises(ClientError) as by_id:
            glue.get_schema_version(SchemaVersionId=ids[gone])
        assert code_of(by_id) == "EntityNotFoundException"
        with pytest.raises(ClientError) as by_number:
            glue.get_schema_version(SchemaId=ref, SchemaVersionNumber={"VersionNumber": gone})
        assert code_of(by_number) == "EntityNotFoundException"
    with pytest.raises(ClientError) as no_metadata:
        glue.query_schema_version_metadata(SchemaVersionId=ids[3])
    assert code_of(no_metadata) == "EntityNotFoundException"

    # the checkpoint (version 1 until UpdateSchema moves it): nothing deleted
    with pytest.raises(ClientError) as checkpoint:
        glue.delete_schema_versions(SchemaId=ref, Versions="1-2")
    assert code_of(checkpoint) == "InvalidInputException"
    assert _numbers(glue, ref) == [1, 2, 5, 6]
    glue.update_schema(SchemaId=ref, SchemaVersionNumber={"VersionNumber": 5})
    errors = glue.delete_schema_versions(SchemaId=ref, Versions="1-3")["SchemaVersionErrors"]
    assert [(e["VersionNumber"], e["ErrorDetails"]["ErrorCode"]) for e in errors] == [
        (1, "InvalidInputException"),  # the first version
        (3, "EntityNotFoundException"),  # deleted before
    ]
    assert all(e["ErrorDetails"]["ErrorMessage"] for e in errors)
    assert _numbers(glue, ref) == [1, 5, 6]

    # the latest goes: numbers are not handed out again
    glue.delete_schema_versions(SchemaId=ref, Versions="6")
    schema = glue.get_schema(SchemaId=ref)
    assert (schema["LatestSchemaVersion"], schema["NextSchemaVersion"]) == (5, 7)
    again = glue.register_schema_version(
        SchemaId=ref, SchemaDefinition=_avro("f2", "f3", "f4", "f5", "f6")
    )
    assert again["VersionNumber"] == 7 and again["SchemaVersionId"] != ids[6]

    for bad in ("1-5,7", "0", "5-3", "x", "1-1001"):
        with pytest.raises(ClientError) as refused:
            unvalidated.delete_schema_versions(SchemaId=ref, Versions=bad)
        assert code_of(refused) == "InvalidInputException", bad
    assert _numbers(glue, ref) == [1, 5, 7]


def _version_id(glue: Any, ref: dict[str, str], number: int) -> str:
    return str(
        glue.get_schema_version(SchemaId=ref, SchemaVersionNumber={"VersionNumber": number})[
            "SchemaVersionId"
        ]
    )


def _numbers(glue: Any, ref: dict[str, str]) -> list[int]:
    return [v["VersionNumber"] for v in glue.list_schema_versions(SchemaId=ref)["Schemas"]]


def test_a_deleted_schema_is_gone_and_can_be_made_again(glue: Any, registry: str) -> None:
    """DeleteSchema: "Deletes the entire schema set, including the schema set and all of
    its versions." (Status DELETING in the answer, gone for the next call). Source: the
    model's documentation, as the Glue API reference gives it (https://docs.aws.amazon.com/glue/latest/webapi/API_DeleteSchema.html)."""
    ref = schema_id(registry, "orders")
    created = glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        Tags={"a": "b"},
        SchemaDefinition=AVRO_V1,
    )
    deleted = glue.delete_schema(SchemaId={"SchemaArn": created["SchemaArn"]})
    assert deleted == deleted | {
        "SchemaArn": created["SchemaArn"],
        "SchemaName": "orders",
        "Status": "DELETING",
    }
    for call, args in [
        (glue.get_schema, {"SchemaId": ref}),
        (glue.get_schema_version, {"SchemaVersionId": created["SchemaVersionId"]}),
        (glue.get_schema_by_definition, {"SchemaId": ref, "SchemaDefinition": AVRO_V1}),
        (glue.register_schema_version, {"SchemaId": ref, "SchemaDefinition": AVRO_V2}),
        (glue.list_schema_versions, {"SchemaId": ref}),
        (glue.get_tags, {"ResourceArn": created["SchemaArn"]}),
        (glue.delete_schema, {"SchemaId": ref}),
    ]:
        with pytest.raises(ClientError) as gone:
            call(**args)
        assert code_of(gone) == "EntityNotFoundException", call
    assert glue.list_schemas(RegistryId={"RegistryName": registry})["Schemas"] == []
    remade = glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        SchemaDefinition=AVRO_V1,
    )
    assert remade["SchemaVersionId"] != created["SchemaVersionId"]
    assert remade["LatestSchemaVersion"] == 1
    assert glue.get_tags(ResourceArn=remade["SchemaArn"])["Tags"] == {}


def test_get_schema_by_definition_answers_a_string_created_time(glue: Any, registry: str) -> None:
    """GetSchemaByDefinitionResponse.CreatedTime is a CreatedTimestamp: a string."""
    ref = schema_id(registry, "orders")
    glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        SchemaDefinition=AVRO_V1,
    )
    found = glue.get_schema_by_definition(SchemaId=ref, SchemaDefinition=AVRO_V1)
    version = glue.get_schema_version(SchemaVersionId=found["SchemaVersionId"])
    assert recent(found["CreatedTime"]) == recent(version["CreatedTime"])
    assert (found["Status"], found["DataFormat"]) == ("AVAILABLE", "AVRO")


# -- metadata and tags --------------------------------------------------------------------


def test_version_metadata_is_put_queried_and_removed(glue: Any, registry: str) -> None:
    """Put/Query/RemoveSchemaVersionMetadata name the version by SchemaVersionId or by
    SchemaId with SchemaVersionNumber; a key's other values come in OtherMetadataValueList."""
    ref = schema_id(registry, "orders")
    created = glue.create_schema(
        RegistryId={"RegistryName": registry},
        SchemaName="orders",
        DataFormat="AVRO",
        SchemaDefinition=AVRO_V1,
    )
    version = created["SchemaVersionId"]
    put = glue.put_schema_version_metadata(
        SchemaVersionId=version, MetadataKeyValue={"MetadataKey": "team", "MetadataValue": "shop"}
    )
    assert put == put | {
        "SchemaArn": created["SchemaArn"],
        "SchemaName": "orders",
        "RegistryName": registry,
        "LatestVersion": True,
        "VersionNumber": 1,
        "SchemaVersionId": version,
        "MetadataKey": "team",
        "MetadataValue": "shop",
    }
    glue.put_schema_version_metadata(
        SchemaId=ref,
        SchemaVersionNumber={"VersionNumber": 1},
        MetadataKeyValue={"MetadataKey": "team", "MetadataValue": "pay"},
    )
    glue.put_schema_version_metadata(
        SchemaId=ref,
        SchemaVersionNumber={"LatestVersion": True},
        MetadataKeyValue={"MetadataKey": "owner", "MetadataValue": "ops"},
    )
    everything = glue.query_schema_version_metadata(SchemaVersionId=version)
    info = everything["MetadataInfoMap"]
    assert set(info) == {"team", "owner"} and everything["SchemaVersionId"] == version
    assert info["team"]["MetadataValue"] == "pay"
    assert [o["MetadataValue"] for o in info["team"]["OtherMetadataValueList"]] == ["shop"]
    recent(info["team"]["CreatedTime"])
    recent(info["team"]["OtherMetadataValueList"][0]["CreatedTime"])
    only = glue.query_schema_version_metadata(
        SchemaId=ref,
        SchemaVersionNumber={"VersionNumber": 1},
        MetadataList=[{"MetadataKey": "owner"}],
    )
    assert set(only["MetadataInfoMap"]) == {"owner"}
    paged = glue.query_schema_version_metadata(SchemaVersionId=version, MaxResults=1)
    assert len(paged["MetadataInfoMap"]) == 1 and paged["NextToken"]

    removed = glue.remove_schema_version_metadata(
        SchemaVersionId=version, MetadataKeyValue={"MetadataKey": "team", "MetadataValue": "pay"}
    )
    assert (removed["MetadataKey"], removed["MetadataValue"]) == ("team", "pay")
    after = glue.query_schema_version_metadata(SchemaVersionId=version)["MetadataInfoMap"]
    assert after["team"]["MetadataValue"] == "shop"
    assert after["team"]["OtherMetadataValueList"] == []
    with pytest.raises(ClientError) as twice:
        glue.remove_schema_version_metadata(
            SchemaVersionId=version,
            MetadataKeyValue={"MetadataKey": "team", "MetadataValue": "pay"},
        )
    assert code_of(twice) == "EntityNotFoundException"


def test_tags_are_added_removed_and_read(glue: Any, unvalidated: Any, registry: str) -> None:
    """TagResource, UntagResource, GetTags on a registry's and a schema's ARN (TagsMap: at
    most 50 pairs); an ARN naming nothing is not found."""
    arn = glue.create_schema(
        RegistryId={"RegistryName": registry}, SchemaName="orders", DataFormat="AVRO"
    )["SchemaArn"]
    glue.tag_resource(ResourceArn=arn, TagsToAdd={"a": "1", "b": "2"})
    assert glue.get_tags(ResourceArn=arn)["Tags"] == {"a": "1", "b": "2"}
    glue.tag_resource(ResourceArn=arn, TagsToAdd={"b": "3", "c": ""})
    assert glue.get_tags(ResourceArn=arn)["Tags"] == {"a": "1", "b": "3", "c": ""}
    glue.untag_resource(ResourceArn=arn, TagsToRemove=["a", "missing"])
    assert glue.get_tags(ResourceArn=arn)["Tags"] == {"b": "3", "c": ""}
    registry_arn = f"arn:aws:glue:us-east-1:123456789012:registry/{registry}"
    glue.tag_resource(ResourceArn=registry_arn, TagsToAdd={"env": "dev"})
    assert glue.get_tags(ResourceArn=registry_arn)["Tags"] == {"env": "dev"}

    with pytest.raises(ClientError) as too_many:
        unvalidated.tag_resource(ResourceArn=arn, TagsToAdd={f"k{i}": "v" for i in range(49)})
    assert code_of(too_many) == "InvalidInputException"
    assert glue.get_tags(ResourceArn=arn)["Tags"] == {"b": "3", "c": ""}
    for missing in (f"{arn}-gone", f"arn:aws:glue:us-east-1:123456789012:registry/{registry}-x"):
        with pytest.raises(ClientError) as unknown:
            glue.get_tags(ResourceArn=missing)
        assert code_of(unknown) == "EntityNotFoundException", missing
    with pytest.raises(ClientError) as other:
        glue.get_tags(ResourceArn="arn:aws:glue:us-east-1:123456789012:database/x")
    assert code_of(other) == "InvalidInputException"
