"""A FastAPI app whose request handlers put records through one shared Producer.

The producer opens in the app's lifespan (so a missing stream fails the startup) and closes
(flushing) at shutdown. ``POST /events`` takes ``{"partition_key": "...", "payload": {...}}``
and answers once Kinesis has confirmed the record: 200 with its shard id and sequence
number, or 503 with the error code. While the producer is at its limits a handler *waits*
in ``put`` (memory stays bounded by ``max_outstanding_records``/``_bytes``); after
``PUT_TIMEOUT`` seconds of waiting it answers 503 ``ProducerBusy`` instead.

Run it (endpoint, region and credentials as for any AWS SDK; the stream from
``KINESIS_STREAM``)::

    KINESIS_STREAM=events AWS_ENDPOINT_URL_KINESIS=http://localhost:4567 AWS_REGION=us-east-1 \\
        uv run python examples/fastapi_app.py --port 8000
    curl -X POST localhost:8000/events -H 'content-type: application/json' \\
        -d '{"partition_key": "user-1", "payload": {"clicked": "buy"}}'

or ``uvicorn examples.fastapi_app:app``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from kinesis_trio import Producer, ProducerConfig

#: Longest a request waits for room in the producer before answering 503.
PUT_TIMEOUT = 5.0
#: Longest a request waits for Kinesis to confirm its record (the producer retries inside).
RESULT_TIMEOUT = 35.0


class Event(BaseModel):
    partition_key: str = Field(min_length=1, max_length=256)
    payload: dict[str, Any]


def create_app(
    stream_name: str | None = None,
    *,
    config: ProducerConfig | None = None,
    transport: Any = None,
    put_timeout: float = PUT_TIMEOUT,
) -> FastAPI:
    """The app; ``stream_name`` defaults to ``KINESIS_STREAM`` (read at startup).
    ``transport`` is for tests (``kinesis_trio.testing.FakeKinesis().transport()``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stream = stream_name or os.environ["KINESIS_STREAM"]
        async with Producer(
            stream,
            region_name=os.environ.get("AWS_REGION"),
            endpoint_url=os.environ.get("AWS_ENDPOINT_URL_KINESIS"),
            config=config,
            transport=transport,
        ) as producer:
            app.state.producer = producer
            yield
        # leaving the block flushed every accepted record (up to config.close_timeout)

    app = FastAPI(title="kinesis-trio FastAPI example", lifespan=lifespan)

    @app.post("/events")
    async def post_event(event: Event, request: Request) -> JSONResponse:
        producer: Producer = request.app.state.producer
        data = json.dumps(event.payload, separators=(",", ":")).encode()
        try:
            with anyio.fail_after(put_timeout):
                outcome = await producer.put(data, event.partition_key)
        except TimeoutError:
            return JSONResponse(
                {"error_code": "ProducerBusy", "error_message": "no room in the producer"},
                status_code=503,
            )
        except ValueError as exc:  # e.g. a payload over max_record_size
            return JSONResponse(
                {"error_code": "InvalidRecord", "error_message": str(exc)}, status_code=400
            )
        # If the client goes away, this handler is cancelled here: the record is still sent.
        with anyio.fail_after(RESULT_TIMEOUT):
            result = await outcome.wait()
        if not result.ok:
            return JSONResponse(
                {"error_code": result.error_code, "error_message": result.error_message},
                status_code=503,
            )
        return JSONResponse(
            {"shard_id": result.shard_id, "sequence_number": result.sequence_number},
            status_code=200,
        )

    @app.get("/health")
    async def health(request: Request) -> dict[str, int]:
        producer: Producer = request.app.state.producer
        return {"outstanding_records": producer.outstanding_records}

    return app


app = create_app()


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description="kinesis-trio FastAPI example")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stream", help="defaults to KINESIS_STREAM")
    args = parser.parse_args()
    uvicorn.run(create_app(args.stream), host=args.host, port=args.port)
