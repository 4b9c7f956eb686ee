"""The one HTTP stack every AWS call goes through: the Kinesis client, the CloudWatch sink
and ``tail`` alike.

:class:`SignedService` resolves the region, the endpoint and the credentials the same way
for every service, signs each request with SigV4 (botocore), sends it through the pool
(``_http11``: h11 frames every byte) under one deadline over the whole call, maps transport
failures to :class:`TransportError` and, once, refreshes expired credentials and sends again.
What an answer means is the caller's ``read`` function: it returns a value, returns an error
the service sent (a well-formed one: the connection is reused) or raises (the answer cannot
be used: the connection is closed).

:class:`JsonService` is the AWS JSON 1.1 protocol on it (Kinesis, Glue): the
``X-Amz-Target`` of each operation, TLS verification and user agent as ``verify`` says,
what an error answer means (:func:`service_error`).
"""

from __future__ import annotations

import hashlib
import os
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import httpx

from .._core import RequestClock
from .._error_codes import EXPIRED_TOKEN_CODES
from .._errors import (
    ConnectError,
    ConnectionLostError,
    KinesisError,
    RequestTimeoutError,
    TransportError,
    error_from_response,
)
from .._logging import get_logger
from ._credentials import (
    Chain,
    CredentialProvider,
    RequestSigner,
    StaticCredentials,
    resolve_region,
)
from ._endpoints import Endpoint, configured_endpoint, endpoint_settings
from ._http11 import Http11Pool, Origin, StreamOpener, origin_of, too_long

if TYPE_CHECKING:
    from ._rules import Rules

_S = TypeVar("_S", bound="SignedService")
#: A call's endpoint context parameters (``(("StreamARN", arn),)``): part of its route's key.
Where = tuple[tuple[str, str], ...]
_T = TypeVar("_T")

_log = get_logger("kinesis_trio.client")

#: What a caller makes of an answer: (status, header fields, body) -> a value, or the
#: service's error (returned, not raised); raising refuses the answer.
AnswerReader = Callable[[int, Mapping[str, str], bytes], "_T | Exception"]

# Bodies at least this big are hashed for the signature in a worker thread (hashlib releases
# the GIL), so a 5 MB PutRecords does not stall the event loop for ~3 ms.
_HASH_IN_THREAD_MIN = 1 << 20


def _virtual_clock() -> bool:
    """Trio with a ``MockClock`` (tests): a worker thread would let its autojump leap
    ahead while the loop waits for the thread."""
    testing = sys.modules.get("trio.testing")
    if testing is None:
        return False
    try:
        clock = sys.modules["trio"].lowlevel.current_clock()
    except RuntimeError:  # not in a trio run
        return False
    return isinstance(clock, testing.MockClock)


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def map_transport_error(exc: httpx.RequestError, operation: str) -> TransportError:
    """The :class:`TransportError` for an httpx (or pool) failure: ``sent`` is False only
    when the request certainly never left."""
    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(
        exc,
        (
            httpx.ConnectError,
            httpx.ConnectTimeout,
            httpx.PoolTimeout,
            httpx.ProxyError,
            httpx.UnsupportedProtocol,
        ),
    ):
        return ConnectError(message, operation=operation)
    if isinstance(exc, httpx.LocalProtocolError):  # refused before anything was written
        return TransportError(message, operation=operation, sent=False)
    if isinstance(exc, httpx.TimeoutException):  # ReadTimeout, WriteTimeout
        return RequestTimeoutError(message, operation=operation)
    if isinstance(exc, (httpx.NetworkError, httpx.ProtocolError, httpx.DecodingError)):
        # ReadError, WriteError, CloseError, RemoteProtocolError, ...
        return ConnectionLostError(message, operation=operation)
    return TransportError(message, operation=operation, sent=True)


class _Headers(Mapping[str, str]):
    """An answer's header fields (h11's: lowercase names) as a read-only mapping, decoded
    only when asked (most answers are never looked at)."""

    __slots__ = ("_fields", "_map")

    def __init__(self, fields: list[tuple[bytes, bytes]]) -> None:
        self._fields = fields
        self._map: dict[str, str] | None = None

    def _get_map(self) -> dict[str, str]:
        found = self._map
        if found is None:
            found = {}
            for name, value in self._fields:
                found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
            self._map = found
        return found

    def __getitem__(self, key: str) -> str:
        return self._get_map()[key.lower()]

    def get(self, key: str, default: Any = None) -> Any:
        return self._get_map().get(key.lower(), default)

    def __iter__(self) -> Any:
        return iter(self._get_map())

    def __len__(self) -> int:
        return len(self._get_map())


