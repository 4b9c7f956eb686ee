"""Plain threads (no event loop in sight) writing records through one SyncProducer.

Each thread puts its records (``put`` returns a ``concurrent.futures.Future`` at once and
blocks only while the producer is at its limits); the main thread flushes, then checks every
future, logs the failures and prints a JSON summary line. Exit status 1 if any failed.

Run it (endpoint, region and credentials as for any AWS SDK)::

    AWS_ENDPOINT_URL_KINESIS=http://localhost:4567 AWS_REGION=us-east-1 \\
        uv run python examples/sync_threads.py --stream events --threads 8 --records 5000

The stream may also come from ``KINESIS_STREAM``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from concurrent.futures import Future

from kinesis_trio import RecordResult, SyncProducer

log = logging.getLogger("sync_threads")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default=os.environ.get("KINESIS_STREAM"))
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--records", type=int, default=1000, help="per thread")
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    args = parser.parse_args()
    if not args.stream:
        parser.error("--stream or KINESIS_STREAM is required")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    futures: list[list[Future[RecordResult]]] = [[] for _ in range(args.threads)]
    started = time.perf_counter()
    with SyncProducer(
        args.stream,
        region_name=os.environ.get("AWS_REGION"),
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_KINESIS"),
        backend=args.backend,
    ) as producer:

        def work(thread_id: int) -> None:
            mine = futures[thread_id]
            for n in range(args.records):
                record = {"thread": thread_id, "n": n, "at": time.time()}
                mine.append(producer.put(json.dumps(record).encode(), f"t{thread_id}-{n % 32}"))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(args.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.flush(timeout=60)  # every future above is resolved after this
    elapsed = time.perf_counter() - started

    ok = failed = 0
    for future in (f for mine in futures for f in mine):
        result = future.result()
        if result.ok:
            ok += 1
        else:
            failed += 1
            log.warning(
                "record failed: partition_key=%s error=%s: %s",
                result.partition_key,
                result.error_code,
                result.error_message,
            )
    summary = {"sent": ok + failed, "ok": ok, "failed": failed, "seconds": round(elapsed, 3)}
    print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
