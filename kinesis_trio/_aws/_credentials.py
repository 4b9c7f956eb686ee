"""AWS credentials and region resolution, and the SigV4 signer.

botocore's credential chain is used as is; the only thing added is that nothing blocking
ever runs on the event loop: resolving the chain and refreshing temporary credentials happen
in a worker thread, one refresh at a time, and the frozen result is cached so that the common
case (credentials far from expiry) costs one float comparison.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import botocore.auth
import botocore.awsrequest
import botocore.credentials
import botocore.exceptions

from .._errors import CredentialsError
from .._logging import get_logger

__all__ = [
    "CredentialProvider",
    "StaticCredentials",
    "resolve_region",
]

_log = get_logger("kinesis_trio.credentials")

# After a refresh that did not push the expiry out of the advisory window (a failed
# advisory refresh, or short-lived credentials), wait this long before trying again.
_REFRESH_RETRY_SECONDS = 10.0

_REGION_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")

_NO_CREDENTIALS_HELP = (
    "no AWS credentials found: pass credentials=StaticCredentials(...), set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or configure a profile in "
    "~/.aws/config / ~/.aws/credentials (select it with profile_name=... or AWS_PROFILE)"
)


def _mask(access_key_id: str) -> str:
    shown = 8 if len(access_key_id) >= 16 else 4 if len(access_key_id) > 4 else 0
    return access_key_id[:shown] + "***"


@dataclass(frozen=True)
class StaticCredentials:
    """Fixed AWS credentials. ``repr()`` never shows the secret key or the session token."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key_id or not self.secret_access_key:
            raise ValueError("StaticCredentials needs a non-empty access key id and secret key")

    def __repr__(self) -> str:
        token = "'***'" if self.session_token else "None"
        return (
            f"StaticCredentials(access_key_id={_mask(self.access_key_id)!r}, "
            f"secret_access_key='***', session_token={token})"
        )

    __str__ = __repr__


