"""What AWS's error codes mean, for every floor that reads them: the client (``_aws``),
the retry policy (``_core._retry_policy``) and the CloudWatch metrics sink. Tables only, and the
one question the metrics sink asks of them (:func:`metrics_retryable`); what to *do* about
a code is the retry policy's. The codes follow the Kinesis API reference and botocore's
service models (see the reference notes)."""

from __future__ import annotations

__all__ = [
    "AWS_THROTTLING_CODES",
    "EXPIRED_TOKEN_CODES",
    "FATAL_CODES",
    "IDENTITY_CODES",
    "INTERNAL_CODES",
    "THROTTLING_CODES",
    "TIMEOUT_CODES",
    "TRANSIENT_CODES",
    "metrics_retryable",
]

#: The request's identity or signature was refused: no retry can fix these.
IDENTITY_CODES = (
    "UnrecognizedClientException",
    "IncompleteSignature",
    "IncompleteSignatureException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "InvalidClientTokenId",
)
#: The service failed inside: worth another try.
INTERNAL_CODES = (
    "InternalFailure",
    "InternalFailureException",
    "InternalServerError",
    "InternalError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
)

#: Throttling as AWS services at large name it (CloudWatch's PutMetricData too).
AWS_THROTTLING_CODES = frozenset(
    {"ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException"}
)

#: Throttling: retried (unless ``fail_if_throttled``) and slows the shard's rate down.
THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "KMSThrottlingException",
        "SlowDown",
        *AWS_THROTTLING_CODES,
    }
)

#: A request that timed out at the service.
TIMEOUT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException"})

#: Transient service-side failures: retried.
TRANSIENT_CODES = frozenset({*INTERNAL_CODES, *TIMEOUT_CODES})

#: The session token expired: refresh the credentials, then retry.
EXPIRED_TOKEN_CODES = frozenset({"ExpiredTokenException", "ExpiredToken"})

#: Codes that retrying cannot fix: fail the records now.
FATAL_CODES = frozenset(
    {
        "ResourceNotFoundException",
        "ResourceInUseException",
        "AccessDeniedException",
        "ValidationException",
        "InvalidArgumentException",
        "SerializationException",
        "KMSDisabledException",
        "KMSInvalidStateException",
        "KMSAccessDeniedException",
        "KMSNotFoundException",
        "KMSOptInRequired",
        *IDENTITY_CODES,
        "OptInRequired",
        "UnknownOperationException",
    }
)

#: What else CloudWatch answers a PutMetricData it may take on another try with: its own
#: names for throttling and internal failures, an expired signature (a retry signs anew),
#: and the shared throttling and timeout codes. Not Kinesis' own throttling
#: (ProvisionedThroughputExceeded, KMS), which CloudWatch does not answer with.
_METRICS_RETRY_CODES = frozenset(
    {
        *AWS_THROTTLING_CODES,
        *TIMEOUT_CODES,
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestExpired",
        "PriorRequestNotComplete",
        "InternalFailure",
        "InternalServiceFault",
        "InternalServiceError",
        "ServiceUnavailable",
    }
)


def metrics_retryable(code: str, status: int) -> bool:
    """Is a PutMetricData that failed with ``code`` and HTTP ``status`` (the CloudWatch
    metrics sink) worth another try? Any 5xx or 429, throttling and transient codes. An
    expired token (:data:`EXPIRED_TOKEN_CODES`) is, once the credentials are refreshed."""
    return status >= 500 or status == 429 or code in _METRICS_RETRY_CODES
