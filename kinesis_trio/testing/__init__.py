"""A fake Kinesis, in memory, for your own tests: point a Producer at it; no sockets needed.

Point a Producer at it
======================

::

    from kinesis_trio import Producer, StaticCredentials
    from kinesis_trio.testing import FakeKinesis, Faults

    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("orders", shard_count=4)
    async with Producer("orders", region_name="us-east-1", endpoint_url="http://fake",
                        credentials=StaticCredentials("k", "s"),
                        transport=fake.transport()) as producer:
        outcome = await producer.put(b"data", "partition-key")
    assert (await outcome.wait()).ok
    assert len(fake.records("orders")) == 1

The fake speaks Kinesis' JSON 1.1 protocol (``X-Amz-Target: Kinesis_20131202.<Op>``; an
``Authorization`` header is required, any value passes). A Producer or ``KinesisClient``
given ``fake.transport()`` reaches it through its own connection pool and HTTP framing (h11)
over in-memory connections, the fake's h11 server at the far end, as over a socket; any
other httpx client given it calls the fake directly. It serves
PutRecords, PutRecord, ListShards, DescribeStreamSummary, DescribeStream, ListStreams,
CreateStream, DeleteStream, SplitShard, MergeShards, UpdateShardCount, UpdateMaxRecordSize,
UpdateStreamRecordDistributionStrategy, Increase/DecreaseStreamRetentionPeriod,
GetShardIterator and GetRecords; every request body is first checked against the
operation's input shape in botocore's service model (a wrong JSON type:
``SerializationException``; a missing member or a value out of range or enum:
``ValidationException``). It routes every
entry to the open shard whose hash key range holds the entry's explicit hash key (or the MD5
of its partition key), answers entries in request order, and validates entries and requests
like Kinesis (1 to 500 entries, partition keys of 1 to 256 characters counted in UTF-16
code units, explicit hash keys in ASCII digits, records up to the stream's max record size,
requests up to ``max_request_size``, 10 MiB, partition keys included). It runs inside the
event loop, on trio or asyncio, and reads time only with ``anyio.current_time()`` (but for
a stream's ``StreamCreationTimestamp``: the wall clock when it was created, fixed).
``fake.calls`` lists the operation of each request received and ``fake.requests`` its
``(operation, body)``, a PutRecords ``Records`` replaced by its entry count and a PutRecord
``Data`` by its length (so a test can check, say, that writes name the stream by ARN); both
keep the latest ``request_log`` requests at least, twice that at most (10,000 by
default). Glue's schema registry calls (``X-Amz-Target: AWSGlue.<Op>``) are answered on the
same endpoint by ``fake.glue`` (``docs/local.md``, "The Glue Schema Registry"). Records older
than their stream's retention period (24 hours by default) are
trimmed within a second, on the stream's next read or write; open shards over all
streams are capped at ``shard_limit`` (20,000: ``LimitExceededException`` past it).

Stream settings
===============

``fake.create_stream(name, shard_count=1, *, on_demand=False, max_record_size_kib=None,
record_distribution_strategy=None, channel_count=0)``, or the CreateStream operation
(``MaxRecordSizeInKiB``, ``RecordDistributionStrategy``):

- **Max record size**, 1024 to 10240 KiB (``None``: ``FakeKinesis(max_record_size=...)``,
  1 MiB); change it with ``fake.update_max_record_size(name, kib)`` or UpdateMaxRecordSize.
  An entry whose data and UTF-8 partition key exceed it fails the request (HTTP 400
  ``InvalidArgumentException``). DescribeStreamSummary reports ``MaxRecordSizeInKiB``.
- **Record distribution strategy** of an on-demand stream: ``"USER_PARTITION_KEY"`` (the
  default: every entry needs a ``PartitionKey``, else the request fails with
  ``ValidationException``) or ``"AUTO"``: ``PartitionKey`` is optional, it and
  ``ExplicitHashKey`` are ignored, and each entry goes to an open shard picked uniformly at
  random from ``fake.rng`` (a KPL aggregate is stored as is). Switch at any time with
  ``fake.update_record_distribution_strategy(name, strategy)`` or
  UpdateStreamRecordDistributionStrategy; the next request follows it. On a provisioned
  stream: ``InvalidArgumentException``. DescribeStreamSummary shows
  ``RecordDistributionStrategy`` for on-demand streams only. A record stored without a key
  has ``FakeRecord.partition_key`` ``None``, and GetRecords returns it without
  ``PartitionKey``, as Kinesis does.
- **Channel count**: ``fake.set_channel_count(name, n)``; DescribeStreamSummary reports
  ``ChannelCount``.

Every stream operation takes ``StreamName``, ``StreamARN`` (``fake.stream_arn(name)``), or
both. An ARN not matching Kinesis' pattern: ``ValidationException``; one naming another
region or account than :data:`REGION` and :data:`ACCOUNT_ID`:
``ResourceNotFoundException``; a name and an ARN naming different streams:
``InvalidArgumentException``.

DryRun
======

A PutRecords or PutRecord with ``"DryRun": true`` is checked like a real one (the stream,
``Faults.fatal`` codes such as ``AccessDeniedException``, every entry, the sizes) and, if it
would have succeeded, answered HTTP 400 ``DryRunOperationException``; nothing is stored, no
tokens are taken, no fault is drawn (``fake.stats.dry_runs`` counts them). Set
``fake.honor_dry_run = False`` to model endpoints that ignore DryRun and store the records
(both npm emulators do).

Per-shard write limits
======================

``FakeKinesis(enforce_limits=True, records_per_second=1000, bytes_per_second=1_048_576)``
gives every shard a token bucket refilled continuously at those rates, holding at most one
second's worth (the bytes bucket at least the stream's max record size, so a stream raised
to 10 MiB takes one 10 MiB record at once while averaging 1 MiB/s) and starting full. An
entry that finds too few tokens (one record, and its data plus UTF-8 partition key bytes)
fails in its slot with ``ProvisionedThroughputExceededException`` (HTTP 200, counted in
``FailedRecordCount``) and is not stored; the other entries of the request go on.
``fake.stats`` (:class:`FakeStats`) counts requests, entries and, per shard, accepted
records and bytes with the first and last accept time, to compute achieved rates.

Faults on demand
================

``fake.faults = Faults(http_500=0.05, reset_after=0.01, throttle_entries=0.1, seed=7)``
injects faults at random (per write request, or per entry for ``*_entries``) from
``fake.rng``, a ``random.Random(seed)``, so a run is reproducible;
``fake.fail_next(3, "hang_after")`` injects one kind (or an error code such as
``"ExpiredTokenException"``) into the next write requests; ``Faults(fatal={"audit":
"AccessDeniedException"})`` fails every write to a stream. See :class:`Faults` for what each
kind stores and what the client sees. The hang kinds never answer: the client's timeout (the
Producer's ``request_timeout``) ends them. Request-level faults are logged in
``fake.fault_events`` (:class:`FaultEvent`); those whose records were stored but whose
answer was lost (``hang_after``, ``reset_after``) are ``fake.ambiguous_requests``, and only
the records they name may legitimately be duplicated by a producer's retry::

    confirmed = {(r.shard_id, r.sequence_number) for r in results}
    stored = {(r.shard_id, r.sequence_number) for r in fake.records("orders")}
    lost_answers = {e for event in fake.ambiguous_requests for e in event.entries}
    assert confirmed <= stored and stored - confirmed <= lost_answers

A busy server
=============

``FakeKinesis(server=ServerModel(workers=1, per_request=0.005, per_byte=1e-7))`` makes
requests wait for one of ``workers`` and take a service time each (set
``fake.server.slowdown`` to slow it down and recover). A request whose client gave up is
still served and stored, so a producer that sends too many at once sees timeouts and
duplicates as it would against a busy endpoint (kinesis-local on a small machine, a
saturated proxy or uplink).

For anything else, ``FakeKinesis(hook=...)`` takes an async ``(operation, body)`` callable
that may sleep, or return an ``httpx.Response`` to answer in the fake's place.

Resharding
==========

``fake.split_shard``, ``fake.merge_shards`` and ``fake.update_shard_count`` (or the API
operations SplitShard, MergeShards, UpdateShardCount) take effect at once (no ``UPDATING``
phase): parents close, keep their records, show an ``EndingSequenceNumber`` in ListShards
and take no more writes; writes go to the open children. UpdateShardCount is simplified:
every open shard closes and ``TargetShardCount`` evenly split children open (Kinesis gets
there by a series of splits and merges). Every shard, open or closed, stays in
``fake.streams[name].shards``. ListShards pages (``MaxResults``, default 1000; a follow-up
sends only ``NextToken``, which expires after 300 s) and honours ``ShardFilter`` type
``AT_LATEST`` (open shards only; otherwise all shards).

DescribeStream answers a ``StreamDescription`` (status ``ACTIVE``, so boto3's
``stream_exists`` waiter passes at once) whose ``Shards`` are all shards, open or closed, in
ListShards' shape, at most 100 a page (``Limit``, 1 to 10000, default 100; the next page
starts after ``ExclusiveStartShardId``; ``HasMoreShards``). ListStreams lists stream names
and ``StreamSummaries`` in name order, at most 100 a page (``Limit``; continue with
``ExclusiveStartStreamName`` or the ``NextToken`` of a page with ``HasMoreStreams``, which
expires after 300 s). Out-of-range or ill-typed members: ``ValidationException``; a bad
``NextToken``: ``InvalidArgumentException``.

Persistence
===========

The served engine (``kinesis-trio local --data DIR``) keeps its state in a SQLite database,
``DIR/kinesis-state.sqlite``, saving what changed every second. For a test's own snapshots,
``save_state(fake, path)`` writes the fake's streams (settings, creation time, every shard
with its hash key range, lineage and sequence number range, every record with its data,
keys, sequence number and arrival time) and its sequence counter to a versioned JSON file
(``{"format": 1, ...}``), atomically (a temporary file in the same directory, fsynced, then
renamed over ``path``). ``load_state(fake, path)`` loads it into a fake without streams
(returns False if ``path`` does not exist; a corrupt file raises ``ValueError`` naming the
file and the problem, and loads nothing); new sequence numbers then follow the stored ones.
Shard iterators, NextTokens, token buckets, statistics and fault settings are not kept.
``fake.changes`` counts state changes (streams created, deleted, resharded or updated;
records stored; a load), so a server can snapshot only when it moved; changes made by
editing ``fake.streams`` directly are not counted.

Over HTTP: a local Kinesis for any client
=========================================

``async with serve(fake, host="127.0.0.1", port=0) as local:`` serves the fake on a socket
in the caller's event loop (trio or asyncio; h11 parses HTTP/1.1) until the block exits;
``local.endpoint_url`` is what any Kinesis client (boto3, the AWS CLI, a Producer without a
transport) is given. ``ssl_context=`` serves HTTPS. A ``hang_*`` fault keeps the request
open until the client hangs up; ``reset_*`` resets the connection (TCP RST); a CBOR request
(the Java SDKs' default) is refused with a hint. ``LocalKinesis("python", args=[...])`` runs
``kinesis-trio local --emulator python`` in a child process instead (``--limits aws``,
``--faults SPEC``, ``--data DIR``, ``--tls``; see the docs' local engine page). Served,
``fake.clock_offset`` turns the fake's clock into wall-clock time for the timestamps clients
see (``ApproximateArrivalTimestamp``, ``AT_TIMESTAMP``, the saved state); it is 0 otherwise.

Virtual time
============

The fake waits only with ``anyio.sleep`` and reads only ``anyio.current_time()`` (creation
timestamps aside, which are wall-clock), so under
trio's ``MockClock(autojump_threshold=0)`` an hour of throttling, backoff, latency and hung
requests takes seconds of real time. With the anyio pytest plugin::

    import pytest
    from trio.testing import MockClock

    @pytest.fixture
    def anyio_backend():
        return ("trio", {"clock": MockClock(autojump_threshold=0)})

    @pytest.mark.anyio
    async def test_an_hour_of_writes():
        ...  # anyio.current_time() and anyio.sleep() follow the virtual clock
"""