@dataclass(frozen=True)
class Chain:
    """botocore's default credential chain (of ``profile``), made a ``botocore.session``
    ``Session`` only when first resolved, in a worker thread: importing that module is a
    fifth of a Lambda function's cold start, and a region and credentials from the
    environment need none of it until the first request."""

    profile: str | None = None

    def from_environment(self) -> Any:
        """The chain's first link without a Session: the credentials in the environment
        variables (as in a Lambda function), or None. botocore's ``EnvProvider``, which
        refreshes them from the variables when ``AWS_CREDENTIAL_EXPIRATION`` is set."""
        env = os.environ
        if self.profile is not None:
            return None  # a profile given: botocore's chain skips the variables

        if not (env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")):
            return None
        return botocore.credentials.EnvProvider().load()

    def session(self) -> Any:
        import botocore.session

        return botocore.session.Session(profile=self.profile)


def _is_session(source: object) -> bool:
    module = sys.modules.get("botocore.session")  # not imported: not a Session
    return module is not None and isinstance(source, module.Session)


class CredentialProvider:
    """Frozen credentials for signing, without blocking the event loop.

    ``source`` is a :class:`StaticCredentials`, a botocore ``Credentials`` object (including
    ``RefreshableCredentials``) or a ``botocore.session.Session`` whose credential chain is
    resolved, in a worker thread, on first use.
    """

    def __init__(self, source: StaticCredentials | Any) -> None:
        self._session: Any = None
        self._creds: Any = None
        self._frozen: Any = None
        self._refresh_at: float | None = None  # None: never (static credentials)
        self._mandatory_at: float | None = None
        self._now: Callable[[], float] = time.time
        self._lock = anyio.Lock()
        if isinstance(source, StaticCredentials):
            self._frozen = botocore.credentials.ReadOnlyCredentials(
                source.access_key_id, source.secret_access_key, source.session_token
            )
            self._method = "static"
        elif isinstance(source, botocore.credentials.Credentials):
            self._creds = source
            self._method = str(getattr(source, "method", None) or "explicit")
            if not isinstance(source, botocore.credentials.RefreshableCredentials):
                self._frozen = source.get_frozen_credentials()
            else:
                # Far from expiry, take the current frozen credentials without a thread hop
                # (refresh_needed() only compares times; it never refreshes).
                frozen = getattr(source, "_frozen_credentials", None)
                if frozen is not None and not source.refresh_needed():
                    self._set_deadlines(source)
                    self._frozen = frozen
        elif isinstance(source, Chain) or _is_session(source):
            self._session = source
            self._method = "chain"
        else:
            raise TypeError(
                "CredentialProvider needs StaticCredentials, botocore Credentials or a "
                f"botocore Session, not {type(source).__name__}"
            )

    @property
    def method(self) -> str:
        """Where the credentials come from (``static``, ``env``, ``assume-role``, ...)."""
        return self._method

    def __repr__(self) -> str:
        return f"CredentialProvider(method={self._method!r})"

    async def get(self) -> Any:
        """Return ``botocore.credentials.ReadOnlyCredentials`` valid for signing now."""
        frozen = self._frozen
        if frozen is not None:
            refresh_at = self._refresh_at
            if refresh_at is None or self._now() < refresh_at:
                return frozen
        return await self._get_slow()

    async def force_refresh(self, stale: Any = None) -> Any:
        """Refresh now (after ``ExpiredTokenException``) and return the new credentials.

        Pass the credentials that were rejected as ``stale``: if another task has already
        replaced them, nothing is refreshed again. Static credentials are returned as is.
        """
        if self._creds is None and self._session is None:
            return self._frozen
        async with self._lock:
            if stale is not None and self._frozen is not None and self._frozen != stale:
                return self._frozen
            return await self._refresh_locked(force=True)

    async def _get_slow(self) -> Any:
        frozen = self._frozen
        if frozen is not None and self._lock.locked():
            mandatory_at = self._mandatory_at
            if mandatory_at is not None and self._now() < mandatory_at:
                # Someone is refreshing and what we have is still good: don't wait.
                return frozen
        async with self._lock:
            frozen = self._frozen
            if frozen is not None:
                refresh_at = self._refresh_at
                if refresh_at is None or self._now() < refresh_at:
                    return frozen
            return await self._refresh_locked(force=False)

    async def _refresh_locked(self, *, force: bool) -> Any:
        creds = self._creds
        session = self._session
        try:
            creds, frozen = await anyio.to_thread.run_sync(_load, creds, session, force)
        except CredentialsError:
            raise
        except Exception as exc:
            raise CredentialsError(
                f"getting AWS credentials ({self._method}) failed: {type(exc).__name__}: {exc}"
            ) from exc
        if frozen is None or not frozen.access_key or not frozen.secret_key:
            raise CredentialsError(f"incomplete AWS credentials from {self._method}")
        self._creds = creds
        self._method = str(getattr(creds, "method", None) or self._method)
        self._set_deadlines(creds)
        self._frozen = frozen
        _log.debug(
            "credentials.loaded",
            method=self._method,
            forced=force,
            refresh_in=None if self._refresh_at is None else round(self._refresh_at - self._now()),
        )
        return frozen

    def _set_deadlines(self, creds: Any) -> None:
        expiry = getattr(creds, "_expiry_time", None)
        if not isinstance(creds, botocore.credentials.RefreshableCredentials) or expiry is None:
            self._refresh_at = self._mandatory_at = None
            return
        fetcher = getattr(creds, "_time_fetcher", None)
        if fetcher is None or fetcher is getattr(botocore.credentials, "_local_now", None):
            self._now = time.time
        else:
            self._now = lambda: float(fetcher().timestamp())
        expires = float(expiry.timestamp())
        advisory_at = expires - float(creds._advisory_refresh_timeout)
        mandatory_at = expires - float(creds._mandatory_refresh_timeout)
        now = self._now()
        if now < advisory_at:
            refresh_at = advisory_at
        elif now < mandatory_at:
            refresh_at = min(now + _REFRESH_RETRY_SECONDS, mandatory_at)
        else:
            refresh_at = now + min(_REFRESH_RETRY_SECONDS, max(0.0, (expires - now) / 2))
        self._refresh_at = refresh_at
        self._mandatory_at = mandatory_at


def _load(creds: Any, session: Any, force: bool) -> tuple[Any, Any]:
    """Worker thread: resolve, refresh (forced or as needed) and freeze credentials."""
    refreshable = isinstance(creds, botocore.credentials.RefreshableCredentials)
    if force and refreshable and hasattr(creds, "_protected_refresh"):
        with creds._refresh_lock:
            creds._protected_refresh(is_mandatory=True)
    elif creds is None or (force and session is not None):
        if force:
            # Re-read the chain from scratch: rotated env vars or credential files.
            session = Chain(_profile_of(session))
        creds = None
        if isinstance(session, Chain):
            creds = session.from_environment()
            session = session.session() if creds is None else None
        try:
            if creds is None:
                creds = session.get_credentials()
        except botocore.exceptions.ProfileNotFound as exc:
            raise CredentialsError(f"{exc}; {_NO_CREDENTIALS_HELP}") from exc
        if creds is None:
            raise CredentialsError(_NO_CREDENTIALS_HELP)
    return creds, creds.get_frozen_credentials()


def _profile_of(session: Any) -> str | None:
    if isinstance(session, Chain):
        return session.profile
    try:
        profile = session.profile
    except botocore.exceptions.BotoCoreError:
        return None
    return str(profile) if profile else None


def resolve_region(region_name: str | None = None, session: Any = None) -> str:
    """Pick the region: argument, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, profile config."""
    region = region_name or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        try:
            if session is None or isinstance(session, Chain):
                session = (session or Chain()).session()
            region = session.get_config_variable("region")
        except botocore.exceptions.BotoCoreError as exc:
            raise ValueError(f"no region: {exc}; pass region_name=... or set AWS_REGION") from exc
    if not region:
        raise ValueError("no region: pass region_name=... or set AWS_REGION")
    region = str(region).strip()
    if not _REGION_RE.fullmatch(region):
        raise ValueError(f"invalid region name {region!r}")
    return region


_PAYLOAD_HASH = "kinesis_trio_payload_sha256"


class _SigV4Auth(botocore.auth.SigV4Auth):  # type: ignore[misc]
    """botocore's SigV4 signer, taking the payload hash we computed (possibly off-loop).

    Its ``add_auth`` signs as botocore's does but logs nothing: botocore's writes the
    canonical request (session token included) to the ``botocore.auth`` logger at DEBUG.
    """

    def payload(self, request: Any) -> Any:
        digest = request.context.get(_PAYLOAD_HASH)
        return digest if digest is not None else super().payload(request)

    def add_auth(self, request: Any) -> None:
        if self.credentials is None:
            raise botocore.exceptions.NoCredentialsError()
        now = botocore.auth.get_current_datetime()
        request.context["timestamp"] = now.strftime(botocore.auth.SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)  # sets the date and token headers
        string_to_sign = self.string_to_sign(request, self.canonical_request(request))
        self._inject_signature_to_request(request, self.signature(string_to_sign, request))


class RequestSigner:
    """SigV4 headers for POST requests to one endpoint of one AWS service.

    Keeps botocore's signer while the credentials object stays the same (a refresh makes
    a new one); the payload hash is passed in, computed once per body by the caller.
    """

    __slots__ = ("_cached", "_host", "_region", "_service", "_url")

    def __init__(self, service: str, region: str, url: str, host: str) -> None:
        self._service = service
        self._region = region
        self._url = url
        self._host = host
        self._cached: tuple[Any, _SigV4Auth] | None = None

    def sign(self, body: bytes, digest: str, creds: Any, headers: dict[str, str]) -> dict[str, str]:
        """``headers`` plus Host and the SigV4 headers for ``body`` (SHA-256 ``digest``)."""
        cached = self._cached
        if cached is not None and cached[0] is creds:
            signer = cached[1]
        else:
            signer = _SigV4Auth(creds, self._service, self._region)
            self._cached = (creds, signer)
        request = botocore.awsrequest.AWSRequest(
            method="POST", url=self._url, data=body, headers={"Host": self._host, **headers}
        )
        request.context[_PAYLOAD_HASH] = digest
        signer.add_auth(request)
        return dict(request.headers.items())
