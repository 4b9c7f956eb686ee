"""``kinesis-trio tail`` as a subprocess, against the local engines: ``produce`` a file, tail
it back; follow a split; exit codes and messages; Ctrl-C.

``emulator`` runs a test on kinesalite, kinesis-local (npm) and the Python engine (the fake
served over HTTP). kinesalite takes records up to 1 MiB and knows no StreamARN: the 10 MiB
record and the ARN run on the other two (kinesis-local takes about 20 s to store a 10 MiB
record, longer than produce's request timeout: that one is put with a patient client).
"""

from __future__ import annotations

import base64
import datetime
import json
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

import kinesis_trio
from kinesis_trio._core._aggregation import encode_aggregate, partition_hash_key
from tests.support.cli import cli_command, cli_env, client, create_stream, run_cli
from tests.support.emulators import EmulatorEndpoint

pytestmark = pytest.mark.subprocess

HALF = 1 << 127
MIB = 1024 * 1024


def tail(endpoint: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return run_cli("tail", "--endpoint-url", endpoint, *args, timeout=timeout)


def produce_file(endpoint: str, stream: str, path: Path, *args: str) -> None:
    out = run_cli("produce", "--stream", stream, "--endpoint-url", endpoint, str(path), *args)
    assert out.returncode == 0, out.stderr


def lines_file(tmp_path: Path, n: int, prefix: str = "line") -> tuple[Path, list[dict[str, Any]]]:
    docs = [{"user": f"u{i % 17}", "n": i, "text": f"{prefix} {i} é"} for i in range(n)]
    path = tmp_path / f"{prefix}.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")
    return path, docs


def rows(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_produce_then_tail_round_trip(emulator: EmulatorEndpoint, tmp_path: Path) -> None:
    endpoint = emulator.endpoint_url
    stream = create_stream(endpoint, shards=3)
    path, _ = lines_file(tmp_path, 400)
    produce_file(endpoint, stream, path, "--json", "--key-field", "user")
    out = tail(endpoint, "--stream", stream, "--format", "json")
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert Counter(json.loads(r["data"])["n"] for r in got) == Counter(range(400))
    assert {r["partition_key"] for r in got} == {f"u{i}" for i in range(17)}
    assert any(r["sub_sequence_number"] is not None for r in got), "aggregates were split"
    assert len({r["shard_id"] for r in got}) == 3
    # stdout is a pipe: a progress line on stderr, ending with the total
    assert "tail: done: 400 records" in out.stderr
    raw = tail(endpoint, "--stream", stream, "-n", "5", "-q")
    assert raw.returncode == 0 and len(raw.stdout.splitlines()) == 5
    assert raw.stderr == ""


def test_a_10_mib_record(emulator: EmulatorEndpoint, tmp_path: Path) -> None:
    if emulator.kind == "kinesalite":
        pytest.skip("kinesalite takes records up to 1 MiB (and request bodies up to ~5 MiB)")
    endpoint = emulator.endpoint_url
    stream = f"big-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with client(endpoint) as c:
            await c.create_stream(stream, 1)
            arn = (await c.wait_for_stream(stream))["StreamARN"]
            await c.call("UpdateMaxRecordSize", {"StreamARN": arn, "MaxRecordSizeInKiB": 10240})
            await c.wait_for_stream(stream)

    anyio.run(create)
    big = "b" * (10 * MIB - 100)
    path = tmp_path / "big.txt"
    if emulator.kind == "python":
        path.write_text(f"small\n{big}\nlast\n")
        produce_file(endpoint, stream, path)
    else:  # kinesis-local takes ~20 s to store it: longer than produce's request timeout
        path.write_text("small\nlast\n")
        produce_file(endpoint, stream, path)

        async def put_big() -> None:
            async with kinesis_trio.KinesisClient(
                region_name="us-east-1",
                endpoint_url=endpoint,
                credentials=kinesis_trio.StaticCredentials("a", "b"),
                request_timeout=120,
            ) as c:
                await c.put_records(
                    stream,
                    [{"Data": base64.b64encode(big.encode()).decode(), "PartitionKey": "k"}],
                )

        anyio.run(put_big)
    out = tail(endpoint, "--stream", stream)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines(), key=len) == ["last", "small", big]


def test_stream_arn(emulator: EmulatorEndpoint, tmp_path: Path) -> None:
    if emulator.kind == "kinesalite":
        pytest.skip("kinesalite knows no StreamARN parameter")
    endpoint = emulator.endpoint_url
    stream = create_stream(endpoint)

    async def arn() -> str:
        async with client(endpoint) as c:
            return str((await c.describe_stream_summary(stream))["StreamARN"])

    path, _ = lines_file(tmp_path, 10)
    produce_file(endpoint, stream, path)
    out = tail(endpoint, "--stream-arn", anyio.run(arn), "--format", "base64")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 10


