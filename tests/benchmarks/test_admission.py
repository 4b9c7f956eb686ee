"""``python -m benchmarks admission``: its harness at a tiny size against the Python engine
served in the test's own event loop (no processes, no emulator), the shaping proxy, and the
table. The figures themselves are not checked: only that every record is counted once and
that the pieces still fit the producer."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from benchmarks import _admission_engine, _admission_runs, admission
from benchmarks._shaper import Link, shaping_proxy

TINY = _admission_runs.Sizes(
    overload_count=50,
    rate=200.0,
    window=0.3,
    hot_over=0.1,
    cold_rate=100.0,
    link_records=100,
    link_rate=2_000_000.0,
    ttl=5.0,
)


def _case(name: str) -> _admission_runs.Case:
    return next(c for c in _admission_runs.cases(TINY) if c.name == name)


def _settings() -> list[bool]:
    """Off always; on once this build's ProducerConfig has admission_ttl_share."""
    return [False, True] if _admission_runs.default_share() is not None else [False]


def _counted_once(run: _admission_runs.Run) -> None:
    assert not run.error
    assert 0 < run.accepted <= run.offered
    resolved = run.ok + run.expired + sum(run.failed_other.values())
    assert resolved + run.unresolved == run.accepted
    assert run.expired_in_queue <= run.expired
    assert run.put_p50_ms <= run.put_p99_ms <= run.put_max_ms
    assert run.elapsed_s >= 0 and run.confirmed_per_s >= 0
    row = admission.table_row("case", "trio", "off", run, "1.00")
    assert len(row) == len(admission.HEADER)


@pytest.mark.anyio
async def test_a_paced_endpoint_run_counts_every_accepted_record_once() -> None:
    case = _admission_runs.Case(
        "paced",
        "tiny",
        _admission_runs.Workload(
            putters=[_admission_runs.Putter(200.0, _admission_runs.KEYS)], window=0.3
        ),
        _admission_engine.EngineSpec(pace=2_000_000.0),
    )
    for on in _settings():
        config = _admission_runs.producer_config(on, TINY.ttl)
        run = await _admission_runs.run_in_process(case, config, limit=30)
        _counted_once(run)
        assert run.offered == 60
        assert run.engine["requests"] >= 1 and "served" in run.engine


@pytest.mark.anyio
async def test_the_hot_shard_case_runs_two_putters_against_the_limits() -> None:
    case = _case("hot-shard")
    assert case.engine is not None and case.engine.limits
    assert case.workload.putters[0].keys == ["hot"]
    run = await _admission_runs.run_in_process(
        case, _admission_runs.producer_config(False, TINY.ttl), 30
    )
    _counted_once(run)
    assert "entries_throttled" in run.engine


@pytest.mark.anyio
async def test_the_slow_link_case_reports_the_bytes_the_link_carried() -> None:
    case = _case("slow-link")
    run = await _admission_runs.run_in_process(
        case, _admission_runs.producer_config(False, TINY.ttl), 30
    )
    _counted_once(run)
    assert run.offered == run.accepted == 100
    # every record's data went up the link at least once
    assert run.engine["up_bytes"] >= 100 * _admission_runs.RECORD
    assert run.engine["link_seconds"] == pytest.approx(run.engine["up_bytes"] / 2e6, abs=1e-3)
    assert "MB up" in admission._link_cell(run)


def test_off_is_the_producer_without_admission_and_on_needs_the_setting() -> None:
    off = _admission_runs.producer_config(False, 12.0)
    assert off.record_ttl == 12.0
    if _admission_runs.default_share() is None:
        with pytest.raises(_admission_runs.AdmissionUnavailable):
            _admission_runs.producer_config(True, 12.0)
        assert _admission_runs.run_case(_case("slow-link"), "trio", True, TINY, None, None).error
    else:  # read by name: a tree without the setting type-checks too
        assert dataclasses.asdict(off)["admission_ttl_share"] is None
        on = dataclasses.asdict(_admission_runs.producer_config(True, 12.0))
        assert on["admission_ttl_share"] == _admission_runs.default_share()
        assert on["admission_ttl_share"] is not None


def test_the_overload_case_is_the_overload_commands_workload() -> None:
    from benchmarks.overload import records

    case = _case("overload")
    assert case.engine is None and case.workload.burst is not None
    got = list(case.workload.burst())
    assert [data for data, _ in got] == records(TINY.overload_count)


@pytest.mark.anyio
@pytest.mark.virtual_time
async def test_the_link_carries_its_rate_first_come_first_served() -> None:
    link = Link(rate=1_000_000.0)
    start = anyio.current_time()
    ends: list[float] = []

    async def send(n: int) -> None:
        await link.carry(n)
        ends.append(anyio.current_time() - start)

    async with anyio.create_task_group() as tg:
        tg.start_soon(send, 2000)
        tg.start_soon(send, 2000)
    assert link.bytes == 4000
    assert link.seconds() == pytest.approx(0.004)
    assert min(ends) >= 0.002 - 1e-6 and max(ends) >= 0.004 - 1e-6


@pytest.mark.anyio
async def test_the_proxy_paces_the_upload_and_passes_the_answers() -> None:
    async def echo(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                while True:
                    await stream.send(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, echo)
        async with shaping_proxy("127.0.0.1", port, up_rate=1_000_000.0) as proxy:
            async with await anyio.connect_tcp("127.0.0.1", proxy.port) as client:
                await client.send(b"y" * 20_000)
                got = b""
                with anyio.fail_after(10):
                    while len(got) < 20_000:
                        got += await client.receive()
            assert got == b"y" * 20_000
            assert proxy.link.bytes == 20_000 and proxy.down_bytes == 20_000
            assert proxy.connections == 1
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_client_send_buffer_option_sets_each_new_connections_buffer() -> None:
    import socket

    original = anyio.connect_tcp
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener:
        with _admission_runs.client_send_buffer(256 * 1024):
            stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            assert raw.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= 256 * 1024
    assert anyio.connect_tcp is original
