"""Every example runs against kinesalite, and its records are read back from the stream.

Scripts run as subprocesses with the AWS environment variables a user would set; the web
apps run in-process (FastAPI through httpx's ASGI transport with the app's lifespan, Flask
through its test client). Error paths of the apps run against the in-memory fake.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from examples import fastapi_app, sync_flask
from kinesis_trio import KinesisClient, ProducerConfig, StaticCredentials, deaggregate
from kinesis_trio.testing import FakeKinesis, Faults
from tests.support.emulators import EmulatorEndpoint

pytestmark = pytest.mark.subprocess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CREDS = StaticCredentials("a", "b")


class Gate:
    """A FakeKinesis hook holding every PutRecords while ``opened`` is clear."""

    def __init__(self) -> None:
        self.opened = anyio.Event()
        self.held = 0

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            self.held += 1
            try:
                await self.opened.wait()
            finally:
                self.held -= 1
        return None


def _client(endpoint: str) -> KinesisClient:
    return KinesisClient(region_name="us-east-1", endpoint_url=endpoint, credentials=CREDS)


async def create_stream(endpoint: str, shards: int = 2) -> str:
    name = f"ex-{uuid.uuid4().hex[:10]}"
    async with _client(endpoint) as client:
        await client.create_stream(name, shards)
        await client.wait_for_stream(name)
    return name


async def read_back(endpoint: str, name: str) -> Counter[bytes]:
    """Each user record's data in the stream, with how many times it is there."""
    async with _client(endpoint) as client:
        stored = await client.read_all(name)
    return Counter(
        user.data
        for records in stored.values()
        for record in records
        for user in deaggregate(record["Data"], record["PartitionKey"])
    )


@pytest.fixture
def stream(local_engine: EmulatorEndpoint) -> str:
    return anyio.run(create_stream, local_engine.endpoint_url)


@pytest.fixture
def aws_env(local_engine: EmulatorEndpoint, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The variables a user sets, in this process (for the apps) and for subprocesses."""
    values = {
        "AWS_ENDPOINT_URL_KINESIS": local_engine.endpoint_url,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "example-secret",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "KINESIS_STREAM"):
        monkeypatch.delenv(key, raising=False)
    return dict(os.environ)


def run_script(
    env: dict[str, str], script: str, *args: str, stdin: str | None = None
) -> dict[str, Any]:
    """Run an example; return its JSON summary (its last stdout line)."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary


def test_trio_service(aws_env: dict[str, str], stream: str) -> None:
    summary = run_script(aws_env, "trio_service.py", "--stream", stream, "--workers", "3")
    assert summary == {"sent": 3000, "ok": 3000, "failed": 0}
    found = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    events = Counter((e["worker"], e["n"]) for e in map(json.loads, found.elements()))
    assert events == Counter((w, n) for w in range(3) for n in range(1000))


def test_trio_service_graceful_shutdown(aws_env: dict[str, str], stream: str) -> None:
    args = ["--stream", stream, "--events", "0", "--interval", "0.002"]
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "trio_service.py"), *args],
        env=aws_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "SIGINT: stopping the workers" in err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["sent"] > 0 and summary["ok"] == summary["sent"] and not summary["failed"]
    found = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    assert sum(found.values()) == summary["sent"]  # every accepted record landed, once
    assert max(found.values()) == 1


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_threads(aws_env: dict[str, str], stream: str, backend: str) -> None:
    summary = run_script(
        aws_env, "sync_threads.py", "--stream", stream, "--threads", "4", "--records", "250",
        "--backend", backend,
    )  # fmt: skip
    assert (summary["sent"], summary["ok"], summary["failed"]) == (1000, 1000, 0)
    found = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    events = Counter((e["thread"], e["n"]) for e in map(json.loads, found.elements()))
    assert events == Counter((t, n) for t in range(4) for n in range(250))


@pytest.mark.parametrize(("backend", "via"), [("asyncio", "file"), ("trio", "stdin")])
def test_anyio_script_lines(
    aws_env: dict[str, str], stream: str, tmp_path: Path, backend: str, via: str
) -> None:
    lines = [f"line {i} {uuid.uuid4().hex}" for i in range(700)]
    text = "\n".join(lines) + "\n"
    failed = tmp_path / "failed.jsonl"
    source = ["--file", "-"]
    if via == "file":
        (tmp_path / "in.txt").write_text(text)
        source = ["--file", str(tmp_path / "in.txt")]
    summary = run_script(
        aws_env, "anyio_script.py", "--stream", stream, "--backend", backend, "--failed",
        str(failed), *source, stdin=text if via == "stdin" else None,
    )  # fmt: skip
    assert summary == {"sent": 700, "ok": 700, "failed": 0}
    assert failed.read_text() == ""
    found = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    assert found == Counter(line.encode() for line in lines)


def test_anyio_script_generate(aws_env: dict[str, str], stream: str) -> None:
    summary = run_script(aws_env, "anyio_script.py", "--stream", stream, "--generate", "500")
    assert summary == {"sent": 500, "ok": 500, "failed": 0}
    found = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    assert sorted(json.loads(d)["n"] for d in found.elements()) == list(range(500))


# -- FastAPI (in-process, with the lifespan) -------------------------------------------------


