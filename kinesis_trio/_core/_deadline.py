"""When a request is a black hole: its deadline follows what the connection is doing (pure,
no awaits, the time passed in).

A request that still moves bytes is not a black hole, and neither is one whose size explains
its time: a 5 MiB PutRecords behind a 400 kB/s uplink needs 13 s to go up, and an endpoint
may take tens of seconds to store a 10 MiB record. One fixed deadline cuts both off, and
each retry sends the whole request again. :class:`RequestClock` holds three rules, with
``timeout`` (``request_timeout``) and ``connect`` (``connect_timeout``):

- **A bound that grows with the size.** A request has ``connect + timeout`` plus
  ``timeout`` for each MiB it carries (its body, and the answer's bytes as they arrive)
  from its start, whatever moves: ``12 s + 6 s/MiB`` by default, so the slowest path
  carried at full size is one MiB per ``timeout`` (175 kB/s). A server trickling a byte at
  a time cannot hold a request longer than that; per-read timeouts alone would let it pass
  every one of them.
- **A stall is a black hole.** While the request goes out, and while the answer comes in,
  no more than ``timeout`` may pass without a byte moving.
- **Waiting for the answer**, once the whole request is out: the bound alone. The server
  is storing the records, and the kernel may still be sending the request's last bytes
  from its buffers, which the client cannot see.
- **An answer built before its first byte** (``answer``): an operation that may return a
  large answer has its bytes in the bound from the start, not only as they arrive. The
  endpoint reads and encodes them before it sends any: GetRecords, whose answer may hold
  10 MiB ("The maximum size of data that GetRecords can return is 10 MiB", botocore's
  model), has ``12 s + 60 s`` at the defaults; a local engine on a busy machine took over
  12 s to begin such an answer.

- **An answer no larger than its operation can answer** (:func:`answer_limit`): past it
  the answer is not progress but a black hole that keeps talking (a well-formed head,
  then spaces for ever), and the request is given up as one (ambiguous: its upload
  completed). So once the upload is done, the answer has at most the bound with the
  operation's largest answer in it, ``connect + timeout * (1 + (size + limit) / MiB)``
  from the request's start: its bytes add at most ``timeout * limit / MiB``, 6.2 s for a
  PutRecords of 500 records at the defaults (its answer: at most 1.04 MiB).

Before its first byte (credentials, a free connection, connecting) a request has
``connect + timeout``, as every request had before. A request whose time runs out before
its last byte was handed to the connection was not processed (the server cannot read a
body it did not get whole): :attr:`RequestClock.out` says so. :meth:`RequestClock.stalled`
tells a stall (the path or the peer is gone) from a request too slow for its size (the
path carries less than it: requests are made smaller, ``_congestion``).
"""

from __future__ import annotations

__all__ = ["ANSWER_DEFAULT", "BUILT_FIRST", "MIB", "RequestClock", "answer_limit"]

#: the unit of size the bound grows by (``timeout`` per MiB)
MIB = 1024 * 1024

# The largest answers, from botocore's service models (kinesis 2013-12-02, glue 2017-03-31).
# An error answer (``__type`` and a message) is well within every one of them.
#: a PutRecords answer's entry: ``ShardId`` (at most 128 characters), ``SequenceNumber``
#: (``0|([1-9]\d{0,128})``), ``EncryptionType``, or ``ErrorCode`` and ``ErrorMessage``,
#: which the model does not bound (the service's are under 200 bytes): 2 KiB with JSON
_PUT_ENTRY = 2048
#: a ListShards page: at most 10,000 shards (``ListShardsInputLimit``), each three shard ids,
#: two hash keys of at most 39 digits, two sequence numbers of at most 129, and its JSON
#: (2 KiB), and a ``NextToken`` of at most 1 MiB
_LIST_SHARDS = 10_000 * 2048 + MIB
#: "The maximum size of data that GetRecords can return is 10 MiB" (botocore's model)
_GET_RECORDS_DATA = 10 * MIB
#: the data an operation's answer may bring, which the endpoint reads before its first
#: byte goes: a call's bound has it from the start (``RequestClock``'s ``answer``)
BUILT_FIRST = {"GetRecords": _GET_RECORDS_DATA}
#: a GetRecords answer: its data, base64 in JSON (4/3), and each of up to 10,000 records'
#: key (256), sequence number (129), timestamp and JSON (1 KiB)
_GET_RECORDS = _GET_RECORDS_DATA * 4 // 3 + 10_000 * 1024 + MIB
#: any other operation's answer (a stream's summary, a shard iterator, Glue's schema
#: version, whose ``SchemaDefinition`` holds at most 170,000 characters, each at most six
#: in JSON's escapes)
ANSWER_DEFAULT = 2 * MIB
_BASE = 64 * 1024  # an answer's own fields and an error's


