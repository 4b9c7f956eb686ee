"""What a cold start imports: a client or producer of an explicit endpoint (a Lambda
function against a local engine, a VPC endpoint) without metrics sinks compiles neither
botocore's endpoint rules (ours, its resolver, loader and the jmespath it imports) nor the
sinks' modules; each is imported when first needed. Checked in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import pytest

from tests.support.emulators import EmulatorEndpoint, new_stream

RULES = ["kinesis_trio._aws._rules", "botocore.regions", "botocore.loaders", "jmespath"]
SINKS = ["kinesis_trio.metrics._cloudwatch", "kinesis_trio.metrics._otel"]
SINKS += ["kinesis_trio.metrics._prometheus", "kinesis_trio.metrics._export"]

_SCRIPT = """
import sys
from kinesis_trio import KinesisClient, Producer, StaticCredentials
from kinesis_trio.aws_lambda import LambdaProducer
creds = StaticCredentials("a", "b")
url = sys.argv[1] or None
KinesisClient(region_name="us-east-1", endpoint_url=url, credentials=creds)
Producer("s", region_name="us-east-1", endpoint_url=url, credentials=creds)
LambdaProducer("s", region_name="us-east-1", endpoint_url=url, credentials=creds)
if sys.argv[2] == "sink":
    from kinesis_trio.metrics import CloudWatchSink, OpenTelemetrySink, PrometheusSink
print(" ".join(m for m in sys.modules if m in sys.argv[3:]))
"""


def _imported(url: str, sink: bool) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, url, "sink" if sink else "", *RULES, *SINKS],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return sorted(out.stdout.split())


def test_an_explicit_endpoint_without_sinks_imports_neither_rules_nor_sinks() -> None:
    assert _imported("http://127.0.0.1:9", sink=False) == []


@pytest.mark.parametrize("sink", [False, True])
def test_the_rules_and_the_sinks_are_imported_when_needed(sink: bool) -> None:
    assert _imported("", sink) == sorted(RULES + (SINKS if sink else []))


#: what a Lambda function's first invocation (a sync handler, no spool, no typed records)
#: does not use: the typed records and the spool slots
LAMBDA = ["kinesis_trio.aws_lambda._records", "kinesis_trio.aws_lambda._slots"]

_INVOCATION = """
import sys
from kinesis_trio.aws_lambda import LambdaProducer
from kinesis_trio.testing import FakeKinesis
from tests.aws_lambda.support import Context
from tests.support.helpers import CREDS
fake = FakeKinesis()
fake.create_stream("s", 2)
kinesis = LambdaProducer(
    "s", region_name="us-east-1", endpoint_url="http://fake.local", credentials=CREDS,
    transport=fake.transport(),
)

@kinesis.handler
def handler(event, context, records):
    records.put(b"x", partition_key="k")
    return "ok"

assert handler({}, Context()) == "ok"
kinesis.close()
print(" ".join(m for m in sys.modules if m in sys.argv[2:]))
if sys.argv[1] == "typed":
    from kinesis_trio.aws_lambda import KinesisRecord, typed
    print(" ".join(m for m in sys.modules if m in sys.argv[2:]))
"""


@pytest.mark.parametrize("typed", [False, True])
def test_a_lambda_functions_first_invocation_imports_neither_typed_records_nor_slots(
    typed: bool,
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _INVOCATION, "typed" if typed else "", *LAMBDA],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    lines = out.stdout.splitlines()
    assert lines[0] == ""
    if typed:  # named: imported then
        assert lines[1] == LAMBDA[0]


#: what a Lambda function's first invocation against its endpoint (a sync handler, the
#: credentials in the environment variables as Lambda sets them, no spool, no sinks) does
#: not import: botocore's session and client machinery (the credentials are the
#: environment's, read by botocore's ``EnvProvider`` alone), the endpoint rules, structlog
#: (nothing logged), the trio backend, the Glue client, the spool's writer and disk
#: formats, the GSR and protobuf; and the typed records and spool slots
FIRST_INVOCATION = [
    "botocore.session",
    "botocore.client",
    "botocore.loaders",
    "botocore.regions",
    "jmespath",
    "structlog",
    "trio",
    "anyio._backends._trio",
    "kinesis_trio._aws._glue",
    "kinesis_trio._aws._rules",
    "kinesis_trio._shell._spooler",
    "kinesis_trio._disk",
    "kinesis_trio.gsr",
    "google.protobuf",
    *LAMBDA,
]

_FIRST = """
import sys
from kinesis_trio.aws_lambda import LambdaProducer
kinesis = LambdaProducer(sys.argv[2], endpoint_url=sys.argv[1])

class Context:
    def get_remaining_time_in_millis(self):
        return 60_000

@kinesis.handler
def handler(event, context, records):
    records.put(b"x", partition_key="k")
    return "ok"

assert handler({}, Context()) == "ok"
assert kinesis.producer.outstanding_records == 0
print(" ".join(m for m in sys.modules if m in sys.argv[3:]))
kinesis.close()
"""


def test_a_lambda_functions_first_invocation_against_an_engine_imports_only_its_path(
    local_engine: EmulatorEndpoint,
) -> None:
    stream = anyio.run(new_stream, local_engine, 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(  # as Lambda sets them
        AWS_ACCESS_KEY_ID="AKIDLAMBDA",
        AWS_SECRET_ACCESS_KEY="lambda-secret",
        AWS_SESSION_TOKEN="lambda-token",
        AWS_REGION="us-east-1",
    )
    out = subprocess.run(
        [sys.executable, "-c", _FIRST, local_engine.endpoint_url, stream, *FIRST_INVOCATION],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.stdout.split() == []
