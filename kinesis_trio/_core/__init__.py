"""The sans-IO core: every decision between ``put`` and an Outcome, the time passed in
(no awaits, no I/O).

This is its front door: the rest of the package imports from here, never from a module
inside (``tests/test_structure.py`` holds it to that). The shell drives the
:class:`Engine` through its methods and carries out the effects it leaves in the
:class:`Outbox` the shell gave it (their kinds are in ``effects``); the other names are the
values that pass between them (streams, shards, batches, spool rows) and pure helpers of
the floors above (the spool's rows for ``_disk``, the request clock for ``_aws``, stream
names and ARNs).
"""

from . import _effects as effects
from ._aggregation import UserRecord, deaggregate
from ._batch import Batch, at_index, unpack
from ._deadline import BUILT_FIRST, RequestClock, answer_limit
from ._effects import NoRoom, Outbox
from ._engine import Engine
from ._interpret import in_flight
from ._limiter import SHARD_BYTES_PER_SECOND, SHARD_RECORDS_PER_SECOND
from ._metric_window import MetricWindow, Stats
from ._pipeline_data import KRecord, ShardBuffer, StreamState
from ._record import Record, Waker
from ._requests import dry_run_body
from ._shards import Shard, ShardMap, hash_key_for, parse_explicit_hash_key
from ._spool import (
    RECOVERED,
    Commit,
    Inserts,
    RecoveryReport,
    Row,
    columns,
    dead_letter,
    kept_note,
    spool_note,
    unkept_note,
)
from ._stream_policy import (
    StreamFacts,
    arn_ref,
    default_stream_ref,
    is_arn,
    name_and_arn,
    parse_stream_arn,
)
from ._validate import check_stream_name, coerce_data, partition_key_length

__all__ = [
    "BUILT_FIRST",
    "RECOVERED",
    "SHARD_BYTES_PER_SECOND",
    "SHARD_RECORDS_PER_SECOND",
    "Batch",
    "Commit",
    "Engine",
    "Inserts",
    "KRecord",
    "MetricWindow",
    "NoRoom",
    "Outbox",
    "Record",
    "RecoveryReport",
    "RequestClock",
    "Row",
    "Shard",
    "ShardBuffer",
    "ShardMap",
    "Stats",
    "StreamFacts",
    "StreamState",
    "UserRecord",
    "Waker",
    "answer_limit",
    "arn_ref",
    "at_index",
    "check_stream_name",
    "coerce_data",
    "columns",
    "dead_letter",
    "deaggregate",
    "default_stream_ref",
    "dry_run_body",
    "effects",
    "hash_key_for",
    "in_flight",
    "is_arn",
    "kept_note",
    "name_and_arn",
    "parse_explicit_hash_key",
    "parse_stream_arn",
    "partition_key_length",
    "spool_note",
    "unkept_note",
    "unpack",
]
