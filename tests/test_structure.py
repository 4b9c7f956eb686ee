"""The package's structure: who writes each mutable field, which floor may import which,
the import cycles, and the sizes.

The scan (``tests/support/ownership.py``) reads the package's source: every mutable field
has one writing module (its owner changes it; other modules call the owner's methods), no
module imports another that imports it back (TYPE_CHECKING imports included), and no floor
(a subpackage, or the ground: the modules directly in the package) imports one it may not:
the table below, which ``docs/architecture.md`` draws.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ownership


def test_every_field_has_one_writing_module() -> None:
    assert ownership.shared() == {}, "fields written from more than one module"


def test_fields_given_one_owner_keep_it() -> None:
    writers = ownership.writers()
    for name, module in [
        ("kinesis_trio._core._record.Record.attempts", "kinesis_trio._core._record"),
        ("kinesis_trio._core._engine.Engine._streams", "kinesis_trio._core._engine"),
        (
            "kinesis_trio._core._congestion.ConcurrencyLimit.waiting",
            "kinesis_trio._core._congestion",
        ),
        ("kinesis_trio.testing._server.FakeKinesis.write_block", "kinesis_trio.testing._server"),
        (
            "kinesis_trio.testing._fake_streams._Streams._last_seq",
            "kinesis_trio.testing._fake_streams",
        ),
        ("kinesis_trio.cli._output._Interrupts.stop_scope", "kinesis_trio.cli._output"),
        ("kinesis_trio._core._pipeline_data.KRecord.since", "kinesis_trio._core._pipeline_data"),
        ("kinesis_trio._core._pipeline_data.KRecord.paid", "kinesis_trio._core._pipeline_data"),
        ("kinesis_trio._core._record.Record.partition_key", "kinesis_trio._core._record"),
    ]:
        assert writers[name] == {module}, name


def test_no_import_cycle() -> None:
    assert ownership.cycles() == []


#: Which floors each floor may import (the ground: ``_config``, ``_errors``,
#: ``_error_codes``, ``_backoff``, ``_outcome``, ``_dead_letters``, ``_logging``,
#: ``_version``; the face: the package's ``__init__`` and ``__main__``).
MAY_IMPORT: dict[str, set[str]] = {
    "ground": set(),
    "_core": {"ground"},
    "_disk": {"ground", "_core"},
    "_aws": {"ground", "_core"},
    "gsr": {"ground", "_aws"},
    "metrics": {"ground", "_core", "_aws"},
    "_shell": {"ground", "_core", "_disk", "_aws", "gsr", "metrics"},
    "testing": {"ground", "gsr"},
    "aws_lambda": {"ground", "_shell"},
    "cli": {"ground", "_core", "_aws", "gsr", "_shell", "testing"},
    "face": {"ground", "_core", "_aws", "_shell", "cli"},
}


def test_each_floor_imports_only_what_the_table_allows() -> None:
    found = ownership.floor_imports()
    assert set(found) == set(MAY_IMPORT), "a floor the table does not name, or one gone"
    wrong = {f: sorted(found[f] - MAY_IMPORT[f]) for f in found if found[f] - MAY_IMPORT[f]}
    assert wrong == {}, "imports the table does not allow (floor: the floors it imports)"


def test_no_floor_imports_one_that_imports_it_back() -> None:
    assert ownership.floor_cycles() == []


def test_the_rest_of_the_package_enters_the_core_by_its_front_door() -> None:
    """Every module outside ``_core`` imports the names ``_core/__init__.py`` lists, never
    a module inside it."""
    assert ownership.door_breaches("_core") == {}


#: The engine's door (issue 62): what the shell asks of it per record, per request and per
#: stream, and two named parts for the shell's other tasks: ``out`` (what leaves the shard
#: buffers: the shard workers, linger timers, collectors and senders) and ``spooling`` (the
#: spool's book, for the spooler). The engine's other parts are its own.
_ENGINE_DOOR = {
    # parts and the per-record lookup
    "out",
    "spooling",
    "stream",
    # a record
    "check",
    "record_limit",
    "refusal",
    "accept",
    "batch",
    "accept_many",
    # a request
    "mark_in_flight",
    "apply_answer",
    "apply_error",
    "count_received",
    # a stream
    "add_stream",
    "reload",
    "reload_failed",
    "needs_history",
    "learn_shards",
    "verify_pending",
    "retry_due",
    "next_retry",
    # the producer: pauses, flushes, the spool's opening and recovery, the end, the view
    "pause",
    "resume",
    "flush_started",
    "pending_through",
    "flush_ended",
    "open_spool",
    "recovery_ended",
    "fail_recovered",
    "fail_unresolved",
    "status",
}


def test_the_engine_door_is_what_the_shell_asks() -> None:
    from kinesis_trio._core import Engine

    public = {n for n in (*Engine.__slots__, *vars(Engine)) if not n.startswith("_")}
    assert public == _ENGINE_DOOR


def test_the_door_scan_finds_a_module_and_a_name_past_the_door(tmp_path: Path) -> None:
    package = tmp_path / "kinesis_trio"
    (package / "_core").mkdir(parents=True)
    (package / "_shell").mkdir()
    (package / "__init__.py").write_text("")
    (package / "_shell" / "__init__.py").write_text("")
    (package / "_core" / "__init__.py").write_text(
        "from ._engine import Engine, helper\n__all__ = ['Engine']\n"
    )
    (package / "_core" / "_engine.py").write_text("class Engine: ...\ndef helper(): ...\n")
    (package / "_shell" / "_a.py").write_text("from .._core import Engine\n")
    (package / "_shell" / "_b.py").write_text("from .._core._engine import Engine\n")
    (package / "_shell" / "_c.py").write_text("from .._core import helper\n")
    assert ownership.door_breaches("_core", package) == {
        "kinesis_trio._shell._b": ["kinesis_trio._core._engine"],
        "kinesis_trio._shell._c": ["kinesis_trio._core.helper"],
    }


def test_the_core_imports_no_async_library() -> None:
    """The core wakes a waiter one way only (``_core/_ledger.py`` says which); everything
    else it wants done is an effect: it holds no event loop's objects."""
    core = Path(ownership.PACKAGE) / "_core"
    found = {}
    for path in sorted(core.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            (node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and not node.level
        }
        if names & {"anyio", "trio", "asyncio", "sniffio"}:
            found[path.name] = sorted(names & {"anyio", "trio", "asyncio", "sniffio"})
    assert found == {}


def test_the_floor_scan_finds_an_arrow_up_and_a_loop(tmp_path: Path) -> None:
    package = tmp_path / "kinesis_trio"
    (package / "_core").mkdir(parents=True)
    (package / "metrics").mkdir()
    for init in (package, package / "_core", package / "metrics"):
        (init / "__init__.py").write_text("")
    (package / "_core" / "_engine.py").write_text("from ..metrics import _sink\n")
    (package / "metrics" / "_sink.py").write_text("from .._core import _engine\n")
    (package / "_errors.py").write_text("")
    assert ownership.floor_cycles(package) == [["_core", "metrics"]]


def test_the_scan_finds_a_second_writer_and_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_a.py").write_text(
        "from . import _b\n\n"
        "class Box:\n"
        "    __slots__ = ('size', 'mine')\n"
        "    def __init__(self) -> None:\n"
        "        self.size = 0\n"
        "        self.mine = 0\n"
    )
    (package / "_b.py").write_text(
        "from ._a import Box\n\ndef grow(box: Box) -> None:\n    box.size += 1\n"
    )
    assert ownership.shared(package) == {"pkg._a.Box.size": ["pkg._a", "pkg._b"]}
    assert ownership.writers(package)["pkg._a.Box.mine"] == {"pkg._a"}
    assert ownership.cycles(package) == [["pkg._a", "pkg._b"]]


