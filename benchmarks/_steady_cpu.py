"""The producer's own CPU per record at a steady rate, in virtual time.

In real time against an emulator, subtracting a null producer's loop, that loop's own CPU
at 100 and 1,000 records/s varies by more than the producer's whole cost, so the
difference cannot be told from noise. Here the harness's arrival loop
(``_harness._drive_polled``) runs on a virtual clock: a trio clock and an asyncio event
loop whose time jumps to the next deadline instead of sleeping. Nothing waits for real time,
so a run is back-to-back work, and a steady rate's schedule (linger windows, the tick, each
request's round trip) is kept exactly.

The endpoint is in the process: the producer's own HTTP/1.1 pool (``Http11Pool``: request
framing and answer parsing as on a socket) talks to an in-memory byte stream whose far end
is the ``FakeKinesis`` of ``kinesis_trio.testing``; each answer arrives ``RTT`` virtual
seconds after its request. The CPU the far end spends (reading the request, the fake's
routing and storing, writing the answer) is measured with ``time.process_time`` around it
and subtracted, as is a null producer's run of the same schedule in the same process, just
before or after. What is left is the producer's own CPU: everything but the socket calls.

    uv run python -m benchmarks steady cpu      # --rates 100,1000,5000,20000 --shards 8,32
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import anyio
import anyio.abc

from benchmarks._harness import (
    CREDENTIALS,
    KEYS,
    SIZE,
    TICK,
    Job,
    _drive,
    _NullProducer,
    run_module,
)
from tests.support.clock import virtual_asyncio_loop

#: the virtual round trip of a request (kinesalite's p50 here: 10-13 ms)
RTT = 0.010
ORIGIN_URL = "http://virtual.kinesis:4567"


class _Far:
    """The endpoint's end of every connection: the fake, and the CPU spent on its side."""

    def __init__(self, shards: int, rtt: float) -> None:
        from kinesis_trio.testing import FakeKinesis

        self.fake = FakeKinesis()
        self.fake.create_stream("virtual", shard_count=shards)
        self.rtt = rtt
        self.cpu = 0.0
        self.requests = 0

    async def answer(self, head: bytes, body: bytes) -> bytes:
        import httpx

        lines = head.decode("latin-1").split("\r\n")
        headers = [(name, value) for name, _, value in (f.partition(": ") for f in lines[1:])]
        request = httpx.Request("POST", ORIGIN_URL + "/", headers=headers, content=body)
        # the fake answers without a checkpoint (no latency configured, no server model):
        # nothing else runs between these two clock readings
        response = await self.fake._handle(request)
        content = response.content
        out = [f"HTTP/1.1 {response.status_code} X\r\n"]
        for name, value in response.headers.items():
            if name.lower() != "content-length":
                out.append(f"{name}: {value}\r\n")
        out.append(f"Content-Length: {len(content)}\r\n\r\n")
        self.requests += 1
        return "".join(out).encode("latin-1") + content


