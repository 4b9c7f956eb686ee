"""Exceptions raised by kinesis_trio.

::

    KinesisTrioError(Exception)
    ├── KinesisError                 AWS answered with an error (.code .message .status_code
    │   │                            .operation .request_id)
    │   ├── ResourceNotFoundError        ResourceNotFoundException
    │   ├── ResourceInUseError           ResourceInUseException
    │   ├── AccessDeniedError            AccessDeniedException
    │   ├── ValidationError              ValidationException, InvalidArgumentException,
    │   │                                SerializationException, ... (and HTTP 413)
    │   ├── LimitExceededError           LimitExceededException, ThrottlingException (and HTTP 429)
    │   ├── ProvisionedThroughputExceededError
    │   ├── ExpiredTokenError            ExpiredTokenException
    │   ├── KMSError                     every KMS* code
    │   ├── AuthenticationError          UnrecognizedClientException, IncompleteSignature,
    │   │                                MissingAuthenticationToken, InvalidSignatureException,
    │   │                                SignatureDoesNotMatch, ...
    │   └── ServiceError                 InternalFailure, ServiceUnavailable, any other 5xx,
    │                                    MalformedResponse (an answer that cannot be read)
    ├── TransportError               network-level failure (.sent, .operation)
    │   ├── ConnectError                 no connection: the request was never sent
    │   ├── RequestTimeoutError          read/write timeout: ambiguous, may have been processed
    │   └── ConnectionLostError          connection dropped/protocol error: ambiguous
    ├── CredentialsError             no credentials found, or refreshing them failed
    ├── ProducerClosedError          the producer is closed
    │   └── ProducerForkedError          opened in the process this one forked from
    └── SpoolError                   the spool (``spool_dir``) cannot be used
        ├── SpoolLockedError             another producer (process) owns the spool
        ├── SpoolFormatError             not a spool of this version (newer, or not ours)
        └── SpoolWriteError              a write failed (disk full, I/O error): ``.outcome``

``retryable`` on KinesisError and TransportError is a hint following the Kinesis
documentation (throttling, 5xx, network errors: yes; validation, auth, missing stream: no).

``from_service`` on KinesisError tells a well-formed error the service sent (a 4xx or 5xx
whose JSON body has a ``__type``, or with an ``x-amzn-ErrorType`` header) from an answer
that only looks like one (a 3xx, an HTML page from a proxy, a body that cannot be read):
the request may have been processed under the latter, so the producer retries its records
as ambiguous (``possible_duplicate``). But a 4xx that is not the service's (other than 408
and 429) is a refusal by something in front of the endpoint: nothing was processed, and
the records fail at once (``refused_on_the_way``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._error_codes import IDENTITY_CODES, INTERNAL_CODES

_MAX_MESSAGE = 512


class KinesisTrioError(Exception):
    """Base class of every exception raised by kinesis_trio."""


class KinesisError(KinesisTrioError):
    """Kinesis (or AWS in front of it) answered a request with an error."""

    retryable: bool = False

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        status_code: int = 0,
        operation: str = "",
        request_id: str | None = None,
        from_service: bool = True,
    ) -> None:
        self.code = code
        self.message = message
        self.status_code = status_code
        self.operation = operation
        self.request_id = request_id
        #: a well-formed error the service sent (else: an answer the request may have been
        #: processed under); never for a 1xx, 2xx or 3xx status
        self.from_service: bool = from_service and not 100 <= status_code < 400
        self.retryable = self._retryable(code) or not (
            self.from_service or refused_on_the_way(status_code)
        )
        super().__init__(code, message)

    def _retryable(self, code: str) -> bool:
        return type(self).retryable

    def __str__(self) -> str:
        head = f"{self.code}: {self.message}" if self.message else self.code
        return f"{head} ({self.operation}, HTTP {self.status_code})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"status_code={self.status_code}, operation={self.operation!r}, "
            f"request_id={self.request_id!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_kinesis_error,
            (
                type(self),
                self.code,
                self.message,
                self.status_code,
                self.operation,
                self.request_id,
                self.from_service,
            ),
        )


def _rebuild_kinesis_error(
    cls: type[KinesisError],
    code: str,
    message: str,
    status_code: int,
    operation: str,
    request_id: str | None,
    from_service: bool = True,
) -> KinesisError:
    return cls(
        code,
        message,
        status_code=status_code,
        operation=operation,
        request_id=request_id,
        from_service=from_service,
    )


class ResourceNotFoundError(KinesisError):
    """The stream (or shard, or consumer) does not exist."""


class ResourceInUseError(KinesisError):
    """The resource is not in a state that allows the operation (e.g. CREATING)."""


class AccessDeniedError(KinesisError):
    """IAM denied the operation."""


class ValidationError(KinesisError):
    """The request was malformed or violated a constraint; retrying will not help."""


class LimitExceededError(KinesisError):
    """An API rate or account limit was exceeded; retry with backoff."""

    retryable = True


class ProvisionedThroughputExceededError(KinesisError):
    """A shard's write or read throughput was exceeded; retry with backoff."""

    retryable = True