from ._busy import ServerModel as ServerModel
from ._emulators import LocalKinesis as LocalKinesis
from ._faults import FakeStats as FakeStats
from ._faults import FaultEvent as FaultEvent
from ._faults import Faults as Faults
from ._faults import ShardStats as ShardStats
from ._http import LocalEndpoint as LocalEndpoint
from ._http import serve as serve
from ._model import ACCOUNT_ID as ACCOUNT_ID
from ._model import AMBIGUOUS_FAULTS as AMBIGUOUS_FAULTS
from ._model import ENTRY_FAULTS as ENTRY_FAULTS
from ._model import REGION as REGION
from ._model import REQUEST_FAULTS as REQUEST_FAULTS
from ._model import FakeRecord as FakeRecord
from ._model import FakeShard as FakeShard
from ._persist import load_state as load_state
from ._persist import save_state as save_state
from ._server import FakeKinesis as FakeKinesis

__all__ = [
    "ACCOUNT_ID",
    "AMBIGUOUS_FAULTS",
    "ENTRY_FAULTS",
    "REGION",
    "REQUEST_FAULTS",
    "FakeKinesis",
    "FakeRecord",
    "FakeShard",
    "FakeStats",
    "FaultEvent",
    "Faults",
    "LocalEndpoint",
    "LocalKinesis",
    "ServerModel",
    "ShardStats",
    "load_state",
    "save_state",
    "serve",
]