class _VirtualStream(anyio.abc.ByteStream):
    """One kept-alive connection to :class:`_Far`, in memory; answers after ``rtt``."""

    def __init__(self, far: _Far) -> None:
        self._far = far
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._ready_at = 0.0

    async def send(self, item: bytes) -> None:
        start = time.process_time()
        inbox = self._inbox
        inbox += item
        end = inbox.find(b"\r\n\r\n")
        if end < 0:
            self._far.cpu += time.process_time() - start
            return
        head = bytes(inbox[:end])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(inbox) < end + 4 + length:
            self._far.cpu += time.process_time() - start
            return
        body = bytes(inbox[end + 4 : end + 4 + length])
        del inbox[: end + 4 + length]
        self._outbox += await self._far.answer(head, body)
        self._ready_at = anyio.current_time() + self._far.rtt
        self._far.cpu += time.process_time() - start

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._outbox:
            raise RuntimeError("a read with no request outstanding (the pool does not do this)")
        wait = self._ready_at - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)
        out = bytes(self._outbox[:max_bytes])
        del self._outbox[:max_bytes]
        return out

    async def send_eof(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


@dataclass
class Plan:
    """One child process: every rate (and the burst) on one backend and shard count."""

    backend: str
    shards: int
    rates: list[float]  # 0.0: the burst
    records: int  # per segment
    rounds: int
    #: time the pieces a request pays once (``_Parts``); their wrappers cost CPU themselves
    parts: bool = False
    #: the arrival loop's shortest tick (s): it puts the records due, then sleeps this long
    tick: float = TICK


#: (module, attribute owner path, label): the synchronous pieces paid once per request
#: (or per shard sealed), timed by ``--parts``
_PIECES = [
    ("kinesis_trio._core._outgoing", "Outgoing.seal_due", "seal due shards (timer)"),
    ("kinesis_trio._core._outgoing", "Outgoing.batch", "outgoing (per sealed batch)"),
    ("kinesis_trio._core._outgoing", "body", "request body (base64, JSON)"),
    ("kinesis_trio._aws._service", "_sha256_hex", "payload SHA-256"),
    ("kinesis_trio._aws._credentials", "RequestSigner.sign", "SigV4 signature (botocore)"),
    ("h11", "Connection.next_event", "answer framed (h11 events)"),
    ("kinesis_trio._core._apply", "Answers.apply_answer", "answer applied (all of it)"),
    ("kinesis_trio._core._apply", "measure_answer", "  of which: metrics"),
]


class _Parts:
    """CPU (``time.process_time``) and calls of each piece in ``_PIECES``."""

    def __init__(self) -> None:
        import functools
        import importlib

        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        for module_name, path, label in _PIECES:
            owner: Any = importlib.import_module(module_name)
            *outer, name = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            original = getattr(owner, name)
            self.cpu[label] = 0.0
            self.calls[label] = 0

            def timed(*args: Any, _f: Any = original, _label: str = label, **kw: Any) -> Any:
                start = time.process_time()
                try:
                    return _f(*args, **kw)
                finally:
                    self.cpu[_label] += time.process_time() - start
                    self.calls[_label] += 1

            setattr(owner, name, functools.wraps(original)(timed))


def virtual_producer(shards: int) -> tuple[Any, _Far]:
    """A producer (not started) whose every connection is an in-memory stream to a fake of
    ``shards`` shards, and that fake's end (its CPU, its requests)."""
    from kinesis_trio import Producer, StaticCredentials
    from kinesis_trio._aws import _http11, _service

    # a large body is hashed in a worker thread, which a virtual clock would leap past
    # (trio's MockClock is recognized already; these clocks are not)
    _service._virtual_clock = lambda: True
    far = _Far(shards, RTT)

    async def connect(pool: _http11.Http11Pool, origin: _http11.Origin) -> _http11._Connection:
        return _http11._Connection(_VirtualStream(far), origin)

    # every connection of the producer's pool (this child process's only pool) is virtual
    _http11.Http11Pool._connect = connect  # type: ignore[method-assign,assignment]
    producer = Producer(
        "virtual",
        region_name="us-east-1",
        endpoint_url=ORIGIN_URL,
        credentials=StaticCredentials(*CREDENTIALS),
    )
    return producer, far


async def _child(plan: Plan) -> dict[str, Any]:
    producer, far = virtual_producer(plan.shards)
    null = _NullProducer()
    segments: dict[str, list[dict[str, Any]]] = {}
    parts = _Parts() if plan.parts else None

    def job(rate: float, mode: str) -> Job:
        duration = plan.records / rate if rate else 0.0
        tick = max(plan.tick, 1 / rate) if rate else plan.tick
        return Job(
            mode, plan.backend, rate, duration, plan.records, "", "", tick=tick, awaiter="poll"
        )

    async with producer:
        await _drive(job(plan.rates[0] or 1000.0, "producer"), producer)  # warm up
        for index in range(plan.rounds):
            for rate in plan.rates:
                name = f"{rate:g}/s" if rate else "burst"
                # the null segment first in even rounds, second in odd ones
                order = ("null", "producer") if index % 2 == 0 else ("producer", "null")
                for mode in order:
                    # every segment starts with the collector's debt paid: a full collection
                    # falls in a segment for what that segment holds, not by chance
                    gc.collect()
                    if mode == "null":
                        out = await _drive(job(rate, mode), null)
                        out["far_cpu_s"], out["requests"] = 0.0, 0
                    else:
                        cpu0, requests0 = far.cpu, far.requests
                        put0 = producer.metrics.totals().get("UserRecordsPut", 0)
                        out = await _drive(job(rate, mode), producer)
                        out["far_cpu_s"] = far.cpu - cpu0
                        out["requests"] = far.requests - requests0
                        put = producer.metrics.totals().get("UserRecordsPut", 0) - put0
                        if put != out["records"]:
                            raise RuntimeError(f"{put} records confirmed of {out['records']} put")
                    segments.setdefault(f"{mode} {name}", []).append(out)
    if parts is not None:
        segments["parts"] = [{"cpu_s": parts.cpu, "calls": parts.calls, "requests": far.requests}]
    return segments


def _virtual_trio_clock() -> Any:
    """A trio clock that jumps to the next deadline whenever the run would sleep (trio asks
    only when no task can run). ``MockClock(autojump_threshold=0)`` does the same through a
    system task that waits for all tasks to block; this clock needs no task."""
    import trio

    class JumpClock(trio.abc.Clock):
        def __init__(self) -> None:
            self.now = 0.0

        def start_clock(self) -> None:
            return None

        def current_time(self) -> float:
            return self.now

        def deadline_to_sleep_time(self, deadline: float) -> float:
            if deadline == math.inf:  # no deadline at all: only a thread can wake the run
                return math.inf
            self.now = max(self.now, deadline)
            return 0.0

    return JumpClock()


def _run(plan: Plan) -> dict[str, Any]:
    if plan.backend == "trio":
        options: dict[str, Any] = {"clock": _virtual_trio_clock()}
    else:
        options = {"loop_factory": virtual_asyncio_loop}
    out: dict[str, Any] = anyio.run(_child, plan, backend=plan.backend, backend_options=options)
    return out


def _run_child(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = run_module(
        "benchmarks._steady_cpu", json.dumps(asdict(plan)), timeout=3600
    )
    return out


def _own(segments: dict[str, list[dict[str, Any]]], name: str) -> list[float]:
    """The producer's own µs per record in each round (paired with its null segment)."""
    return [
        (p["cpu_s"] - p["far_cpu_s"] - n["cpu_s"]) / p["records"] * 1e6
        for p, n in zip(segments[f"producer {name}"], segments[f"null {name}"], strict=True)
    ]


def _gc(segments: dict[str, list[dict[str, Any]]], name: str) -> tuple[float, float]:
    """The collector's share of a segment: its µs per record beyond the null segment's (the
    median over the rounds), and the median of its full passes per segment."""
    from benchmarks._summary import median_of

    prod, null = segments[f"producer {name}"], segments[f"null {name}"]
    us = median_of(
        [(p["gc_s"] - n["gc_s"]) / p["records"] * 1e6 for p, n in zip(prod, null, strict=True)]
    )
    return us, median_of([float(p["gc_full"]) for p in prod])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rates", default="100,1000,5000,20000")
    parser.add_argument("--shards", default="8,32")
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument("--records", type=int, default=5_000, help="per segment")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--name", default="steady_cpu", help="results/<name>.{md,json}")
    parser.add_argument(
        "--tick", type=float, default=TICK, help="the arrival loop's shortest tick (s)"
    )
    parser.add_argument(
        "--parts-rate",
        type=float,
        default=100.0,
        help="the rate of the run that times a request's pieces (8 shards; 0: none)",
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_run(Plan(**json.loads(args.child)))), flush=True)
        return

    from benchmarks._report import machine_info, markdown_table, publish, report_header
    from benchmarks._summary import median_of

    info = machine_info()
    started = time.perf_counter()
    rates = [float(r) for r in args.rates.split(",") if r]
    shard_counts = [int(s) for s in args.shards.split(",") if s]
    backends = [b for b in args.backends.split(",") if b]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    rows = []
    table: dict[str, Any] = {}
    for shards in shard_counts:
        for backend in backends:
            base = f"{shards} {backend}"
            plan = Plan(backend, shards, [*rates, 0.0], args.records, args.rounds, tick=args.tick)
            segments = _run_child(plan)
            runs[base] = segments

            burst = _own(segments, "burst")
            burst_us = median_of(burst)
            for r in rates:
                name = f"{r:g}/s"
                per = _own(segments, name)
                us = median_of(per)
                prod = segments[f"producer {name}"]
                records = median_of([p["records"] for p in prod])
                requests = median_of([p["requests"] for p in prod])
                row: dict[str, Any] = {
                    "rate": r,
                    "producer_us_per_record": us,
                    "rounds_us": per,
                    "burst_us_per_record": burst_us,
                    "ratio": us / burst_us,
                    "requests_per_s": requests / (records / r),
                    "records_per_request": records / requests if requests else math.nan,
                    "core_share": us * r / 1e6,
                    "null_us_per_record": median_of(
                        [n["cpu_s"] / n["records"] * 1e6 for n in segments[f"null {name}"]]
                    ),
                    "p99_virtual_ms": median_of([p["p99_s"] for p in prod]) * 1e3,
                }
                row["gc_us_per_record"], row["gc_full_per_segment"] = _gc(segments, name)
                table[f"{base} {name}"] = row
                rows.append(
                    [
                        shards,
                        backend,
                        f"{r:,.0f}",
                        f"{us:.1f}",
                        f"{min(per):.1f} to {max(per):.1f}",
                        f"{row['ratio']:.2f}x",
                        f"{row['core_share'] * 100:.2f} %",
                        f"{row['null_us_per_record']:.1f}",
                        f"{row['requests_per_s']:.1f}",
                        f"{row['records_per_request']:.0f}",
                        f"{row['p99_virtual_ms']:.1f}",
                        f"{row['gc_us_per_record']:.1f} ({row['gc_full_per_segment']:g})",
                    ]
                )
            null_burst = median_of(
                [n["cpu_s"] / n["records"] * 1e6 for n in segments["null burst"]]
            )
            rows.append(
                [
                    shards,
                    backend,
                    "burst",
                    f"{burst_us:.1f}",
                    f"{min(burst):.1f} to {max(burst):.1f}",
                    "1.00x",
                    "",
                    f"{null_burst:.1f}",
                    "",
                    "",
                    "",
                    "{:.1f} ({:g})".format(*_gc(segments, "burst")),
                ]
            )
            gc_us, gc_full = _gc(segments, "burst")
            table[f"{base} burst"] = {
                "producer_us_per_record": burst_us,
                "rounds_us": burst,
                "gc_us_per_record": gc_us,
                "gc_full_per_segment": gc_full,
            }
            print(f"{base}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    parts_rows: list[list[object]] = []
    if args.parts_rate > 0:
        timed: dict[str, dict[str, Any]] = {}
        for backend in backends:
            plan = Plan(backend, 8, [args.parts_rate], args.records, 3, parts=True, tick=args.tick)
            segments = _run_child(plan)
            runs[f"parts {backend}"] = segments
            name = f"{args.parts_rate:g}/s"
            prod = segments[f"producer {name}"]
            own = median_of(_own(segments, name)) * sum(p["records"] for p in prod)
            timed[backend] = {
                **segments["parts"][0],
                "own_per_request_us": own / sum(p["requests"] for p in prod),
            }
        table["parts"] = timed
        for _, _, label in _PIECES:
            cells: list[object] = [label]
            for backend in backends:
                t = timed[backend]
                cells.append(f"{t['cpu_s'][label] / t['requests'] * 1e6:.0f}")
            first = timed[backends[0]]
            cells.append(f"{first['calls'][label] / first['requests']:.1f}")
            parts_rows.append(cells)
        parts_rows.append(
            [
                "**the producer's own CPU per request**",
                *(f"**{timed[b]['own_per_request_us']:.0f}**" for b in backends),
                "",
            ]
        )
    total = time.perf_counter() - started
    md = report_header("# The cost at a steady rate, in virtual time", info, total)
    md += [
        f"{SIZE}-byte records over {KEYS} keys, default settings, a virtual round trip of "
        f"{RTT * 1e3:g} ms per request. One process per backend and shard count holds one "
        f"producer; it runs {args.rounds} rounds, and each round runs every rate and the "
        f"burst as a segment of {args.records:,} records, next to the same schedule with a "
        "null producer (null first in even rounds, second in odd ones). The arrival loop "
        f"ticks every max({args.tick * 1e3:g} ms, 1/rate) and takes the resolved outcomes "
        "each tick (the harness's polled awaiter). µs/record: the producer's own CPU (the "
        "segment's process CPU, minus the in-process endpoint's, minus its null segment's), median "
        "over the rounds; range: the rounds' lowest and highest. Ratio: over the burst "
        "figure of the same process. Core: µs/record x rate. Null: the null segment's own "
        "µs per record (the harness). p99: from each record's scheduled arrival, in virtual "
        "time (the schedule's own: linger, round trip). GC: the part of µs/record spent in "
        "the garbage collector (beyond its null segment's; in the figure, not added to it), "
        "and in brackets the full collections in a segment (medians over the rounds). A "
        "full collection walks every object the process tracks, the records in flight "
        "included: in a burst, where the records stay in flight longest, it is most of the "
        "spread between rounds.",
        "",
        markdown_table(
            [
                "shards",
                "backend",
                "records/s",
                "µs/record",
                "range",
                "vs burst",
                "core",
                "null µs/record",
                "requests/s",
                "records/request",
                "p99 ms (virtual)",
                "GC µs/record (full)",
            ],
            rows,
            "rlrrrrrrrrrr",
        ),
        "",
    ]
    if parts_rows:
        md += [
            f"## What a request costs, piece by piece ({args.parts_rate:g} records/s, 8 shards)",
            "",
            "The same run with the synchronous pieces a request pays once (or once per shard "
            "sealed) wrapped in `time.process_time` readings: µs per request, over every "
            "request of the run. The wrappers' own cost is in these figures; the last row "
            "is the producer's own CPU per request measured as above (its records' included).",
            "",
            markdown_table(
                ["piece", *(f"{b} µs/request" for b in backends), "calls/request"],
                parts_rows,
                "l" + "r" * (len(backends) + 1),
            ),
            "",
        ]
    publish(args.name, md, {"machine": info, "table": table, "runs": runs}, total)


if __name__ == "__main__":
    main()