def answer_limit(operation: str, entries: int = 0) -> int:
    """The most bytes ``operation``'s answer may hold (``entries``: a PutRecords request's
    records); an answer past it is given up (see the module)."""
    if operation == "PutRecords":
        return _BASE + max(entries, 1) * _PUT_ENTRY
    if operation == "ListShards":
        return _LIST_SHARDS
    if operation == "GetRecords":
        return _GET_RECORDS
    if operation == "PutRecord":
        return _BASE
    return ANSWER_DEFAULT


# what the request is doing
_BEFORE = 0  # no byte out yet: credentials, a free connection, connecting
_SENDING = 1
_WAITING = 2  # all of it out, no byte of the answer yet
_READING = 3

_PHASES = ("before its first byte", "sending", "waiting for the answer", "reading the answer")


class RequestClock:
    """The deadline of one call (and its one retry after an expired token); see the module.
    Each method returns the deadline from then on."""

    __slots__ = (
        "_answer",
        "_bound",
        "_connect",
        "_last",
        "_phase",
        "_received",
        "_start",
        "out",
        "size",
        "timeout",
    )

    def __init__(
        self, start: float, size: int, timeout: float, connect: float, answer: int = 0
    ) -> None:
        self.timeout = timeout
        self.size = size
        self._connect = connect
        self._start = start
        self._received = 0
        #: answer bytes the bound has from the start: an operation whose answer may be
        #: large and is built before its first byte goes (GetRecords: up to 10 MiB)
        self._answer = answer
        self._bound = start + connect + timeout * (1.0 + (size + answer) / MIB)
        self._phase = _BEFORE
        self._last = start + connect  # before the first byte: connecting may take that
        #: every byte of the request was handed to the connection (False: not processed)
        self.out = False

    @property
    def bound(self) -> float:
        """When the request ends whatever moves."""
        return self._bound

    def deadline(self) -> float:
        """When the request is given up, as things stand."""
        if self._phase == _WAITING:
            return self._bound
        return min(self._last + self.timeout, self._bound)

    def begin(self, now: float) -> float:
        """An exchange begins (the first, or the one after an expired token)."""
        self._phase = _BEFORE
        self._last = now + self._connect
        self.out = False
        return self.deadline()

    def sent(self, now: float, nbytes: int, last: bool) -> float:
        """``nbytes`` of the request are being handed to the connection at ``now``
        (``last``: the rest of it; the request may then be processed)."""
        self._last = now
        if last:
            self._phase = _WAITING
            self.out = True
        else:
            self._phase = _SENDING
        return self.deadline()

    def received(self, now: float, nbytes: int) -> float:
        """``nbytes`` of the answer arrived at ``now`` (0: the connection ended)."""
        self._last = now
        self._phase = _READING
        if nbytes:
            before = max(self._received - self._answer, 0)
            self._received += nbytes
            beyond = max(self._received - self._answer, 0)
            self._bound += self.timeout * (beyond - before) / MIB
        return self.deadline()

    def stalled(self) -> bool:
        """At the deadline: was it a stall (no byte moved for ``timeout``, or none out
        within ``connect + timeout``), not the bound of the request's size?"""
        return self._phase != _WAITING and self._last + self.timeout < self._bound

    def describe(self, operation: str) -> str:
        """What happened, for the timeout's message (read at the deadline)."""
        if self.stalled():
            return f"{operation}: nothing moved for {self.timeout:g} s while {_PHASES[self._phase]}"
        moved = self.size + max(self._received, self._answer)
        return (
            f"{operation} did not complete within {self._bound - self._start:.3g} s, the time "
            f"a request of {moved:,} bytes has ({self._connect:g} s, then {self.timeout:g} s "
            f"and {self.timeout:g} s per MiB); it was {_PHASES[self._phase]}"
        )