async def _read_within(response: httpx.Response, limit: int | None, watch: _Watch | None) -> bytes:
    """A transport's answer body, each piece told to ``watch``; past ``limit`` bytes, a
    ``RemoteProtocolError`` (as the pool's own framing refuses it)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if limit is not None and size > limit:
            raise httpx.RemoteProtocolError(too_long(limit))
        if watch is not None:
            watch.received(len(chunk))
        parts.append(chunk)
    return b"".join(parts)


class _Watch:
    """Follows an exchange's bytes for its call: each piece out or in moves the call's
    deadline to what its :class:`RequestClock` says."""

    __slots__ = ("clock", "scope")

    def __init__(self, clock: RequestClock, scope: anyio.CancelScope) -> None:
        self.clock = clock
        self.scope = scope

    def begin(self) -> None:
        self.scope.deadline = self.clock.begin(anyio.current_time())

    def sent(self, nbytes: int, last: bool) -> None:
        self.scope.deadline = self.clock.sent(anyio.current_time(), nbytes, last)

    def received(self, nbytes: int) -> None:
        self.scope.deadline = self.clock.received(anyio.current_time(), nbytes)


class _Route:
    """One endpoint's URL, its origin in the pool and its signer."""

    __slots__ = ("origin", "signer", "url")

    def __init__(self, endpoint: Endpoint) -> None:
        self.url = endpoint.url + "/"
        host = httpx.URL(self.url).netloc.decode("ascii")
        self.origin: Origin = origin_of(self.url)
        self.signer = RequestSigner(endpoint.signing_name, endpoint.signing_region, self.url, host)


