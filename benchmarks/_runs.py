"""The runs of the commands that compare contenders: the variants, and one timed run of each.

Holds the :class:`Variant` (one producer set-up, run as ``python -m benchmarks.runners.<lib>``,
with a constructor per runner) and :func:`select`, the stream flags of a command
(:func:`add_stream_flags`), one run of a variant on a fresh stream (:func:`run_variant`,
:func:`run_on_fresh_stream`, through ``_child``) and the :func:`emulator_session` around a
command's runs (the machine described, one kinesalite, the total time). Used by ``latency``,
``throughput``, ``spool`` and ``_sweeps``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from benchmarks._child import ChildResult, run_child
from benchmarks._command import log
from benchmarks._emulator import create_stream, delete_stream, start_emulator
from benchmarks._report import machine_info, machine_line


def on_off(flag: bool) -> str:
    return "on" if flag else "off"


def agg_tag(aggregation: bool) -> str:
    """``agg`` or ``noagg``, as in the variant keys."""
    return "agg" if aggregation else "noagg"


V = TypeVar("V", bound="Variant")


@dataclass
class Variant:
    """One producer set-up that a benchmark runs as ``python -m benchmarks.<module>``.

    Make them with the constructors per runner (``Variant.kinesis_trio(...)`` etc.); a
    benchmark that keeps more per variant subclasses it (keyword-only fields), and the
    constructors take those fields as keywords.
    """

    key: str
    label: str
    module: str
    library: str
    backend: str
    mode: str
    aggregation: bool
    #: extra arguments of the child
    args: list[str] = field(default_factory=list)

    # One constructor per runner: the variants need not repeat what the runner fixes.

    @classmethod
    def kinesis_trio(
        cls: type[V],
        *,
        key: str,
        label: str,
        backend: str,
        mode: str = "confirmed",
        aggregation: bool = True,
        **more: Any,
    ) -> V:
        """A ``run_kinesis_trio`` variant; ``more``: ``args`` and a subclass's fields."""
        return cls(
            key, label, "runners.kinesis_trio", "kinesis_trio", backend, mode, aggregation, **more
        )

    @classmethod
    def aiokpl(
        cls: type[V],
        *,
        key: str,
        label: str,
        mode: str = "confirmed",
        aggregation: bool = True,
        **more: Any,
    ) -> V:
        """A ``run_aiokpl`` variant (asyncio); ``more``: ``args`` and a subclass's fields."""
        return cls(key, label, "runners.aiokpl", "aiokpl", "asyncio", mode, aggregation, **more)

    @classmethod
    def agg_boto3(cls: type[V], label: str, **more: Any) -> V:
        """aws-kinesis-agg + boto3 (``run_agg_boto3``): aggregated, fire-and-forget."""
        library, mode = "aws-kinesis-agg+boto3", "fire-and-forget"
        return cls("agg-boto3", label, "runners.agg_boto3", library, "sync", mode, True, **more)

    @classmethod
    def boto3(cls: type[V], label: str, **more: Any) -> V:
        """Plain boto3 ``put_records`` (``run_boto3``): not aggregated, fire-and-forget."""
        return cls(
            "boto3", label, "runners.boto3", "boto3", "sync", "fire-and-forget", False, **more
        )

    def describe(self) -> dict[str, Any]:
        """The variant's part of a result row."""
        return {
            "variant": self.label,
            "key": self.key,
            "library": self.library,
            "backend": self.backend,
            "mode": self.mode,
            "aggregation": self.aggregation,
        }


def select(variants: list[V], only: str) -> list[V]:
    """The variants whose key is in ``only`` (comma-separated; empty: all)."""
    if not only:
        return variants
    keep = set(only.split(","))
    return [v for v in variants if v.key in keep]


def run_on_fresh_stream(
    emulator: Any,
    module: str,
    *,
    load: Sequence[str],
    size: int,
    keys: int,
    shards: int,
    linger: float,
    extra: Sequence[str],
    timeout: float,
) -> ChildResult:
    """:func:`run_child` on a fresh ``shards``-shard stream, deleted after the run.

    ``load`` is ``--count N`` or ``--rate R --duration S``; ``extra`` follows the common
    arguments (``--size``, ``--keys``, ``--shards``, ``--linger``).
    """
    stream = create_stream(emulator.endpoint_url, shards)
    res = run_child(
        module,
        [
            "--endpoint",
            emulator.endpoint_url,
            "--stream",
            stream,
            *load,
            "--size",
            str(size),
            "--keys",
            str(keys),
            "--shards",
            str(shards),
            "--linger",
            str(linger),
            *extra,
        ],
        timeout=timeout,
        emulator_pid=emulator.pid,
    )
    delete_stream(emulator.endpoint_url, stream)
    return res


def add_stream_flags(parser: argparse.ArgumentParser, shards: int) -> None:
    """``--shards``, ``--size``, ``--keys`` and ``--linger``, as :func:`run_variant` reads them."""
    parser.add_argument("--shards", type=int, default=shards)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--linger", type=float, default=0.05)


def run_variant(
    emulator: Any, v: Variant, load: Sequence[str], args: argparse.Namespace
) -> ChildResult:
    """Run ``v`` on a fresh stream with the benchmark's stream flags and ``--timeout``."""
    return run_on_fresh_stream(
        emulator,
        v.module,
        load=load,
        size=args.size,
        keys=args.keys,
        shards=args.shards,
        linger=args.linger,
        extra=["--variant", v.label, *v.args],
        timeout=args.timeout,
    )


@dataclass
class Session:
    """A benchmark's machine description and emulator (see :func:`emulator_session`)."""

    info: dict[str, Any]
    emulator: Any
    #: seconds from the emulator's start to its stop (set when the session ends)
    total: float = 0.0


@contextlib.contextmanager
def emulator_session(*, tls: bool = False) -> Iterator[Session]:
    """Describe the machine (logged), then run one kinesalite for the block (over HTTPS
    with ``tls``); time it."""
    info = machine_info()
    log(f"machine: {machine_line(info)}")
    started = time.perf_counter()
    session = Session(info, start_emulator(shard_limit=1000, tls=tls))
    try:
        yield session
    finally:
        session.emulator.stop()
        session.total = time.perf_counter() - started
