"""Optional dependencies (fastavro, jsonschema, grpcio-tools): imported on first use, with an
error that names the extra that brings them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._types import SchemaError


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise SchemaError(
            f"the Glue Schema Registry {extra!r} support needs {module.split('.')[0]}: "
            f"pip install 'kinesis-trio[{extra}]'"
        ) from None