class SignedService:
    """An AWS endpoint reached with SigV4-signed POSTs through one connection pool.

    ``transport``: ``None`` for the network; an ``httpx.AsyncBaseTransport`` (a user's
    ``httpx.MockTransport``) is called through httpx's interface; a transport that can
    open byte streams (:class:`kinesis_trio.testing.FakeKinesis`'s) is used below the
    pool's framing. The subclass's ``read`` functions decide what each answer means.
    """

    region_name: str
    #: the endpoint of calls without an ARN (an account-id endpoint aside): the explicit
    #: one, or the rules' for :attr:`_probe_operation`
    endpoint_url: str
    #: the operation whose endpoint :attr:`endpoint_url` is, resolved at creation
    _probe_operation = ""

    def __init__(
        self,
        service: str,
        env_suffix: str,
        *,
        region_name: str | None,
        endpoint_url: str | None,
        credentials: StaticCredentials | CredentialProvider | None,
        profile_name: str | None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 24,
        request_timeout: float = 6.0,
        connect_timeout: float = 6.0,
        verify: bool | str | ssl.SSLContext = True,
        user_agent: str = "kinesis-trio",
        model: str | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        session: Any = None
        if credentials is None or profile_name is not None:
            session = Chain(profile_name)
        self.region_name = resolve_region(region_name, session)
        if isinstance(credentials, CredentialProvider):
            self._credentials = credentials
        else:
            self._credentials = CredentialProvider(
                credentials if credentials is not None else session
            )
        #: the rules of each call's endpoint; None with an explicit endpoint (``_fixed``)
        self._rules: Rules | None = None
        self._fixed: _Route | None = None
        #: each call's route by (operation, context parameters, account id), and each
        #: route by its endpoint: one signer and one origin per endpoint
        self._routes: dict[tuple[str, Where, str | None], _Route] = {}
        self._by_endpoint: dict[Endpoint, _Route] = {}
        explicit = configured_endpoint(endpoint_url, env_suffix)
        if explicit is not None:
            self._fixed = _Route(Endpoint(explicit, service, self.region_name))
            self.endpoint_url = explicit
        else:
            from ._rules import Rules  # with botocore's rules: not for an explicit endpoint

            self._rules = Rules(model or service, self.region_name, endpoint_settings(session))
            # the endpoint of a call without an ARN (and no account id): refused now if
            # the rules refuse the region or the settings
            self.endpoint_url = self._rules.resolve(self._probe_operation, {}, probe=True).url
        self._closed = False
        self._user_agent = user_agent
        #: the debug event each call logs
        self._event = f"{service}.call"
        #: a call's deadline follows its bytes (``_core._deadline``)
        self._limits = (request_timeout, connect_timeout)
        # The client owns the transport's lifetime.
        self._transport: httpx.AsyncBaseTransport | None = None
        self._pool: Http11Pool | None = None
        if transport is None or isinstance(transport, StreamOpener):
            self._pool = Http11Pool(
                verify=verify,
                max_connections=max_connections,
                connect_timeout=connect_timeout,
                pool_timeout=request_timeout,
                opener=transport,
            )
            tls = self._fixed is None or self._fixed.origin[0] == "https"  # the rules': https
            if isinstance(verify, str) and transport is None and tls:
                # calls over TLS need the bundle at once: a bad one is refused here (over
                # http, as to a local engine, it is never read)
                self._pool.ssl_context()
        else:
            self._transport = transport
        self._timeouts = {
            "connect": connect_timeout,
            "read": request_timeout,
            "write": request_timeout,
            "pool": request_timeout,
        }

    @property
    def credentials(self) -> CredentialProvider:
        """The credential provider used to sign requests."""
        return self._credentials

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    async def __aenter__(self: _S) -> _S:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (or the transport). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._pool is not None:
                await self._pool.aclose()
            if self._transport is not None:
                await self._transport.aclose()

    # -- the one request path -----------------------------------------------------------

    async def _call(
        self,
        operation: str,
        body: bytes,
        headers: dict[str, str],
        read: AnswerReader[_T],
        *,
        within: float | None = None,
        answer: int = 0,
        limit: int | None = None,
        where: Where = (),
    ) -> _T:
        """Sign and send ``body``; what ``read`` makes of the answer.

        The call (hashing, credentials, the exchange and the one retry after an expired
        token) has a deadline that follows its bytes (:class:`_core._deadline.RequestClock`):
        ``connect_timeout + request_timeout``, plus ``request_timeout`` per MiB of its body
        and answer, whatever moves (a server trickling its answer a byte at a time would
        pass any per-read timeout); and no more than ``request_timeout`` without a byte
        moving while the request goes out or the answer comes in. ``within`` seconds
        instead: one fixed deadline. Past it, :class:`RequestTimeoutError` (``sent`` False
        when the request's last byte never went; ``stalled`` False when its size's time ran
        out while it moved); ``answer``: bytes of answer the bound has from the start (an
        answer the endpoint builds before its first byte); ``limit``: the most bytes the
        answer may hold (``_core._deadline.answer_limit``: past it, a ``TransportError``,
        sent); ``where``: the call's endpoint context parameters (its ARN), which with the
        operation pick its endpoint (:meth:`route`). An error ``read`` returns is raised;
        one with an expired-token code first refreshes the credentials and sends once more
        (an auth rejection means nothing was processed).
        """
        self._check_open()
        now = anyio.current_time()
        clock: RequestClock | None = None
        if within is None:
            clock = RequestClock(now, len(body), *self._limits, answer)
            deadline = clock.deadline()
        else:
            deadline = now + within
        with anyio.CancelScope(deadline=deadline) as scope:
            watch = None if clock is None else _Watch(clock, scope)
            if len(body) >= _HASH_IN_THREAD_MIN and not _virtual_clock():
                digest = await anyio.to_thread.run_sync(_sha256_hex, body)
            else:
                digest = _sha256_hex(body)
            creds = await self._credentials.get()
            route = self._fixed or self._route(operation, where, getattr(creds, "account_id", None))
            result = await self._send_once(
                route, operation, body, digest, creds, headers, read, watch, limit
            )
            if isinstance(result, Exception):
                if getattr(result, "code", None) in EXPIRED_TOKEN_CODES:
                    fresh = await self._credentials.force_refresh(creds)
                    if fresh != creds:
                        _log.debug("expired_token_retry", operation=operation)
                        if watch is not None:
                            watch.begin()
                        account = getattr(fresh, "account_id", None)
                        route = self._fixed or self._route(operation, where, account)
                        result = await self._send_once(
                            route, operation, body, digest, fresh, headers, read, watch, limit
                        )
                if isinstance(result, Exception):
                    raise result
            return result
        assert scope.cancelled_caught
        if clock is None:
            raise RequestTimeoutError(
                f"{operation} did not complete within {within:g} s", operation=operation
            )
        raise RequestTimeoutError(
            clock.describe(operation),
            operation=operation,
            sent=clock.out,
            stalled=clock.stalled(),
        )

    def _route(self, operation: str, where: Where, account_id: str | None) -> _Route:
        """The route of ``operation`` with ``where``: resolved by the rules on first use,
        then kept (the rules do not change while the client lives)."""
        key = (operation, where, account_id)
        route = self._routes.get(key)
        if route is None:
            assert self._rules is not None
            endpoint = self._rules.resolve(operation, dict(where), account_id)
            route = self._by_endpoint.get(endpoint)
            if route is None:
                route = self._by_endpoint[endpoint] = _Route(endpoint)
            self._routes[key] = route
        return route

    async def endpoint_for(self, operation: str, where: Where = ()) -> str:
        """The URL ``operation`` with ``where`` goes to (the credentials are resolved for
        their account id); :class:`EndpointError` if the rules refuse it. A producer asks
        this of its streams when it loads them, so that a refusal comes at open."""
        if self._fixed is not None:
            return self._fixed.url.rstrip("/")
        creds = await self._credentials.get()
        return self._route(operation, where, getattr(creds, "account_id", None)).url.rstrip("/")

    async def _send_once(
        self,
        route: _Route,
        operation: str,
        body: bytes,
        digest: str,
        creds: Any,
        headers: dict[str, str],
        read: AnswerReader[_T],
        watch: _Watch | None = None,
        limit: int | None = None,
    ) -> _T | Exception:
        signed = route.signer.sign(body, digest, creds, headers)
        signed["User-Agent"] = self._user_agent
        start = time.perf_counter()
        status = 0

        def framed(code: int, fields: list[tuple[bytes, bytes]], content: bytes) -> _T | Exception:
            nonlocal status
            status = code
            return read(code, _Headers(fields), content)

        try:
            pool = self._pool
            if pool is not None:
                result = await pool.post(route.origin, "/", signed, body, framed, watch, limit)
            else:
                assert self._transport is not None
                if watch is not None:  # what the transport does is not seen: sent at once
                    watch.sent(len(body), True)
                request = httpx.Request(
                    "POST",
                    route.url,
                    content=body,
                    headers=signed,
                    extensions={"timeout": self._timeouts},
                )
                response = await self._transport.handle_async_request(request)
                try:
                    content = await _read_within(response, limit, watch)
                finally:
                    await response.aclose()
                status = response.status_code
                result = read(status, response.headers, content)
        except httpx.RequestError as exc:
            error = map_transport_error(exc, operation)
            self._logged(operation, start, status or None, error)
            raise error from exc
        except Exception as exc:  # an answer ``read`` refused
            self._logged(operation, start, status, exc)
            raise
        self._logged(operation, start, status, result if isinstance(result, Exception) else None)
        return result

    def _logged(
        self, operation: str, start: float, status: int | None, error: BaseException | None
    ) -> None:
        duration = round(time.perf_counter() - start, 6)
        if error is None:
            _log.debug(self._event, operation=operation, status=status, duration=duration)
        else:
            code = getattr(error, "code", None) or type(error).__name__
            _log.debug(
                self._event, operation=operation, status=status, duration=duration, error=code
            )


# -- the AWS JSON 1.1 protocol ------------------------------------------------------------

JSON_11 = "application/x-amz-json-1.1"


def user_agent() -> str:
    """The ``User-Agent`` of the JSON clients: the package's version and httpx's (the
    package's own ``__version__``: a distribution lookup scans every folder on ``sys.path``
    at each client's creation)."""
    from .._version import __version__

    return f"kinesis-trio/{__version__} httpx/{httpx.__version__}"


def ssl_verify(verify: bool | str | ssl.SSLContext) -> bool | str | ssl.SSLContext:
    """A client's ``verify`` for the pool: ``True`` with ``AWS_CA_BUNDLE`` set, that bundle's
    path. A CA bundle's path (a file, or a folder of them) is loaded by the pool: when the
    client is made if its calls go over TLS (a bad bundle is refused there), never for an
    ``http`` endpoint (a local engine: a system bundle is tens of milliseconds of a cold
    start); one that does not exist is refused here."""
    if verify is True:
        verify = os.environ.get("AWS_CA_BUNDLE") or True
    if isinstance(verify, str) and not os.path.exists(verify):
        raise FileNotFoundError(
            f"CA bundle {verify!r} (verify=... or AWS_CA_BUNDLE) does not exist"
        )
    return verify


def service_error(
    operation: str, status: int, headers: Mapping[str, str], content: bytes
) -> KinesisError:
    """A JSON service's error answer: the error it sent (returned: the connection is
    reused), or, without the service's error shape, one that is not ``from_service``
    (raised: the answer is refused, its connection closed)."""
    error = error_from_response(operation, status, content, headers)
    if not error.from_service:
        raise error
    return error


class JsonService(SignedService):
    """An AWS JSON 1.1 API on the signed stack: each operation a POST with
    ``X-Amz-Target: <prefix><Operation>``. The subclass passes ``verify`` through
    :func:`ssl_verify` and :func:`user_agent` as the user agent."""

    #: the ``X-Amz-Target`` before the operation's name
    _target_prefix = ""

    def _headers(self, operation: str) -> dict[str, str]:
        """The request header fields of ``operation``."""
        return {"Content-Type": JSON_11, "X-Amz-Target": self._target_prefix + operation}