class ExpiredTokenError(KinesisError):
    """The session token expired; refresh the credentials and retry."""

    retryable = True


class KMSError(KinesisError):
    """A KMS problem with the stream's encryption key (``KMS*`` codes)."""

    def _retryable(self, code: str) -> bool:
        return code == "KMSThrottlingException"  # only KMS throttling is worth retrying


class AuthenticationError(KinesisError):
    """The request's signature or access key was rejected."""


class ServiceError(KinesisError):
    """Kinesis failed internally (InternalFailure, ServiceUnavailable, 5xx), or answered
    with a body that cannot be read (code ``MalformedResponse``)."""

    retryable = True


class TransportError(KinesisTrioError):
    """The HTTP exchange failed at the network level.

    ``sent`` is False only when the request certainly never reached the server; when it is
    True the server may have processed it (a retry could duplicate records).
    """

    retryable = True
    sent: bool = True

    def __init__(self, message: str, *, operation: str = "", sent: bool | None = None) -> None:
        self.message = message
        self.operation = operation
        if sent is not None:
            self.sent = sent
        super().__init__(message)

    def __str__(self) -> str:
        state = "request may have been received" if self.sent else "request not sent"
        return f"{self.message} ({self.operation}, {state})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_transport_error, (type(self), self.message, self.operation, self.sent))


def _rebuild_transport_error(
    cls: type[TransportError], message: str, operation: str, sent: bool
) -> TransportError:
    return cls(message, operation=operation, sent=sent)


class ConnectError(TransportError):
    """No connection could be made (refused, DNS, connect or pool timeout): never sent."""

    sent = False


class RequestTimeoutError(TransportError):
    """Timed out writing the request or waiting for the response: ambiguous, unless
    ``sent`` is False (its last byte was never handed to the connection).

    ``stalled``: True when nothing moved for ``request_timeout`` (the path or the peer is
    gone); False when the time a request of its size has ran out while it was still moving
    or being processed (the path carries less than the request needs)."""

    stalled: bool = True

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        sent: bool | None = None,
        stalled: bool = True,
    ) -> None:
        super().__init__(message, operation=operation, sent=sent)
        self.stalled = stalled

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_timeout,
            (type(self), self.message, self.operation, self.sent, self.stalled),
        )


def _rebuild_timeout(
    cls: type[RequestTimeoutError], message: str, operation: str, sent: bool, stalled: bool
) -> RequestTimeoutError:
    return cls(message, operation=operation, sent=sent, stalled=stalled)


class ConnectionLostError(TransportError):
    """The connection broke or the server spoke bad HTTP mid-exchange: ambiguous."""


class CredentialsError(KinesisTrioError):
    """No AWS credentials could be found, or refreshing them failed."""


