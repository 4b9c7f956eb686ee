"""A Flask app putting records through one SyncProducer shared by every request thread.

The producer (an event loop on a background thread) starts with the app and is closed
(flushed) at interpreter exit, or by ``app.extensions["kinesis_producer"].close()``.
Requests never make one event-loop round trip per record; a request waits only while the
producer is at its limits (``PUT_TIMEOUT``, then 503 ``ProducerBusy``).

* ``POST /events`` ``{"partition_key": "...", "payload": {...}}``: waits for Kinesis to
  confirm; 200 with the shard id and sequence number, or 503 with the error code.
* ``POST /events/batch`` ``[{"partition_key": ..., "payload": ...}, ...]``: puts them all
  (``put_many``), waits for all; 200 with ``{"ok": n, "failed": [...]}``.

Run it (endpoint, region and credentials as for any AWS SDK; the stream from
``KINESIS_STREAM``)::

    KINESIS_STREAM=events AWS_ENDPOINT_URL_KINESIS=http://localhost:4567 AWS_REGION=us-east-1 \\
        uv run python examples/sync_flask.py --port 5000
    curl -X POST localhost:5000/events -H 'content-type: application/json' \\
        -d '{"partition_key": "user-1", "payload": {"clicked": "buy"}}'

(``flask --app examples/sync_flask.py run`` works too.)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
from typing import Any

from flask import Flask, Response, jsonify, request

from kinesis_trio import ProducerClosedError, ProducerConfig, SyncProducer

#: Longest a request waits for room in the producer before answering 503.
PUT_TIMEOUT = 5.0
#: Longest a request waits for Kinesis to confirm (the producer retries until record_ttl).
RESULT_TIMEOUT = 35.0


def _encode(event: Any) -> tuple[bytes, str]:
    if not isinstance(event, dict) or not isinstance(event.get("partition_key"), str):
        raise ValueError('expected {"partition_key": "...", "payload": ...}')
    return json.dumps(event.get("payload"), separators=(",", ":")).encode(), event["partition_key"]


def create_app(
    stream_name: str | None = None,
    *,
    config: ProducerConfig | None = None,
    transport: Any = None,
    backend: str = "trio",
) -> Flask:
    """The app; ``stream_name`` defaults to ``KINESIS_STREAM``. ``transport`` is for tests."""
    producer = SyncProducer(
        stream_name or os.environ["KINESIS_STREAM"],
        region_name=os.environ.get("AWS_REGION"),
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_KINESIS"),
        config=config,
        transport=transport,
        backend=backend,
    ).open()  # closed at exit (SyncProducer registers that), or explicitly
    app = Flask(__name__)
    app.extensions["kinesis_producer"] = producer

    def error(code: str, message: str, status: int) -> tuple[Response, int]:
        return jsonify(error_code=code, error_message=message), status

    @app.post("/events")
    def post_event() -> Any:
        try:
            data, key = _encode(request.get_json(silent=True))
            future = producer.put(data, key, timeout=PUT_TIMEOUT)
        except (TypeError, ValueError) as exc:
            return error("InvalidRecord", str(exc), 400)
        except TimeoutError:
            return error("ProducerBusy", "no room in the producer", 503)
        except ProducerClosedError as exc:
            return error("ProducerClosed", str(exc), 503)
        result = future.result(timeout=RESULT_TIMEOUT)
        if not result.ok:
            return error(result.error_code or "Unknown", result.error_message or "", 503)
        return jsonify(shard_id=result.shard_id, sequence_number=result.sequence_number)

    @app.post("/events/batch")
    def post_batch() -> Any:
        events = request.get_json(silent=True)
        if not isinstance(events, list):
            return error("InvalidRecord", "expected a JSON list of events", 400)
        try:
            futures = producer.put_many([_encode(e) for e in events])
        except (TypeError, ValueError) as exc:  # nothing was accepted
            return error("InvalidRecord", str(exc), 400)
        except ProducerClosedError as exc:
            return error("ProducerClosed", str(exc), 503)
        concurrent.futures.wait(futures, timeout=RESULT_TIMEOUT)
        results = [f.result(timeout=0) for f in futures]
        failed = [
            {"index": i, "error_code": r.error_code} for i, r in enumerate(results) if not r.ok
        ]
        return jsonify(ok=len(results) - len(failed), failed=failed)

    @app.get("/health")
    def health() -> Any:
        return jsonify(outstanding_records=producer.outstanding_records)

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="kinesis-trio Flask example")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--stream", help="defaults to KINESIS_STREAM")
    args = parser.parse_args()
    create_app(args.stream).run(host=args.host, port=args.port, threaded=True)
