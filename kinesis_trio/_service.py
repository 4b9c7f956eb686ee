"""What the Kinesis client and the CloudWatch sink share: resolution, signing, closing."""

from __future__ import annotations

from typing import Any, TypeVar

import botocore.session
import httpx

from ._credentials import (
    CredentialProvider,
    RequestSigner,
    StaticCredentials,
    resolve_endpoint,
    resolve_region,
)

_S = TypeVar("_S", bound="SignedService")


class SignedService:
    """An AWS endpoint reached over one httpx pool with SigV4-signed POSTs.

    Resolves the region, the endpoint and the credential provider the same way for every
    service; a subclass creates ``self._http`` and uses ``self._signer``.
    """

    region_name: str
    endpoint_url: str
    _http: httpx.AsyncClient

    def __init__(
        self,
        service: str,
        env_suffix: str,
        *,
        region_name: str | None,
        endpoint_url: str | None,
        credentials: StaticCredentials | CredentialProvider | None,
        profile_name: str | None,
    ) -> None:
        session: Any = None
        if credentials is None or profile_name is not None:
            session = botocore.session.Session(profile=profile_name)
        self.region_name = resolve_region(region_name, session)
        self.endpoint_url = resolve_endpoint(endpoint_url, self.region_name, service, env_suffix)
        if isinstance(credentials, CredentialProvider):
            self._credentials = credentials
        else:
            self._credentials = CredentialProvider(
                credentials if credentials is not None else session
            )
        self._url = self.endpoint_url + "/"
        self._host = httpx.URL(self._url).netloc.decode("ascii")
        self._signer = RequestSigner(service, self.region_name, self._url, self._host)
        self._closed = False

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
        """Close the connection pool. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._http.aclose()