class EndpointError(KinesisTrioError, ValueError):
    """No endpoint for a call with these settings: botocore's endpoint rules refuse them
    (FIPS or dual-stack where the partition has none, an ARN of another partition), the
    region is in none of the AWS partitions, or an ARN names another region than the
    client's. The message gives the reason and the setting to change."""


class ProducerClosedError(KinesisTrioError):
    """The producer has been closed; no more records are accepted."""


class ProducerForkedError(ProducerClosedError):
    """The producer was opened in another process, which forked this one: its event loop
    (the ``SyncProducer``'s thread), its connections and its records in flight are that
    process's. Open one producer per process, after the fork."""


class SpoolError(KinesisTrioError):
    """The spool (``ProducerConfig.spool_dir``) cannot be used."""


class SpoolLockedError(SpoolError):
    """Another producer owns the spool: a spool has one owner (give each process its own
    ``spool_dir``)."""


class SpoolFormatError(SpoolError):
    """The spool was written by a newer version of kinesis_trio (or is not a spool)."""


class SpoolWriteError(SpoolError):
    """Writing to the spool failed (a full disk, an I/O error).

    Raised by ``put`` for the records it concerns. ``outcome`` is the record's outcome when
    it was accepted all the same (``spool_sync="put"``: it is sent, but not durable), and
    ``None`` when it was not accepted (the spool refuses records until a write succeeds
    again; the records accepted before are kept and written again)."""

    def __init__(self, message: str, outcome: object = None) -> None:
        super().__init__(message)
        #: the record's :class:`~kinesis_trio.Outcome` if it was accepted, else ``None``
        self.outcome = outcome


_EXACT: dict[str, type[KinesisError]] = {}


def _register(cls: type[KinesisError], *codes: str) -> None:
    for code in codes:
        _EXACT[code] = cls


_register(ResourceNotFoundError, "ResourceNotFoundException", "ResourceNotFound")
_register(ResourceInUseError, "ResourceInUseException")
_register(AccessDeniedError, "AccessDeniedException", "AccessDenied", "NotAuthorized")
_register(
    ValidationError,
    "ValidationException",
    "ValidationError",
    "InvalidArgumentException",
    "SerializationException",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidQueryParameter",
    "MissingParameter",
    "MalformedQueryString",
    "InvalidAction",
    "UnknownOperationException",
)
_register(
    LimitExceededError,
    "LimitExceededException",
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "TooManyRequestsException",
)
_register(ProvisionedThroughputExceededError, "ProvisionedThroughputExceededException")
_register(ExpiredTokenError, "ExpiredTokenException", "ExpiredToken")
_register(AuthenticationError, *IDENTITY_CODES, "RequestExpired")
_register(ServiceError, *INTERNAL_CODES)

_BY_STATUS: dict[int, type[KinesisError]] = {413: ValidationError, 429: LimitExceededError}


def _class_for(code: str, status: int) -> type[KinesisError]:
    cls = _EXACT.get(code)
    if cls is not None:
        return cls
    if code.startswith("KMS"):
        return KMSError
    if status >= 500:
        return ServiceError
    return _BY_STATUS.get(status, KinesisError)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lname = name.lower()
    for key, val in headers.items():
        if key.lower() == lname:
            return val
    return None


def _clean_code(code: str) -> str:
    # "ns.v1#Code", "Code:http://internal.amazon.com/coral/..." or plain "Code".
    code = code.strip()
    if ":" in code:
        code = code.split(":", 1)[0]
    if "#" in code:
        code = code.rsplit("#", 1)[1]
    return code.strip()


def refused_on_the_way(status: int) -> bool:
    """Does a 4xx answer that is not the service's own error (no ``__type``, no
    ``x-amzn-ErrorType``: a proxy, load balancer or gateway in front of the endpoint)
    say that the request was refused unprocessed? Every 4xx but 408 (the request came too
    slowly) and 429 (too many requests): "the client seems to have erred" (RFC 9110, 15.5),
    and whoever answered did not pass the request on, so nothing was written and the same
    request would be refused again. (A 413 is one of them: a request of several records is
    split.)"""
    return 400 <= status < 500 and status not in (408, 429)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 3] + "..."
    return text


