"""PROTOBUF schemas from generated classes register what the AWS Java serde registers.

The vectors (``gsr/generated/java-definitions.jsonl``) are the Java serializer's own
``getSchemaDefinition`` for each top-level message of ``gsr/generated/*.proto``, compiled by
grpcio-tools' protoc; ``bash tests/compat/gsr/regenerate.sh`` writes them again (its last
two commands). Our definitions are compared as text, character for character: the local
engine, like Glue for PROTOBUF as far as we know, finds a version by its definition's text,
so only the same text is the same version.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from kinesis_trio._aws._glue import GlueClient
from kinesis_trio.gsr import GlueSchemaRegistry, ProtobufSchema
from kinesis_trio.gsr._proto_text import class_definition
from kinesis_trio.gsr._protobuf import compile_definition, message_table
from tests.gsr.conftest import CREDS
from tests.support.emulators import EmulatorEndpoint
from tests.support.gsr import GSR_DIR, read_jsonl
from tests.support.gsr_generated import (
    PROTOS,
    descriptor_set,
    generated_modules,
    java_definitions,
    message_of,
)


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    return generated_modules(tmp_path_factory.mktemp("generated"))


def test_the_vectors_cover_every_top_level_message(modules: dict[str, ModuleType]) -> None:
    rows = {(r["file"], r["message"]) for r in java_definitions()}
    ours = {
        (name, m.full_name)
        for name, module in modules.items()
        for m in module.DESCRIPTOR.message_types_by_name.values()
    }
    assert rows == ours
    assert {r["file"] for r in java_definitions()} == set(PROTOS)


def test_a_generated_class_registers_the_java_serdes_definition(
    modules: dict[str, ModuleType],
) -> None:
    for row in java_definitions():
        cls = message_of(modules[row["file"]], row["message"])
        schema = ProtobufSchema("orders", cls)
        assert schema.spec.definition == row["definition"], row["message"]


def test_the_definition_reads_back_with_the_classes_message_indexes(
    modules: dict[str, ModuleType],
) -> None:
    """A reader of the registered text (ours; Java's parses the same text) numbers the
    messages as the writer does: the records' message indexes agree."""
    for row in java_definitions():
        cls = message_of(modules[row["file"]], row["message"])
        theirs = [d.full_name for d in message_table(compile_definition(row["definition"]))]
        assert theirs == [d.full_name for d in message_table(cls.DESCRIPTOR.file)]


def test_a_given_definition_is_kept_as_given(modules: dict[str, ModuleType]) -> None:
    cls = message_of(modules["kt_imports.proto"], "kt.gen.imports.Event")
    text = (GSR_DIR / "generated" / "kt_imports.proto").read_text()
    assert ProtobufSchema("events", cls, text).spec.definition == text
    assert ProtobufSchema("events", cls).spec.definition == class_definition(cls) != text


@pytest.mark.anyio
async def test_python_and_java_producers_share_one_version(
    python_engine: EmulatorEndpoint, modules: dict[str, ModuleType]
) -> None:
    """Ours registers first (on the local engine); a Java producer's lookup of the text it
    derives finds that version, and a schema given the Java text finds it too."""
    row = next(r for r in java_definitions() if r["message"] == "kt.gen.nested.Order")
    cls = message_of(modules["kt_nested.proto"], row["message"])
    name = f"orders-{uuid.uuid4().hex[:10]}"
    glue = GlueClient(
        region_name="us-east-1", endpoint_url=python_engine.endpoint_url, credentials=CREDS
    )
    async with GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.01) as registry:
        ours = await registry.version_for(ProtobufSchema(name, cls).spec)
        found = await glue.get_schema_by_definition("default-registry", name, row["definition"])
        assert found["SchemaVersionId"] == str(ours)
        assert found["Status"] == "AVAILABLE"
        given = ProtobufSchema(name, cls, row["definition"], check=True)
        assert await GlueSchemaRegistry(glue).version_for(given.spec) == ours
        assert (await glue.get_schema_version(str(ours)))["VersionNumber"] == 1


@pytest.mark.integration
@pytest.mark.subprocess
@pytest.mark.skipif(
    not (shutil.which("java") and shutil.which("mvn")), reason="needs Java 17+ and Maven"
)
def test_the_java_serde_derives_now_what_we_derive(
    tmp_path: Path, modules: dict[str, ModuleType]
) -> None:
    descriptor_set(tmp_path / "generated.pb")
    args = f"definitions {tmp_path / 'generated.pb'} {tmp_path / 'defs.jsonl'} {' '.join(PROTOS)}"
    out = subprocess.run(
        ["mvn", "-q", "-B", "compile", "exec:java", f"-Dexec.args={args}"],
        cwd=GSR_DIR.parent / "gsr-java",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = read_jsonl(tmp_path / "defs.jsonl")
    assert len(rows) == len(java_definitions())
    for row in rows:
        cls = message_of(modules[row["file"]], row["message"])
        assert class_definition(cls) == row["definition"], row["message"]
