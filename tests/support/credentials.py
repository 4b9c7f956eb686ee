"""Credentials that count their refreshes and expire when told."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import botocore.auth
import botocore.awsrequest
import botocore.credentials
import botocore.session


def _iso(dt: datetime.datetime) -> str:
    return dt.isoformat()


class RefreshProbe:
    """A botocore refresh function that records where and how often it runs."""

    def __init__(self, loop_thread: int, lifetime: float = 3600.0, delay: float = 0.05) -> None:
        self.loop_thread = loop_thread
        self.lifetime = lifetime
        self.delay = delay
        self.calls = 0
        self.threads: list[int] = []

    def __call__(self) -> dict[str, str]:
        thread = threading.get_ident()
        self.threads.append(thread)
        assert thread != self.loop_thread, "refresh ran on the event loop thread"
        self.calls += 1
        time.sleep(self.delay)  # blocking, like STS/IMDS would be
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
            seconds=self.lifetime
        )
        return {
            "access_key": f"ASIAREFRESHED{self.calls:07d}",
            "secret_key": f"refreshed-secret-{self.calls}",
            "token": f"refreshed-token-{self.calls}",
            "expiry_time": _iso(expiry),
        }


def refreshable(probe: RefreshProbe, expires_in: float) -> Any:
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=expires_in)
    return botocore.credentials.RefreshableCredentials.create_from_metadata(
        metadata={
            "access_key": "ASIAORIGINAL0000000",
            "secret_key": "original-secret",
            "token": "original-token",
            "expiry_time": _iso(expiry),
        },
        refresh_using=probe,
        method="sts-assume-role",
    )
