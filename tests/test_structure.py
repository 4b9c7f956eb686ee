"""The package's structure: who writes each mutable field, and the import cycles.

The scan (``tests/support/ownership.py``) reads the package's source. The fields written
from more than one module are listed in ``tests/support/shared_fields.txt``: the list may
only shrink (a field that gets one owner leaves it, and this test says so), never grow.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import ownership

KNOWN = Path(__file__).parent / "support" / "shared_fields.txt"

#: The import cycles left (issue 43 removes them): each a set of modules importing each other.
KNOWN_CYCLES = [
    ["kinesis_trio._outcome", "kinesis_trio._state"],
]


def _known() -> set[str]:
    lines = KNOWN.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_no_field_gains_a_second_writing_module() -> None:
    shared = set(ownership.shared())
    assert not shared - _known(), "fields now written from more than one module"


def test_a_field_that_got_one_owner_leaves_the_list() -> None:
    assert not _known() - set(ownership.shared()), "remove these lines from the list"


def test_fields_given_one_owner_keep_it() -> None:
    writers = ownership.writers()
    for name, module in [
        ("kinesis_trio._outcome.Outcome._attempts", "kinesis_trio._outcome"),
        ("kinesis_trio._engine.Engine.streams", "kinesis_trio._engine"),
        ("kinesis_trio._congestion.ConcurrencyLimit.waiting", "kinesis_trio._congestion"),
        ("kinesis_trio.testing._server.FakeKinesis.write_block", "kinesis_trio.testing._server"),
        ("kinesis_trio.testing._streams._Streams._last_seq", "kinesis_trio.testing._streams"),
        ("kinesis_trio.cli._output._Interrupts.stop_scope", "kinesis_trio.cli._output"),
        ("kinesis_trio._state.KRecord.since", "kinesis_trio._state"),
        ("kinesis_trio._state.KRecord.paid", "kinesis_trio._state"),
        ("kinesis_trio._outcome.Outcome._partition_key", "kinesis_trio._outcome"),
    ]:
        assert writers[name] == {module}, name


def test_no_new_import_cycle() -> None:
    assert ownership.cycles() == KNOWN_CYCLES


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
