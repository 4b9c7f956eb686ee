"""The ``.proto`` files of ``tests/compat/gsr/generated`` as Python's generated classes
(``protoc --python_out``, grpcio-tools' protoc) and as the descriptor set the Java side reads.

``python -m tests.support.gsr_generated descriptor-set OUT FILE...`` writes the descriptor
set (``--include_imports``) that ``regenerate.sh`` hands to the Java serde.
"""

from __future__ import annotations

import importlib
import importlib.resources
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from google.protobuf import message

from tests.support.gsr import GSR_DIR, read_jsonl

GENERATED = GSR_DIR / "generated"
JAVA_DEFINITIONS = GENERATED / "java-definitions.jsonl"
PROTOS = ("kt_nested.proto", "kt_imports.proto", "kt_legacy.proto")


def _protoc(*args: str) -> None:
    from google.type import date_pb2  # type: ignore[import-untyped]
    from grpc_tools import protoc  # type: ignore[import-untyped]

    includes = [
        str(GENERATED),
        str(importlib.resources.files("grpc_tools") / "_proto"),
        str(Path(str(date_pb2.__file__)).parents[2]),  # google/type/*.proto
    ]
    argv = ["protoc", *(f"-I{i}" for i in includes), *args]
    if protoc.main(argv) != 0:
        raise RuntimeError(f"protoc failed: {argv}")


def descriptor_set(out: Path, files: tuple[str, ...] = PROTOS) -> None:
    """protoc's descriptor set of ``files``, their imports first."""
    _protoc("--include_imports", f"--descriptor_set_out={out}", *files)


def generated_modules(folder: Path) -> dict[str, ModuleType]:
    """Each ``.proto`` file's ``_pb2`` module, generated into ``folder`` and imported."""
    _protoc(f"--python_out={folder}", *PROTOS)
    sys.path.insert(0, str(folder))
    try:
        return {name: importlib.import_module(name[: -len(".proto")] + "_pb2") for name in PROTOS}
    finally:
        sys.path.remove(str(folder))


def message_of(module: ModuleType, full_name: str) -> type[message.Message]:
    """The generated class of a top-level message."""
    package = module.DESCRIPTOR.package
    local = full_name[len(package) + 1 :] if package else full_name
    cls: Any = getattr(module, local)
    return cls  # type: ignore[no-any-return]


def java_definitions() -> list[dict[str, Any]]:
    """The committed rows: file, message (full name), definition (the Java serde's)."""
    return read_jsonl(JAVA_DEFINITIONS)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "descriptor-set":
        descriptor_set(Path(sys.argv[2]), tuple(sys.argv[3:]) or PROTOS)
    else:
        sys.exit("usage: python -m tests.support.gsr_generated descriptor-set OUT [FILE...]")