def malformed_answer(operation: str, what: str) -> ServiceError:
    """A 200 answer of ``operation`` that cannot be read (``MalformedResponse``), saying
    what is wrong with it."""
    return ServiceError(
        "MalformedResponse",
        f"{operation} answered with a malformed {_ANSWER_OF.get(operation, 'answer')}: {what}",
        status_code=200,
        operation=operation,
        from_service=False,
    )


_ANSWER_OF = {"ListShards": "shard list", "DescribeStreamSummary": "summary"}


def _text(value: Any) -> str:
    """A message of any JSON type as bounded text (a nested value's repr may not recurse)."""
    if isinstance(value, str):
        return value[: _MAX_MESSAGE * 4]
    try:
        return str(value)[: _MAX_MESSAGE * 4]
    except (RecursionError, MemoryError, ValueError):
        return f"<a {type(value).__name__}>"


def parse_json(body: bytes) -> Any:
    """``body`` as JSON, or ``None`` when it is not JSON or cannot be read (invalid UTF-8,
    nested too deep for the parser, too large to hold): an answer never raises."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError, MemoryError):
        return None


def error_from_response(
    operation: str, status: int, body: bytes, headers: Mapping[str, str]
) -> KinesisError:
    """Build the right KinesisError subclass from an error response.

    The code comes from the JSON ``__type`` (namespace before ``#`` stripped), else the
    ``x-amzn-ErrorType`` header, else ``code``/``Code`` in the body, else the status code.
    The error is ``from_service`` when the status is 4xx or 5xx and the code came from the
    ``__type`` or the header (the service's own error shape); any other answer says nothing
    reliable about what became of the request.
    """
    parsed: Any = parse_json(body) if body else None
    data: Mapping[str, Any] = parsed if isinstance(parsed, dict) else {}

    raw_code: Any = data.get("__type") or _header(headers, "x-amzn-ErrorType")
    code = _clean_code(raw_code[:256]) if isinstance(raw_code, str) else ""
    from_service = bool(code) and 400 <= status < 600
    if not code:
        fallback: Any = data.get("code") or data.get("Code")
        code = _clean_code(fallback[:256]) if isinstance(fallback, str) else ""
    if not code:
        code = str(status)

    raw_message: Any = data.get("message")
    if raw_message is None:
        raw_message = data.get("Message")
    if raw_message is None and parsed is None and body:
        # Not JSON (an HTML page from a proxy, say): keep a short, one-line excerpt.
        raw_message = body[:_MAX_MESSAGE].decode("utf-8", "replace")
    message = _one_line(_text(raw_message)) if raw_message is not None else ""

    request_id = _header(headers, "x-amzn-RequestId") or _header(headers, "x-amz-request-id")
    return _class_for(code, status)(
        code,
        message,
        status_code=status,
        operation=operation,
        request_id=request_id,
        from_service=from_service,
    )


# -- the Glue Schema Registry ------------------------------------------------------------


class SchemaError(KinesisTrioError):
    """Base of the Glue Schema Registry errors."""


class SchemaMismatchError(SchemaError, ValueError):
    """A record does not match its schema (raised at ``put``; nothing else is affected)."""


class SchemaRegistryError(SchemaError):
    """The registry refused or failed a call (``code`` is its error code, if any)."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class SchemaIncompatibleError(SchemaRegistryError):
    """The registry refused a new version as incompatible with the schema's versions."""


class SchemaNotFoundError(SchemaRegistryError):
    """The schema or version does not exist (and auto-registration is off)."""


class DecodeError(SchemaError, ValueError):
    """Bytes that are not a GSR record (bad header, unknown compression, bad payload)."""
