"""A bandwidth-shaping TCP proxy: a slow uplink in front of an endpoint (``benchmarks admission``).

:func:`shaping_proxy` listens on ``127.0.0.1:<free port>``; each client connection gets its
own connection to the upstream. Bytes from the client go up through one shared
:class:`Link` paced to ``up_rate`` bytes/s, as over one uplink (a branch office, a gateway);
answers come back as fast as they arrive. It runs in the caller's event loop (anyio: trio or
asyncio)::

    async with shaping_proxy("127.0.0.1", 4567, up_rate=400_000) as proxy:
        ...  # point the client at proxy.endpoint_url; proxy.link.bytes went up

Pacing: the proxy reads at most ``chunk`` bytes at a time from a client and reserves the
link for them (first come, first served over every connection: the link is busy until
``free_at``, each chunk extends it by ``len / up_rate``), waits until its reservation has
been carried, then sends the chunk on. The listening socket's receive buffer is small
(``buffer`` bytes) so the bytes a client has handed to the kernel but the link has not
carried stay few, as on a real path where the sender's window fills. A connection the
client drops (a request timeout) is closed upstream at once: a partial request is not
completed, and a retry starts its upload again. The link time a dropped chunk reserved is
spent all the same, as it would be on a real link.

The fault-injecting proxy in ``tests/support/fault_proxy.py`` works on HTTP messages (it
reads whole requests to decide a fault) in a thread of its own; shaping needs the bytes as
they flow, so this one is a plain byte pump.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

__all__ = ["Link", "ShapingProxy", "shaping_proxy"]

#: Errors that end a forwarding direction (the other side went away).
_GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


@dataclass
class Link:
    """One direction of a link carrying ``rate`` bytes/s, shared by every connection."""

    rate: float
    #: bytes carried (reserved) so far
    bytes: int = 0
    #: when the link has carried everything reserved so far (event loop clock)
    free_at: float = 0.0

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ValueError(f"Link rate must be positive, not {self.rate!r}")

    async def carry(self, nbytes: int) -> None:
        """Reserve the link for ``nbytes`` after what is already on it; wait until carried."""
        start = max(anyio.current_time(), self.free_at)
        self.free_at = start + nbytes / self.rate
        self.bytes += nbytes
        await anyio.sleep_until(self.free_at)

    def seconds(self) -> float:
        """The time the bytes carried so far need at this rate."""
        return self.bytes / self.rate


@dataclass
class ShapingProxy:
    """What :func:`shaping_proxy` yields: where to connect and what went through."""

    host: str
    port: int
    link: Link
    #: bytes the answers carried back (not paced)
    down_bytes: int = 0
    connections: int = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stats(self) -> dict[str, float]:
        return {
            "up_bytes": self.link.bytes,
            "down_bytes": self.down_bytes,
            "up_rate": self.link.rate,
            "link_seconds": round(self.link.seconds(), 3),
            "connections": self.connections,
        }


def _small_receive_buffer(listener: anyio.abc.Listener[anyio.abc.SocketStream], size: int) -> None:
    """Accepted connections inherit the listening socket's receive buffer (and the window
    scale it implies): keep the bytes queued before the link small."""
    listeners = getattr(listener, "listeners", [listener])
    for one in listeners:
        raw = one.extra(SocketAttribute.raw_socket, None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


@contextlib.asynccontextmanager
async def shaping_proxy(
    upstream_host: str,
    upstream_port: int,
    up_rate: float,
    *,
    host: str = "127.0.0.1",
    chunk: int = 4096,
    buffer: int = 32_768,
) -> AsyncIterator[ShapingProxy]:
    """Serve the proxy until the block exits (every connection is then closed)."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=0)
    _small_receive_buffer(listener, buffer)
    port = listener.extra(SocketAttribute.local_port)
    proxy = ShapingProxy(host, port, Link(up_rate))

    async def up(client: anyio.abc.SocketStream, upstream: anyio.abc.SocketStream) -> None:
        while True:
            data = await client.receive(chunk)
            await proxy.link.carry(len(data))
            await upstream.send(data)

    async def down(client: anyio.abc.SocketStream, upstream: anyio.abc.SocketStream) -> None:
        while True:
            data = await upstream.receive(65536)
            proxy.down_bytes += len(data)
            await client.send(data)

    async def handle(client: anyio.abc.SocketStream) -> None:
        proxy.connections += 1
        async with client:
            try:
                upstream = await anyio.connect_tcp(upstream_host, upstream_port)
            except OSError:
                return
            async with upstream, anyio.create_task_group() as tg:

                async def pump(which: str) -> None:
                    # either direction ending (a close, a reset, an error) ends both
                    with contextlib.suppress(*_GONE):
                        if which == "up":
                            await up(client, upstream)
                        else:
                            await down(client, upstream)
                    tg.cancel_scope.cancel()

                tg.start_soon(pump, "up")
                tg.start_soon(pump, "down")

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield proxy
        finally:
            tg.cancel_scope.cancel()
