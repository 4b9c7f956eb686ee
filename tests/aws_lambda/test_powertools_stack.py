"""The two-argument handler ``(event, context)`` stacked with Powertools for AWS Lambda's
decorators (a dev dependency), in process against the fake: ``@logger.inject_lambda_context``,
``@tracer.capture_lambda_handler`` (disabled: no X-Ray daemon) and ``@metrics.log_metrics``
above and below ``@kinesis.handler``, sync and async handlers; the invocation reached with
``kinesis.records`` / ``current_records()``. And the producer's logs through Powertools'
Logger (``copy_config_to_registered_loggers``). The real runtime: ``test_runtime_batch.py``."""

from __future__ import annotations

import io
import itertools
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from kinesis_trio.aws_lambda import (
    Invocation,
    InvocationReport,
    LambdaProducer,
    Record,
    SqsMessage,
    current_records,
)
from kinesis_trio.testing import FakeKinesis
from tests.aws_lambda.support import Context, lambda_producer, sqs_event
from tests.support.helpers import user_data

_SERVICES = itertools.count()


class LambdaContext(Context):
    """Lambda's context object as Powertools' logger reads it too."""

    def __init__(self) -> None:
        super().__init__()
        self.function_name = "orders-fn"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:orders-fn"
        self.aws_request_id = "req-1"


class Tools:
    """A Powertools logger (to a buffer), a disabled tracer and metrics, for one test."""

    def __init__(self) -> None:
        service = f"svc-{next(_SERVICES)}"
        self.buffer = io.StringIO()
        self.logger = Logger(service=service, logger_handler=logging.StreamHandler(self.buffer))
        self.tracer = Tracer(service=service, disabled=True)
        self.metrics = Metrics(namespace="KinesisTrioTests", service=service)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        wrapped: Callable[..., Any] = self.metrics.log_metrics(fn)
        wrapped = self.tracer.capture_lambda_handler(wrapped)
        wrapped = self.logger.inject_lambda_context(wrapped)
        return wrapped

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.buffer.getvalue().splitlines() if line]


@pytest.fixture
def fake() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    return fake


@pytest.fixture
def tools() -> Iterator[Tools]:
    made = Tools()
    yield made
    made.metrics.clear_metrics()


def _stacked(
    kinesis: LambdaProducer, tools: Tools, order: str, kind: str
) -> Callable[[Any, Any], Any]:
    """The handler of each kind, with Powertools' decorators ``above`` or ``below`` ours."""

    def one(records: Invocation, record: Record) -> None:
        assert isinstance(record, SqsMessage)
        if record.body == "b":
            raise ValueError("cannot use b")
        records.put(record.body.encode(), partition_key="k")

    def sync_body(event: Any, context: Any) -> dict[str, Any]:
        records = kinesis.records
        assert current_records() is records
        tools.logger.info("putting", items=len(event["Records"]))
        tools.metrics.add_metric(name="Items", unit=MetricUnit.Count, value=3)
        records.process(lambda record: one(records, record), typed=True)
        return {"batchItemFailures": []}

    async def async_body(event: Any, context: Any) -> dict[str, Any]:
        records = kinesis.records
        assert current_records() is records
        tools.logger.info("putting", items=len(event["Records"]))
        tools.metrics.add_metric(name="Items", unit=MetricUnit.Count, value=3)

        async def aone(record: Record) -> None:
            assert isinstance(record, SqsMessage)
            if record.body == "b":
                raise ValueError("cannot use b")
            await records.aput(record.body.encode(), partition_key="k")

        await records.aprocess(aone, typed=True)
        return {"batchItemFailures": []}

    body: Callable[..., Any] = sync_body if kind == "sync" else async_body
    if order == "above":
        return tools.wrap(kinesis.handler(body))
    return kinesis.handler(tools.wrap(body))


