"""kinesis_trio: a structured-concurrency producer for Amazon Kinesis Data Streams.

KPL aggregation and batching, per-record outcomes, bounded memory; under Trio and asyncio.
"""

from ._aws._client import KinesisClient as KinesisClient
from ._aws._credentials import StaticCredentials as StaticCredentials
from ._config import ProducerConfig as ProducerConfig
from ._core import RecoveryReport as RecoveryReport
from ._core import UserRecord as UserRecord
from ._core import deaggregate as deaggregate
from ._dead_letters import FailedRecord as FailedRecord
from ._errors import AccessDeniedError as AccessDeniedError
from ._errors import AuthenticationError as AuthenticationError
from ._errors import ConnectError as ConnectError
from ._errors import ConnectionLostError as ConnectionLostError
from ._errors import CredentialsError as CredentialsError
from ._errors import EndpointError as EndpointError
from ._errors import ExpiredTokenError as ExpiredTokenError
from ._errors import KinesisError as KinesisError
from ._errors import KinesisTrioError as KinesisTrioError
from ._errors import KMSError as KMSError
from ._errors import LimitExceededError as LimitExceededError
from ._errors import ProducerClosedError as ProducerClosedError
from ._errors import ProducerForkedError as ProducerForkedError
from ._errors import ProvisionedThroughputExceededError as ProvisionedThroughputExceededError
from ._errors import RequestTimeoutError as RequestTimeoutError
from ._errors import ResourceInUseError as ResourceInUseError
from ._errors import ResourceNotFoundError as ResourceNotFoundError
from ._errors import ServiceError as ServiceError
from ._errors import SpoolError as SpoolError
from ._errors import SpoolFormatError as SpoolFormatError
from ._errors import SpoolLockedError as SpoolLockedError
from ._errors import SpoolWriteError as SpoolWriteError
from ._errors import TransportError as TransportError
from ._errors import ValidationError as ValidationError
from ._results import Attempt as Attempt
from ._results import RecordResult as RecordResult
from ._shell._outcome import Outcome as Outcome
from ._shell._producer import Producer as Producer
from ._shell._sync_producer import SyncProducer as SyncProducer
from ._version import __version__ as __version__

__all__ = [
    "AccessDeniedError",
    "Attempt",
    "AuthenticationError",
    "ConnectError",
    "ConnectionLostError",
    "CredentialsError",
    "EndpointError",
    "ExpiredTokenError",
    "FailedRecord",
    "KMSError",
    "KinesisClient",
    "KinesisError",
    "KinesisTrioError",
    "LimitExceededError",
    "Outcome",
    "Producer",
    "ProducerClosedError",
    "ProducerConfig",
    "ProducerForkedError",
    "ProvisionedThroughputExceededError",
    "RecordResult",
    "RecoveryReport",
    "RequestTimeoutError",
    "ResourceInUseError",
    "ResourceNotFoundError",
    "ServiceError",
    "SpoolError",
    "SpoolFormatError",
    "SpoolLockedError",
    "SpoolWriteError",
    "StaticCredentials",
    "SyncProducer",
    "TransportError",
    "UserRecord",
    "ValidationError",
    "deaggregate",
]