def test_follow_across_a_split(emulator: EmulatorEndpoint, tmp_path: Path) -> None:
    endpoint = emulator.endpoint_url
    stream = create_stream(endpoint)
    first, _ = lines_file(tmp_path, 30, "first")
    second, _ = lines_file(tmp_path, 30, "second")
    produce_file(endpoint, stream, first, "--json", "--key-field", "user")
    proc = subprocess.Popen(
        cli_command(
            "tail",
            "--endpoint-url",
            endpoint,
            "--stream",
            stream,
            "-f",
            "-n",
            "60",
            "--format",
            "json",
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        time.sleep(3)  # tail reads the first 30 and polls

        async def split() -> None:
            async with client(endpoint) as c:
                shards = await c.list_shards(stream)
                await c.split_shard(stream, shards[0]["ShardId"], HALF)
                await c.wait_for_stream(stream)

        anyio.run(split)
        produce_file(endpoint, stream, second, "--json", "--key-field", "user")
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    got = rows(stdout)
    texts = [r["data"] for r in got]
    assert sorted(texts) == sorted(
        [
            json.dumps({"user": f"u{i % 17}", "n": i, "text": f"{p} {i} é"}, ensure_ascii=False)
            for p in ("first", "second")
            for i in range(30)
        ]
    )
    shards = [r["shard_id"] for r in got]
    parent = shards[0]
    assert shards[:30] == [parent] * 30 and parent not in shards[30:]
    assert len(set(shards[30:])) == 2


def test_errors_are_one_line_with_exit_1_or_2(local_engine: EmulatorEndpoint) -> None:
    endpoint = local_engine.endpoint_url
    missing = tail(endpoint, "--stream", "no-such-stream")
    assert missing.returncode == 1
    assert missing.stderr.startswith("kinesis-trio: error: stream 'no-such-stream' not found")
    assert len(missing.stderr.splitlines()) == 1 and missing.stdout == ""
    stream = create_stream(endpoint)
    for args, code, text in [
        (["--from-sequence", "123"], 2, "--from-sequence needs --shard"),
        (["--from-timestamp", "soon"], 2, "--from-timestamp: not a time"),
        (["--shard", "shardId-000000000009"], 1, "no shard 'shardId-000000000009'"),
        (["--from-latest", "--from-start"], 2, "not allowed with argument"),
        (["-n", "0"], 2, "must be at least 1"),
    ]:
        out = tail(endpoint, "--stream", stream, *args)
        lines = out.stderr.splitlines()
        assert out.returncode == code, (args, out.stderr)
        assert len(lines) == 1 and lines[0].startswith("kinesis-trio: error: ")
        assert text in lines[0], (args, lines)
    none = run_cli("tail", "--endpoint-url", endpoint)
    assert none.returncode == 2 and "--stream" in none.stderr


def test_ctrl_c_ends_a_follow_cleanly(local_engine: EmulatorEndpoint, tmp_path: Path) -> None:
    endpoint = local_engine.endpoint_url
    stream = create_stream(endpoint)
    path, _ = lines_file(tmp_path, 5)
    produce_file(endpoint, stream, path)
    proc = subprocess.Popen(
        cli_command("tail", "--endpoint-url", endpoint, "--stream", stream, "-f"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        # Ctrl-C once the five records are printed (not after a fixed sleep: on a loaded
        # machine the process may take longer to start and read them)
        assert proc.stdout is not None
        watchdog = threading.Timer(60, proc.kill)  # a tail that prints nothing fails, not hangs
        watchdog.start()
        try:
            first = [proc.stdout.readline() for _ in range(5)]
        finally:
            watchdog.cancel()
        proc.send_signal(signal.SIGINT)
        rest, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == "kinesis-trio: interrupted"
    assert all(line.endswith("\n") for line in first) and rest == ""


def test_start_positions(emulator: EmulatorEndpoint, tmp_path: Path) -> None:
    endpoint = emulator.endpoint_url
    stream = create_stream(endpoint)
    early, late = tmp_path / "early.txt", tmp_path / "late.txt"
    early.write_text("".join(f"early-{i}\n" for i in range(5)))
    late.write_text("".join(f"late-{i}\n" for i in range(5)))
    produce_file(endpoint, stream, early, "--no-aggregation")
    time.sleep(1.5)
    middle = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(1.5)
    produce_file(endpoint, stream, late, "--no-aggregation")

    iso = middle.isoformat().replace("+00:00", "Z")
    for moment in (iso, f"{middle.timestamp():.3f}"):
        out = tail(endpoint, "--stream", stream, "--from-timestamp", moment, "-q")
        assert out.returncode == 0, out.stderr
        assert sorted(out.stdout.splitlines()) == [f"late-{i}" for i in range(5)]

    everything = rows(tail(endpoint, "--stream", stream, "--format", "json", "-q").stdout)
    assert len(everything) == 10
    third = everything[2]
    out = tail(
        endpoint,
        "--stream",
        stream,
        "--shard",
        third["shard_id"],
        "--from-sequence",
        third["sequence_number"],
        "-q",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [r["data"] for r in everything[2:]]

    latest = tail(endpoint, "--stream", stream, "--from-latest", "-q")
    assert latest.returncode == 0 and latest.stdout == "", latest.stderr


def test_an_aggregate_straddling_shards_is_dropped_and_reported(
    emulator: EmulatorEndpoint,
) -> None:
    endpoint = emulator.endpoint_url
    stream = create_stream(endpoint, shards=2)
    n = 0
    while partition_hash_key(f"k{n}") >= HALF:  # a key of the first shard's half
        n += 1
    low = f"k{n}"
    bad = encode_aggregate([(b"in", low, None), (b"out", low, str(HALF + 1))])

    async def put() -> list[dict[str, Any]]:
        async with client(endpoint) as c:
            answer = await c.call(
                "PutRecords",
                {
                    "StreamName": stream,
                    "Records": [
                        {"Data": bad, "PartitionKey": "agg", "ExplicitHashKey": "0"},
                        {"Data": b"plain", "PartitionKey": low},
                    ],
                },
            )
            return list(answer["Records"])

    placed = anyio.run(put)
    out = tail(endpoint, "--stream", stream)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["plain"]
    reports = [line for line in out.stderr.splitlines() if "aggregate dropped" in line]
    assert len(reports) == 1
    assert (
        f"shard {placed[0]['ShardId']}, sequence number {placed[0]['SequenceNumber']}" in reports[0]
    )


def test_produce_with_a_schema_then_tail_decoded(
    python_engine: EmulatorEndpoint, tmp_path: Path
) -> None:
    """``produce --schema`` registers the schema on the engine's Glue (same port) and writes
    GSR records; ``tail --decode gsr`` prints them back as JSON values."""
    endpoint = python_engine.endpoint_url
    stream = create_stream(endpoint, shards=2)
    schema = tmp_path / "order.avsc"
    schema.write_text(
        json.dumps(
            {
                "type": "record",
                "name": "Order",
                "fields": [
                    {"name": "user", "type": "string"},
                    {"name": "n", "type": "long"},
                    {"name": "text", "type": "string"},
                ],
            }
        ),
        "utf-8",
    )
    path, docs = lines_file(tmp_path, 40)
    name = f"orders-{uuid.uuid4().hex[:8]}"
    gsr = ["--schema", str(schema), "--schema-format", "AVRO", "--schema-name", name]
    produce_file(endpoint, stream, path, *gsr, "--auto-register", "--key-field", "user")
    plain, plain_docs = lines_file(tmp_path, 5, prefix="plain")
    produce_file(endpoint, stream, plain)  # records without the GSR header
    out = tail(endpoint, "--stream", stream, "--decode", "gsr", "-n", "45")
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    errors = [r for r in got if "error" in r]
    assert len(errors) == 5 and all(r["error"].startswith("DecodeError") for r in errors)
    got = [r for r in got if "error" not in r]
    assert sorted((r["value"]["n"], r["value"]) for r in got) == sorted((d["n"], d) for d in docs)
    assert {r["partition_key"] for r in got} == {d["user"] for d in docs}
    assert len({r["schema_version_id"] for r in got}) == 1
    # the secondary deserializer reads the records without the header
    args = ["--decode", "gsr", "--secondary-deserializer", "json", "-n", "45"]
    out = tail(endpoint, "--stream", stream, *args)
    assert out.returncode == 0, out.stderr
    secondary = [r for r in rows(out.stdout) if r.get("secondary")]
    assert sorted(r["value"]["n"] for r in secondary) == sorted(d["n"] for d in plain_docs)
    assert all(r["schema_version_id"] is None and r["data_format"] is None for r in secondary)
    out = tail(endpoint, "--stream", stream, "--secondary-deserializer", "json", "-n", "1")
    assert out.returncode != 0 and "--secondary-deserializer needs --decode gsr" in out.stderr