@pytest.mark.anyio
async def test_fastapi_app(aws_env: dict[str, str]) -> None:
    endpoint = aws_env["AWS_ENDPOINT_URL_KINESIS"]
    name = await create_stream(endpoint)
    app = fastapi_app.create_app(name)
    replies: list[httpx.Response] = []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as http,
    ):

        async def post(i: int) -> None:
            event = {"partition_key": f"user-{i % 5}", "payload": {"i": i}}
            replies.append(await http.post("/events", json=event))

        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(post, i)
        bad = await http.post("/events", json={"partition_key": "", "payload": {}})
        assert bad.status_code == 422
        health = await http.get("/health")
        assert health.json() == {"outstanding_records": 0}
    assert [r.status_code for r in replies] == [200] * 40
    places = {(r.json()["shard_id"], r.json()["sequence_number"]) for r in replies}
    assert all(shard and seq for shard, seq in places)
    found = await read_back(endpoint, name)
    assert sorted(json.loads(d)["i"] for d in found.elements()) == list(range(40))


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_KINESIS", "http://fake.local")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.mark.anyio
@pytest.mark.usefixtures("fake_env")
async def test_fastapi_errors_and_backpressure() -> None:
    gate = Gate()
    gate.opened.set()  # open for now
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    config = ProducerConfig(max_outstanding_records=1, max_record_size=1000)
    app = fastapi_app.create_app("s", config=config, transport=fake.transport(), put_timeout=0.2)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as http,
    ):
        event = {"partition_key": "k", "payload": {"x": 1}}
        assert (await http.post("/events", json=event)).status_code == 200
        big = await http.post("/events", json={"partition_key": "k", "payload": {"x": "y" * 2000}})
        assert big.status_code == 400
        assert "max_record_size" in big.json()["error_message"]
        # the backend hangs: the first request holds the only slot, the next one waits, then 503
        gate.opened = anyio.Event()  # shut
        first: list[httpx.Response] = []
        async with anyio.create_task_group() as tg:

            async def hold() -> None:
                first.append(await http.post("/events", json=event))

            tg.start_soon(hold)
            while not gate.held:  # noqa: ASYNC110 -- polling the fake's counter
                await anyio.sleep(0.01)
            busy = await http.post("/events", json=event)
            assert busy.status_code == 503
            assert busy.json()["error_code"] == "ProducerBusy"
            gate.opened.set()
        assert first[0].status_code == 200
        # a write Kinesis refuses: 503 with its error code
        fake.faults = Faults(fatal={"s": "AccessDeniedException"})
        denied = await http.post("/events", json=event)
        assert denied.status_code == 503
        assert denied.json()["error_code"] == "AccessDeniedException"
    assert len(fake.records("s")) == 2


# -- Flask (in-process, test client) ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_flask_app(aws_env: dict[str, str], stream: str, backend: str) -> None:
    app = sync_flask.create_app(stream, backend=backend)
    producer = app.extensions["kinesis_producer"]
    try:
        client = app.test_client()
        for i in range(10):
            reply = client.post("/events", json={"partition_key": f"u{i}", "payload": {"i": i}})
            assert reply.status_code == 200, reply.json
            assert reply.json is not None and reply.json["sequence_number"]
        batch = [{"partition_key": f"b{i % 3}", "payload": {"i": 100 + i}} for i in range(25)]
        reply = client.post("/events/batch", json=batch)
        assert reply.json == {"ok": 25, "failed": []}
        bad = client.post("/events", json={"partition_key": 5, "payload": {}})
        assert bad.status_code == 400
        bad = client.post("/events/batch", json=[{"payload": {}}])
        assert bad.status_code == 400
        assert client.get("/health").json == {"outstanding_records": 0}
    finally:
        producer.close()
    found = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    numbers = sorted(json.loads(d)["i"] for d in found.elements())
    assert numbers == list(range(10)) + list(range(100, 125))


@pytest.mark.usefixtures("fake_env")
def test_flask_failures() -> None:
    fake = FakeKinesis(faults=Faults(fatal={"s": "AccessDeniedException"}))
    fake.create_stream("s", shard_count=1)
    app = sync_flask.create_app("s", transport=fake.transport())
    producer = app.extensions["kinesis_producer"]
    try:
        client = app.test_client()
        reply = client.post("/events", json={"partition_key": "k", "payload": {}})
        assert reply.status_code == 503
        assert reply.json is not None and reply.json["error_code"] == "AccessDeniedException"
        reply = client.post("/events/batch", json=[{"partition_key": "k", "payload": 1}] * 2)
        assert reply.json == {
            "ok": 0,
            "failed": [{"index": i, "error_code": "AccessDeniedException"} for i in range(2)],
        }
    finally:
        producer.close()
    reply = app.test_client().post("/events", json={"partition_key": "k", "payload": {}})
    assert reply.status_code == 503 and reply.json is not None
    assert reply.json["error_code"] == "ProducerClosed"


def test_lambda_function(aws_env: dict[str, str], stream: str, tmp_path: Path) -> None:
    """The Lambda example, invoked as Lambda would with an event of each source: the item
    that is not JSON is named for a retry, the others are in the stream."""
    env = dict(aws_env, SPOOL_DIR=str(tmp_path / "spool"))
    answers = run_script(env, "lambda_function.py", "--stream", stream)
    assert answers == {
        "kinesis": {"batchItemFailures": [{"itemIdentifier": "2"}]},
        "sqs": {"batchItemFailures": []},
        "dynamodb": {"batchItemFailures": []},
    }
    stored = anyio.run(read_back, aws_env["AWS_ENDPOINT_URL_KINESIS"], stream)
    bodies = sorted(json.loads(data)["source"] for data in stored)
    assert bodies == ["aws:dynamodb", "aws:kinesis", "aws:sqs", "aws:sqs"]