def _emf(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if '"_aws"' in line]


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("order", ["above", "below"])
@pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")
def test_powertools_decorators_stack_in_either_order(
    fake: FakeKinesis,
    tools: Tools,
    backend: str,
    order: str,
    kind: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The partial batch response goes through Powertools' decorators; the logger's line
    has the Lambda context's keys; the metric is flushed as EMF by ``log_metrics`` —
    except below an async handler, where Powertools' sync decorator returns (and
    flushes) before the coroutine runs: the metric waits for the next flush (so put
    Powertools' decorators above an async handler: docs/lambda.md)."""
    kinesis = lambda_producer(fake, backend, batch=True)
    try:
        handler = _stacked(kinesis, tools, order, kind)
        answer = handler(sqs_event("a", "b", "c"), LambdaContext())
    finally:
        kinesis.close()
    assert answer == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert sorted(user_data(fake)) == [b"a", b"c"]
    logged = [line for line in tools.lines() if line.get("message") == "putting"]
    assert len(logged) == 1, tools.lines()
    assert logged[0]["function_name"] == "orders-fn" and logged[0]["items"] == 3
    assert logged[0]["function_request_id"] == "req-1"
    emitted = [m for m in _emf(capsys.readouterr().out) if "Items" in m]
    if order == "below" and kind == "async":
        assert emitted == []
        assert tools.metrics.metric_set["Items"]["Value"] == [3.0]  # for the next flush
    else:
        assert len(emitted) == 1 and emitted[0]["Items"] == [3.0], emitted


def test_the_records_outside_an_invocation(fake: FakeKinesis, backend: str) -> None:
    kinesis = lambda_producer(fake, backend)
    with pytest.raises(RuntimeError, match="no Lambda invocation"):
        current_records()
    with pytest.raises(RuntimeError, match="no Lambda invocation"):
        kinesis.records  # noqa: B018
    other = lambda_producer(fake, backend)

    @kinesis.handler
    def handler(event: Any, context: Any) -> None:
        with pytest.raises(RuntimeError, match="another LambdaProducer"):
            other.records  # noqa: B018
        kinesis.records.put(b"x", partition_key="k")

    try:
        handler({}, Context())
    finally:
        kinesis.close()
        other.close()
    assert user_data(fake) == [b"x"]


def test_a_three_argument_handler_under_a_decorator_that_drops_the_third(
    fake: FakeKinesis, backend: str
) -> None:
    """Powertools' tracer wraps ``(event, context, **kwargs)``: a three-argument handler
    under it is refused when decorated, saying what to write; under the logger (which
    passes ``*args`` on) it works."""
    kinesis = lambda_producer(fake, backend)
    tools = Tools()

    def handler(event: Any, context: Any, records: Invocation) -> None:
        records.put(b"y", partition_key="k")

    with pytest.raises(TypeError, match=r"\(event, context\).*kinesis.records"):
        kinesis.handler(tools.tracer.capture_lambda_handler(handler))
    wrapped = kinesis.handler(tools.logger.inject_lambda_context(handler))
    try:
        wrapped({}, LambdaContext())
    finally:
        kinesis.close()
    assert user_data(fake) == [b"y"]


def test_the_producers_logs_through_powertools_logger(
    fake: FakeKinesis, tools: Tools, backend: str
) -> None:
    """``copy_config_to_registered_loggers(source_logger=logger, include={"kinesis_trio"})``
    gives the producer's loggers Powertools' handler: a failed item's warning comes out as
    Powertools' JSON, with the Lambda context's keys."""
    logging.getLogger("kinesis_trio")  # registered, so that Powertools finds it
    copy_config_to_registered_loggers(source_logger=tools.logger, include={"kinesis_trio"})
    kinesis = lambda_producer(fake, backend, batch=True)

    @tools.logger.inject_lambda_context
    @kinesis.handler
    def handler(event: Any, context: Any) -> None:
        kinesis.records.fail_item("b")

    try:
        handler(sqs_event("a", "b"), LambdaContext())
    finally:
        kinesis.close()
        std = logging.getLogger("kinesis_trio")
        for handler_ in list(std.handlers):
            std.removeHandler(handler_)
        std.setLevel(logging.NOTSET)
        std.propagate = True
    failed = [line for line in tools.lines() if "lambda_item_failed" in str(line["message"])]
    assert len(failed) == 1, tools.lines()
    assert failed[0]["level"] == "WARNING" and failed[0]["function_name"] == "orders-fn"
    assert "item='b'" in failed[0]["message"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_invocation_report_as_powertools_metrics(
    fake: FakeKinesis,
    tools: Tools,
    backend: str,
    kind: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``on_report`` gets each invocation's report before the answer goes back: with
    ``@metrics.log_metrics`` above ``@kinesis.handler``, the metrics it adds are flushed
    with the invocation's."""

    def report(report: InvocationReport) -> None:
        tools.metrics.add_metric(
            name="RecordsConfirmed", unit=MetricUnit.Count, value=report.confirmed
        )
        tools.metrics.add_metric(
            name="ItemsFailed", unit=MetricUnit.Count, value=len(report.failed_items)
        )

    kinesis = lambda_producer(fake, backend, batch=True, on_report=report)

    def body(event: Any, context: Any) -> None:
        kinesis.records.put(b"a", partition_key="k", item="a")
        kinesis.records.put(b"a2", partition_key="k", item="a")
        kinesis.records.fail_item("b")

    async def abody(event: Any, context: Any) -> None:
        await kinesis.records.aput(b"a", partition_key="k", item="a")
        await kinesis.records.aput(b"a2", partition_key="k", item="a")
        kinesis.records.fail_item("b")

    handler = tools.metrics.log_metrics(kinesis.handler(body if kind == "sync" else abody))
    try:
        assert handler(sqs_event("a", "b"), LambdaContext()) == {
            "batchItemFailures": [{"itemIdentifier": "b"}]
        }
    finally:
        kinesis.close()
    emitted = _emf(capsys.readouterr().out)
    assert len(emitted) == 1, emitted
    assert emitted[0]["RecordsConfirmed"] == [2.0] and emitted[0]["ItemsFailed"] == [1.0]


def test_a_failing_report_hook_is_logged_not_raised(
    fake: FakeKinesis, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    def report(report: InvocationReport) -> None:
        raise RuntimeError("hook broke")

    kinesis = lambda_producer(fake, backend, on_report=report)

    @kinesis.handler
    def handler(event: Any, context: Any) -> str:
        kinesis.records.put(b"x", partition_key="k")
        return "done"

    try:
        with caplog.at_level(logging.WARNING, logger="kinesis_trio.aws_lambda"):
            assert handler({}, Context()) == "done"
    finally:
        kinesis.close()
    assert any("lambda_on_report_failed" in r.getMessage() for r in caplog.records)
    with pytest.raises(TypeError, match="on_report"):
        LambdaProducer("s", on_report="no")  # type: ignore[arg-type]