def test_the_scan_reads_a_package_init_relative_to_the_package_itself(tmp_path: Path) -> None:
    """``from ._y import y`` in ``pkg/sub/__init__.py`` is ``pkg.sub._y``, not ``pkg._y``:
    a loop through a subpackage's front door is seen; and a submodule's ``from . import``
    of a sibling is no arrow back to its own package (imported before it anyway)."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_z.py").write_text("from .sub import y\n")
    (package / "sub" / "__init__.py").write_text("from . import _x\nfrom ._y import y\n")
    (package / "sub" / "_x.py").write_text("from . import _w\n")
    (package / "sub" / "_w.py").write_text("")
    (package / "sub" / "_y.py").write_text("from .._z import z\ny = 1\n")
    assert ownership.cycles(package) == [["pkg._z", "pkg.sub", "pkg.sub._y"]]


#: the folders whose modules and classes are held to the sizes: the package (issue 43), and the
#: benchmarks and the tests' shared support (issue 54)
SIZED = [
    ownership.PACKAGE,
    ownership.PACKAGE.parent / "benchmarks",
    ownership.PACKAGE.parent / "tests" / "support",
]


def too_big(folders: list[Path], root: Path) -> list[str]:
    """Each module over 700 lines and each class over 450 under ``folders``, named by its
    path from ``root`` (generated ``*_pb2.py`` files aside)."""
    import ast

    found: list[str] = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if path.name.endswith("_pb2.py"):
                continue
            name = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            if source.count("\n") > 700:
                found.append(f"{name}: {source.count(chr(10))} lines")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ClassDef):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    if size > 450:
                        found.append(f"{name}: class {node.name}, {size} lines")
    return found


def test_no_module_over_700_lines_and_no_class_over_450() -> None:
    """The sizes issue 43 set, in the package, ``benchmarks/`` and ``tests/support/``: a
    module or class past them is split by what it does."""
    found = too_big(SIZED, ownership.PACKAGE.parent)
    assert not found, found


def test_the_size_check_names_a_long_module_and_a_long_class(tmp_path: Path) -> None:
    folder = tmp_path / "support"
    folder.mkdir()
    (folder / "fine.py").write_text("x = 1\n" * 700)
    (folder / "long.py").write_text("x = 1\n" * 701)
    (folder / "wide.py").write_text("class Wide:\n" + "    x = 1\n" * 450)
    assert too_big([folder], tmp_path) == [
        "support/long.py: 701 lines",
        "support/wide.py: class Wide, 451 lines",
    ]
