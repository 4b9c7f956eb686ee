"""A lower bound on the steady rate's CPU per record over the burst's (issue 25, target 1).

``bench_virtual`` measures the producer's own CPU per record at each rate and in a burst.
Two costs come with a steady rate whatever the producer's design, and a burst has neither:

- **The put after a pass through the event loop.** At a steady rate the application's
  task puts the records due, then sleeps to its next tick; the event loop runs in between
  (its scheduler, the poll for I/O). The first ``put_nowait`` after that pass runs the same
  code as in a burst, on the same state, and takes longer: the loop's own code and data
  have pushed the producer's out of the processor's caches. Measured here directly: blocks
  of back-to-back puts (warm) alternate with blocks of one put per 1 ms tick (the first
  after a pass), on ``bench_virtual``'s virtual clock, each put timed alone; the excess is
  the difference of the medians. At a steady rate it is paid once per tick, so per record
  it is the excess over the records a tick brings.
- **A request's fixed pieces.** At a steady rate a request goes per linger window, so its
  fixed cost is shared by the records of one window, not a burst's thousands. Only the
  pieces every request of an aggregating producer pays are counted, each timed warm in a
  loop (so less than in the running producer): the SigV4 signature (botocore's, as issue
  25 asks to keep; the payload's hash is given to it, so the body's size does not count);
  the answer's head and JSON (an entry per aggregate: one per shard); an MD5 per aggregate
  (the KPL format's; the cost of a call, not its cost per byte, which a burst pays too);
  and one task woken for the answer (an ``anyio.Event`` set by another task). Everything
  else a request costs (the timer and collector, the seal's joins, the body's framing, the
  HTTP write, the answer applied) is left out, so the bound is low.

The pass itself is timed too, with no put before it and after one: the put pushes the
loop's code out as the loop pushes the put's. That excess is reported, not counted in the
bound (a put that ran less code might push out less).

The puts are timed twice: on the virtual clock (a sleep passes no time: the loop's own
work is all that runs between two puts) and in real time (real 1 ms sleeps: the process
idles between puts, as an application at a steady rate does). The bound is given with
each; the burst figure is the virtual one either way.

The bound: ``1 + (excess / records per tick + request / records per request) / burst``,
with the burst figure, the records per request and the measured ratio from a
``bench_virtual`` child of the same run (8 shards). The measured ratio, in virtual time,
can come below the virtual clock's bound only through noise (the real-time bound is for a
run in real time); a target below the bound cannot be met by any design that keeps
botocore's signer and one request per linger window.

    uv run python -m benchmarks.bench_floor      # --rates 100,1000,5000,20000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import anyio
import anyio.lowlevel

from benchmarks import bench_virtual
from benchmarks.bench_steady import CREDENTIALS, KEYS, SIZE, TICK, run_module

#: puts per block; blocks of each kind alternate
_BLOCK = 1_000
#: the shards of the stream (``bench_virtual``'s 8): an aggregate per shard per request
_SHARDS = 8


async def _puts(blocks: int) -> dict[str, Any]:
    """The put probe: medians of each kind of put, and of a pass through the event loop
    (a 1 ms sleep) after a put and with no put, in ns."""
    producer, _ = bench_virtual.virtual_producer(_SHARDS)
    data = b"x" * SIZE
    keys = [f"key-{i}" for i in range(KEYS)]
    clock = time.perf_counter_ns
    times: dict[str, list[int]] = {
        "warm": [],
        "after a pass": [],
        "pass after a put": [],
        "pass alone": [],
    }
    kinds = ("warm", "after a pass", "pass alone")
    async with producer:
        put = producer.put_nowait
        i = 0
        for block in range(blocks + 1):  # the first block of each kind warms up
            for kind in kinds[block % 3 :] + kinds[: block % 3]:
                keep = bool(block)
                outcomes = []
                for _ in range(_BLOCK):
                    start = clock()
                    if kind != "pass alone":
                        outcomes.append(put(data, keys[i % KEYS]))
                        i += 1
                    middle = clock()
                    if kind != "warm":
                        await anyio.sleep(0.001)
                    if keep:
                        if kind == "pass alone":
                            times[kind].append(clock() - middle)
                        else:
                            times[kind].append(middle - start)
                            if kind == "after a pass":
                                times["pass after a put"].append(clock() - middle)
                for outcome in outcomes:
                    await outcome.wait()
    out: dict[str, Any] = {kind: statistics.median(values) for kind, values in times.items()}
    out["wake_us"] = await _wake_us()
    return out


async def _wake_us(cycles: int = 20_000) -> float:
    """One task woken by an ``anyio.Event`` another sets (µs of CPU per wake, warm): two
    tasks wake each other in turn."""
    ping, pong = [anyio.Event()], [anyio.Event()]

    async def other() -> None:
        for _ in range(cycles):
            await ping[0].wait()
            ping[0] = anyio.Event()
            pong[0].set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await anyio.lowlevel.checkpoint()
        start = time.process_time()
        for _ in range(cycles):
            ping[0].set()
            await pong[0].wait()
            pong[0] = anyio.Event()
        spent = time.process_time() - start
    return spent / (2 * cycles) * 1e6


def _signature(repeat: int) -> float:
    """botocore's SigV4 signature of a PutRecords request (its payload hash given): µs,
    warm."""
    import hashlib

    from kinesis_trio import StaticCredentials
    from kinesis_trio._credentials import RequestSigner

    creds = StaticCredentials(*CREDENTIALS)
    frozen = _frozen(creds)
    signer = RequestSigner("kinesis", "us-east-1", bench_virtual.ORIGIN_URL + "/", "virtual")
    body = b"x" * 20_000
    digest = hashlib.sha256(body).hexdigest()
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "Kinesis_20131202.PutRecords",
    }
    best = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            signer.sign(body, digest, frozen, dict(headers))
        best.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(best)


def _answer(entries: int, repeat: int) -> float:
    """A PutRecords answer of ``entries`` entries: its HTTP framing (h11, as the pool reads
    it: the request's head out, the answer in, the next cycle) and its JSON, µs, warm."""
    import json as json_module

    import h11

    records = ",".join(
        f'{{"SequenceNumber":"{10**55 + i:056d}","ShardId":"shardId-{i:012d}"}}'
        for i in range(entries)
    )
    content = ('{"FailedRecordCount":0,"Records":[' + records + "]}").encode()
    answer = (
        "HTTP/1.1 200 OK\r\nx-amzn-RequestId: 5c1b1d9a-0e2c-4a57-a8c5-3f1f6a2a8f10\r\n"
        "x-amz-id-2: q2Rz3cQ2d1m4Jd0b8Pp9n5Jc6mVY3m0p1Fq7hN2vXo0KZ6pYV8wz5w==\r\n"
        "Content-Type: application/x-amz-json-1.1\r\n"
        f"Content-Length: {len(content)}\r\nDate: Fri, 27 Nov 2026 04:00:00 GMT\r\n\r\n"
    ).encode() + content
    request = h11.Request(
        method="POST",
        target="/",
        headers=[("Host", "virtual"), ("Content-Length", "0")],
    )
    conn = h11.Connection(h11.CLIENT)
    runs = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            conn.send(request)
            conn.send(h11.EndOfMessage())
            conn.receive_data(answer)
            parts = []
            while True:
                event = conn.next_event()
                if type(event) is h11.Data:
                    parts.append(event.data)
                elif type(event) is h11.EndOfMessage:
                    break
            conn.start_next_cycle()
            json_module.loads(bytes(parts[0]))
        runs.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(runs)


def _md5s(aggregates: int, repeat: int) -> float:
    """The KPL format's MD5 of ``aggregates`` aggregates, their cost per call only (of a
    64-byte message: the cost per byte is a burst's too): µs, warm."""
    import hashlib

    blob = b"x" * 64
    runs = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            for _ in range(aggregates):
                hashlib.md5(blob, usedforsecurity=False).digest()
        runs.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(runs)


def _frozen(creds: Any) -> Any:
    import botocore.credentials

    return botocore.credentials.ReadOnlyCredentials(
        creds.access_key_id, creds.secret_access_key, creds.session_token
    )


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    backend = spec["backend"]
    if spec["what"] == "segments":
        plan = bench_virtual.Plan(
            backend, _SHARDS, [*spec["rates"], 0.0], spec["records"], spec["rounds"]
        )
        out: dict[str, Any] = bench_virtual._run(plan)
        return out
    if spec["clock"] == "real":  # real 1 ms sleeps: the process idles between puts
        options: dict[str, Any] = {}
    elif backend == "trio":
        options = {"clock": bench_virtual._virtual_trio_clock()}
    else:
        options = {"loop_factory": bench_virtual._virtual_asyncio_loop}
    result: dict[str, Any] = anyio.run(
        _puts, spec["blocks"], backend=backend, backend_options=options
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rates", default="100,1000,5000,20000")
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument("--records", type=int, default=20_000, help="per segment")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=8, help="put blocks of each kind")
    parser.add_argument("--name", default="floor", help="results/<name>.{md,json}")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))), flush=True)
        return

    from benchmarks.common import machine_info, markdown_table, median_of, publish, report_header

    info = machine_info()
    started = time.perf_counter()
    rates = [float(r) for r in args.rates.split(",") if r]
    backends = [b for b in args.backends.split(",") if b]
    data: dict[str, Any] = {"rates": rates, "backends": {}}
    rows: list[list[object]] = []
    loop_rows: list[list[object]] = []
    pieces: dict[int, dict[str, float]] = {}
    signature = _signature(2_000)
    for backend in backends:
        puts, real = (
            run_module(
                "benchmarks.bench_floor",
                json.dumps(
                    {"what": "puts", "backend": backend, "blocks": args.blocks, "clock": clock}
                ),
                timeout=3600,
            )
            for clock in ("virtual", "real")
        )
        spec = {
            "what": "segments",
            "backend": backend,
            "rates": rates,
            "records": args.records,
            "rounds": args.rounds,
        }
        segments = run_module("benchmarks.bench_floor", json.dumps(spec), timeout=3600)
        burst = median_of(bench_virtual._own(segments, "burst"))
        excess = (puts["after a pass"] - puts["warm"]) / 1e3
        excess_real = (real["after a pass"] - real["warm"]) / 1e3
        entry: dict[str, Any] = {
            "puts_ns": puts,
            "puts_real_time_ns": real,
            "burst_us": burst,
            "rates": {},
        }
        for clock, got in (("virtual", puts), ("real", real)):
            passes = ["-", "-", "-"]  # a real sleep's length is the timer's, not the loop's
            if clock == "virtual":
                passes = [
                    f"{got['pass alone'] / 1e3:.1f}",
                    f"{got['pass after a put'] / 1e3:.1f}",
                    f"{(got['pass after a put'] - got['pass alone']) / 1e3:.1f}",
                ]
            loop_rows.append(
                [
                    backend,
                    clock,
                    f"{got['warm'] / 1e3:.2f}",
                    f"{got['after a pass'] / 1e3:.2f}",
                    f"{(got['after a pass'] - got['warm']) / 1e3:.2f}",
                    *passes,
                    f"{burst:.2f}",
                ]
            )
        for rate in rates:
            name = f"{rate:g}/s"
            prod = segments[f"producer {name}"]
            per_request = sum(p["records"] for p in prod) / sum(p["requests"] for p in prod)
            per_tick = max(1.0, rate * TICK)
            aggregates = min(_SHARDS, round(per_request))
            if aggregates not in pieces:
                pieces[aggregates] = {
                    "signature_us": signature,
                    "answer_us": _answer(aggregates, 5_000),
                    "md5_us": _md5s(aggregates, 5_000),
                }
            piece = {**pieces[aggregates], "wake_us": puts["wake_us"]}
            request = sum(piece.values())
            measured = median_of(bench_virtual._own(segments, name)) / burst
            bound = 1 + (excess / per_tick + request / per_request) / burst
            bound_real = 1 + (excess_real / per_tick + request / per_request) / burst
            entry["rates"][name] = {
                "records_per_tick": per_tick,
                "records_per_request": per_request,
                **piece,
                "request_us": request,
                "bound": bound,
                "bound_real_time_put": bound_real,
                "measured": measured,
            }
            rows.append(
                [
                    backend,
                    f"{rate:,.0f}",
                    f"{per_tick:g}",
                    f"{piece['signature_us']:.0f}",
                    f"{piece['answer_us']:.1f}",
                    f"{piece['md5_us']:.1f}",
                    f"{piece['wake_us']:.1f}",
                    f"{request:.0f}",
                    f"{per_request:.0f}",
                    f"{bound:.2f}x",
                    f"{bound_real:.2f}x",
                    f"{measured:.2f}x",
                ]
            )
        data["backends"][backend] = entry
        print(f"{backend}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    total = time.perf_counter() - started
    md = report_header("# A lower bound on a steady rate's cost over a burst's", info, total)
    md += [
        "8 shards, 200-byte records over 256 keys, default settings, in `bench_virtual`'s "
        "virtual time, one process per backend for the puts and another for the segments.",
        "",
        "## The put and the event loop",
        "",
        "Medians of single calls timed alone, in blocks of "
        f"{_BLOCK:,} of each kind, alternating ({args.blocks} blocks of each kind kept): "
        "`put_nowait` back-to-back (warm), and as the first call after a pass through the "
        "event loop (a 1 ms sleep); the pass itself (the sleep's call to its return) with "
        "no put before it and after a put. Virtual: on `bench_virtual`'s clock, where a "
        "sleep passes no time; real: real 1 ms sleeps, the process idle in between (the "
        "endpoint in the process either way). Burst: `bench_virtual`'s producer's own CPU "
        f"per record ({args.rounds} rounds of {args.records:,} records).",
        "",
        markdown_table(
            [
                "backend",
                "clock",
                "put, warm µs",
                "put after a pass µs",
                "its excess µs",
                "pass, no put µs",
                "pass after a put µs",
                "its excess µs",
                "burst µs/record",
            ],
            loop_rows,
            "llrrrrrrr",
        ),
        "",
        "## The bound",
        "",
        "A request's fixed pieces, each µs, warm (a loop): botocore's SigV4 signature; the "
        "answer's head and JSON (an entry per aggregate); an MD5 call per aggregate (on 64 "
        "bytes); a task woken by an event. Measured: `bench_virtual`'s figure over its "
        "burst's. Bound: 1 + (the put's excess / records per tick + request / records per "
        "request) / burst, with the virtual clock's put excess, and then with the real "
        "clock's. It leaves out the pass's excess (a producer whose put ran less "
        "code might push out less of the loop's) and every other cost of a request, so it "
        "is low.",
        "",
        markdown_table(
            [
                "backend",
                "records/s",
                "records/tick",
                "signature µs",
                "answer µs",
                "MD5 calls µs",
                "wake µs",
                "request µs",
                "records/request",
                "bound vs burst",
                "with the real-time put",
                "measured vs burst",
            ],
            rows,
            "lrrrrrrrrrrr",
        ),
        "",
    ]
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
