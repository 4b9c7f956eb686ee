"""The cold start: what importing the helper and resolving Lambda's credentials load.

Lambda puts the credentials and the region in environment variables; the producer reads
them with botocore's ``EnvProvider`` (the default chain's first link), without a botocore
``Session``, whose module (with the client machinery it imports) is a fifth of a cold
start. Nothing a Lambda producer does not use is imported with the helper.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess

_SCRIPT = """
import sys
import kinesis_trio.aws_lambda
from kinesis_trio._aws._credentials import Chain, _load, resolve_region
heavy = ('botocore.session', 'botocore.client', 'structlog', 'trio', 'sqlite3', 'google.protobuf')
print(sorted(m for m in heavy if m in sys.modules))
import os
creds, frozen = _load(None, Chain(os.environ.get("PROFILE")), False)
print(creds.method, frozen.access_key, frozen.token, resolve_region())
print('botocore.session' in sys.modules)
"""


def _run(**env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_lambdas_environment_needs_no_botocore_session() -> None:
    lines = _run(
        AWS_ACCESS_KEY_ID="AKIDLAMBDA",
        AWS_SECRET_ACCESS_KEY="secret",
        AWS_SESSION_TOKEN="token",
        AWS_REGION="eu-west-1",
    )
    assert lines == ["[]", "env AKIDLAMBDA token eu-west-1", "False"]


def test_a_profile_given_goes_through_the_whole_chain(tmp_path: object) -> None:
    """A profile given to the producer (``profile_name``) makes the environment's keys lose
    (botocore's rule): the chain is read through a Session."""
    config = os.path.join(str(tmp_path), "credentials")
    with open(config, "w") as f:
        f.write("[other]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n")
    lines = _run(
        AWS_ACCESS_KEY_ID="AKIDLAMBDA",
        AWS_SECRET_ACCESS_KEY="secret",
        PROFILE="other",
        AWS_SHARED_CREDENTIALS_FILE=config,
        AWS_CONFIG_FILE=os.path.join(str(tmp_path), "none"),
        AWS_REGION="eu-west-1",
    )
    assert lines[1].split()[1] == "AKIDPROFILE"
    assert lines[2] == "True"
