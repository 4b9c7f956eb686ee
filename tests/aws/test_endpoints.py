"""Each call goes where botocore's own client sends it: the vectors are a real botocore
client's requests, made in the test (its ``before-send`` sees the URL and the signature's
credential scope, and stops the request), for a region of every partition botocore lists,
FIPS and dual-stack on and off, with and without a stream ARN, data and control calls, for
Kinesis, Glue and CloudWatch. Ours go through the clients' own pool to the fake
(``FakeKinesis.transport()``), which notes the origin each connection is opened to and the
``Host`` and credential scope of each request."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.credentials
import botocore.session
import httpx
import pytest
from botocore.config import Config

from kinesis_trio import EndpointError, KinesisTrioError, Producer, StaticCredentials
from kinesis_trio._aws import _rules
from kinesis_trio._aws._client import KinesisClient
from kinesis_trio._aws._credentials import Chain, CredentialProvider
from kinesis_trio._aws._endpoints import EndpointSettings, endpoint_settings
from kinesis_trio._aws._glue import GlueClient
from kinesis_trio._aws._rules import Rules
from kinesis_trio._metric_names import MetricDatum
from kinesis_trio.metrics import CloudWatchSink
from kinesis_trio.testing import FakeKinesis

pytestmark = pytest.mark.anyio

CREDS = StaticCredentials("AKIDEXAMPLE", "secret")
ACCOUNT = "123456789012"

_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCOUNT_ID",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_KINESIS",
    "AWS_ENDPOINT_URL_GLUE",
    "AWS_ENDPOINT_URL_CLOUDWATCH",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE",
)


def _partitions() -> list[dict[str, Any]]:
    loader = botocore.session.get_session().get_component("data_loader")
    found: list[dict[str, Any]] = loader.load_data("partitions")["partitions"]
    return found


#: a region of every partition botocore lists (its first that is not the global one)
REGIONS = [
    next(r for r in sorted(p["regions"]) if not r.endswith("-global")) for p in _partitions()
]
SWITCHES = [(False, False), (True, False), (False, True), (True, True)]


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Nothing configured but what a test sets: an empty config file, no variables."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield config


class _Sent(Exception):
    """botocore's request, stopped before it leaves."""


@functools.cache
def _session() -> Any:
    """One botocore session (its loader keeps the models it read), reading no config file."""
    session = botocore.session.Session()
    session.set_config_variable("config_file", "/nonexistent/kinesis-trio-test")
    return session


@functools.cache
def _botocore_client(
    service: str, region: str, fips: bool, dual: bool, account: str | None, url: str | None
) -> Any:
    client = _session().create_client(
        service,
        region_name=region,
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        aws_account_id=account,
        config=Config(
            use_fips_endpoint=fips,
            use_dualstack_endpoint=dual,
            retries={"total_max_attempts": 1},
            account_id_endpoint_mode="preferred",
        ),
    )

    def before_send(request: Any, **kwargs: Any) -> None:
        raise _Sent(request.url, _scope(request.headers["Authorization"].decode()))

    client.meta.events.register("before-send", before_send)
    return client


def _scope(authorization: str) -> tuple[str, str]:
    """(signing region, signing name) of a SigV4 Authorization header."""
    found = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request", authorization)
    assert found is not None, authorization
    return found.group(1), found.group(2)


def botocore_sends(
    service: str,
    region: str,
    method: str,
    params: dict[str, Any],
    *,
    fips: bool = False,
    dual: bool = False,
    account: str | None = None,
    url: str | None = None,
) -> tuple[str, tuple[str, str]]:
    """Where botocore's client sends ``method(**params)``: (its host, its credential scope)."""
    client = _botocore_client(service, region, fips, dual, account, url)
    with pytest.raises(_Sent) as sent:
        getattr(client, method)(**params)
    sent_url, scope = sent.value.args
    return httpx.URL(sent_url).netloc.decode(), scope


class Seen:
    """The fake's transport, noting the origin of each connection the pool opens and the
    Host and credential scope of each request the fake receives."""

    def __init__(self, fake: FakeKinesis, monkeypatch: pytest.MonkeyPatch) -> None:
        self.transport = _Opener(fake.transport(), self)
        self.origins: list[tuple[str, str, int]] = []
        self.requests: list[tuple[str, tuple[str, str]]] = []
        handle = fake._handle

        async def noting(request: httpx.Request) -> httpx.Response:
            self.requests.append(
                (request.headers["host"], _scope(request.headers["authorization"]))
            )
            return await handle(request)

        monkeypatch.setattr(fake, "_handle", noting)

    def last(self) -> tuple[str, tuple[str, str]]:
        """The last request's (host, scope), its connection's host checked with it."""
        host, scope = self.requests[-1]
        assert host in {origin[1] for origin in self.origins}
        return host, scope


class _Opener(httpx.AsyncBaseTransport):
    def __init__(self, inner: Any, seen: Seen) -> None:
        self._inner = inner
        self._seen = seen

    async def open_stream(self, origin: tuple[str, str, int]) -> Any:
        assert origin[0] == "https" and origin[2] == 443
        self._seen.origins.append(origin)
        return await self._inner.open_stream(origin)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise AssertionError("the clients reach the fake through their pool")


def _switches(monkeypatch: pytest.MonkeyPatch, fips: bool, dual: bool) -> None:
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", str(fips).lower())
    monkeypatch.setenv("AWS_USE_DUALSTACK_ENDPOINT", str(dual).lower())


def _arn(region: str) -> str:
    partition = next(p["id"] for p in _partitions() if region in p["regions"])
    return f"arn:{partition}:kinesis:{region}:{ACCOUNT}:stream/s"


def _refused_by_botocore(service: str, region: str, fips: bool, dual: bool) -> str | None:
    """botocore's reason for refusing a client of these settings (None: it makes one)."""
    from botocore.exceptions import BotoCoreError

    try:
        _botocore_client(service, region, fips, dual, None, None)
    except BotoCoreError as exc:
        return str(exc).rstrip(": ")
    return None


def _refused_alike(service: str, region: str, fips: bool, dual: bool, make: Any) -> bool:
    """If botocore refuses a client of these settings, ours is refused with its reason."""
    reason = _refused_by_botocore(service, region, fips, dual)
    if reason is None:
        return False
    with pytest.raises(EndpointError) as ours:
        make()
    assert reason in str(ours.value)
    assert ("AWS_USE_FIPS_ENDPOINT" if fips and not dual else "AWS_USE_DUALSTACK") in str(
        ours.value
    )
    return True


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize(("fips", "dual"), SWITCHES)
async def test_kinesis_calls_go_where_botocore_sends_them(
    region: str, fips: bool, dual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _switches(monkeypatch, fips, dual)
    if _refused_alike(
        "kinesis", region, fips, dual, lambda: KinesisClient(region_name=region, credentials=CREDS)
    ):
        return
    fake = FakeKinesis()
    fake.create_stream("s")
    seen = Seen(fake, monkeypatch)
    records = [{"Data": "eA==", "PartitionKey": "k"}]
    arn = _arn(region)
    async with KinesisClient(
        region_name=region, credentials=CREDS, transport=seen.transport
    ) as client:
        calls: list[tuple[str, dict[str, Any], Any]] = [
            ("put_records", {"StreamName": "s"}, lambda: client.put_records("s", records)),
            (
                "put_records",
                {"StreamARN": arn},
                lambda: client.put_records(None, records, stream_arn=arn),
            ),
            ("list_shards", {"StreamName": "s"}, lambda: client.list_shards("s")),
            ("list_shards", {"StreamARN": arn}, lambda: client.list_shards(stream_arn=arn)),
            (
                "describe_stream_summary",
                {"StreamName": "s"},
                lambda: client.describe_stream_summary("s"),
            ),
            (
                "describe_stream_summary",
                {"StreamARN": arn},
                lambda: client.describe_stream_summary(None, stream_arn=arn),
            ),
        ]
        for method, params, ours in calls:
            if method == "put_records":
                params = {**params, "Records": [{"Data": b"x", "PartitionKey": "k"}]}
            with contextlib.suppress(KinesisTrioError):
                await ours()
            expected = botocore_sends("kinesis", region, method, params, fips=fips, dual=dual)
            assert seen.last() == expected, (method, params)
    # a connection per host, kept: the control and data hosts of an ARN differ
    assert len(seen.origins) == len(set(seen.origins)) == len({h for h, _ in seen.requests})


async def test_a_client_keeps_idle_connections_per_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls by name and by ARN go to two hosts: each keeps its connection, even with one
    connection allowed at a time (one host's idle connection does not push out the
    other's)."""
    fake = FakeKinesis()
    fake.create_stream("s")
    seen = Seen(fake, monkeypatch)
    arn = _arn("us-east-1")
    async with KinesisClient(
        region_name="us-east-1", credentials=CREDS, transport=seen.transport, max_connections=1
    ) as client:
        for _ in range(3):
            await client.list_shards("s")
            with contextlib.suppress(KinesisTrioError):
                await client.list_shards(stream_arn=arn)
    hosts = [host for host, _ in seen.requests]
    assert (
        hosts
        == ["kinesis.us-east-1.amazonaws.com", f"{ACCOUNT}.control-kinesis.us-east-1.amazonaws.com"]
        * 3
    )
    assert sorted(origin[1] for origin in seen.origins) == sorted(set(hosts))


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize(("fips", "dual"), SWITCHES)
async def test_glue_and_cloudwatch_calls_go_where_botocore_sends_them(
    region: str, fips: bool, dual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _switches(monkeypatch, fips, dual)
    glue_refused = _refused_alike(
        "glue", region, fips, dual, lambda: GlueClient(region_name=region, credentials=CREDS)
    )
    cloudwatch_refused = _refused_alike(
        "cloudwatch",
        region,
        fips,
        dual,
        lambda: CloudWatchSink(region_name=region, credentials=CREDS),
    )
    if glue_refused and cloudwatch_refused:
        return
    assert not (glue_refused or cloudwatch_refused)
    fake = FakeKinesis()
    seen = Seen(fake, monkeypatch)
    async with GlueClient(
        region_name=region, credentials=CREDS, transport=seen.transport, max_attempts=1
    ) as glue:
        with contextlib.suppress(KinesisTrioError):
            await glue.get_registry("r")
    expected = botocore_sends(
        "glue", region, "get_registry", {"RegistryId": {"RegistryName": "r"}}, fips=fips, dual=dual
    )
    assert seen.last() == expected
    sink = CloudWatchSink(
        region_name=region, credentials=CREDS, transport=seen.transport, max_attempts=1
    )
    async with sink:
        with contextlib.suppress(KinesisTrioError):
            await sink.publish([MetricDatum("m", (), "Count", 1, 1.0, 1.0, 1.0, 1.7e9)])
    expected = botocore_sends(
        "cloudwatch",
        region,
        "put_metric_data",
        {"Namespace": "n", "MetricData": [{"MetricName": "m", "Value": 1.0}]},
        fips=fips,
        dual=dual,
    )
    assert seen.last() == expected


@pytest.mark.parametrize("mode", ["preferred", "disabled"])
async def test_the_credentials_account_id_picks_the_account_endpoint_as_botocore(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", mode)
    fake = FakeKinesis()
    fake.create_stream("s")
    seen = Seen(fake, monkeypatch)
    account = "111122223333"
    creds = botocore.credentials.Credentials("AKIDEXAMPLE", "secret", account_id=account)
    provider = CredentialProvider(creds)
    async with KinesisClient(
        region_name="us-east-1", credentials=provider, transport=seen.transport
    ) as client:
        await client.list_shards("s")
    boto = _session().create_client(
        "kinesis",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        aws_account_id=account,
        config=Config(account_id_endpoint_mode=mode),
    )
    boto.meta.events.register(
        "before-send",
        lambda request, **kw: (_ for _ in ()).throw(_Sent(request.url, None)),
    )
    with pytest.raises(_Sent) as sent:
        boto.list_shards(StreamName="s")
    assert seen.last()[0] == httpx.URL(sent.value.args[0]).netloc.decode()
    assert seen.last()[0].startswith(account) == (mode == "preferred")


async def test_an_explicit_endpoint_wins_as_in_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    _switches(monkeypatch, True, True)
    monkeypatch.setenv("AWS_ENDPOINT_URL_KINESIS", "https://kinesis.example.test")
    arn = _arn("us-east-1")
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"Shards": []})

    async with KinesisClient(
        region_name="us-east-1", credentials=CREDS, transport=httpx.MockTransport(answer)
    ) as client:
        assert client.endpoint_url == "https://kinesis.example.test"
        await client.list_shards(stream_arn=arn)
    expected = botocore_sends(
        "kinesis",
        "us-east-1",
        "list_shards",
        {"StreamARN": arn},
        fips=True,
        dual=True,
        url="https://kinesis.example.test",
    )
    assert (requests[0].url.netloc.decode(), _scope(requests[0].headers["authorization"])) == (
        expected
    )


def test_settings_from_the_config_file_as_botocore_reads_them(aws_env: Path) -> None:
    aws_env.write_text(
        "[profile gov]\nuse_fips_endpoint = true\nuse_dualstack_endpoint = true\n"
        "account_id_endpoint_mode = disabled\n"
    )
    settings = endpoint_settings(Chain("gov"))
    assert settings == EndpointSettings(True, True, "disabled")
    session = botocore.session.Session(profile="gov")
    assert session.get_config_variable("use_fips_endpoint") is True
    assert endpoint_settings(Chain()) == EndpointSettings()


def test_settings_without_a_config_file_make_no_session(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws_env.unlink()
    monkeypatch.setattr(Chain, "session", lambda self: pytest.fail("a Session was made"))
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "TRUE")
    assert endpoint_settings(Chain()) == EndpointSettings(use_fips=True)


def test_an_unknown_account_id_endpoint_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "sometimes")
    with pytest.raises(EndpointError, match="AWS_ACCOUNT_ID_ENDPOINT_MODE"):
        KinesisClient(region_name="us-east-1", credentials=CREDS)


# -- refusals, with botocore's reason and the setting to change -------------------------------


@pytest.mark.parametrize("region", ["useast1", "us-east", "xx-north-1"])
async def test_a_region_no_partition_knows_is_refused_at_open(region: str) -> None:
    with pytest.raises(EndpointError, match=r"in none of the AWS partitions.*region_name="):
        KinesisClient(region_name=region, credentials=CREDS)
    producer = Producer("s", region_name=region, credentials=CREDS)
    with pytest.raises(EndpointError, match="AWS_REGION"):
        async with producer:
            pass


async def test_an_arn_of_another_partition_is_refused_at_open_with_botocores_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arn = f"arn:aws:kinesis:cn-north-1:{ACCOUNT}:stream/s"
    with pytest.raises(_botocore_endpoint_error()) as theirs:
        botocore_sends("kinesis", "cn-north-1", "list_shards", {"StreamARN": arn})
    fake = FakeKinesis()
    fake.create_stream("s")
    producer = Producer(
        stream_arn=arn, region_name="cn-north-1", credentials=CREDS, transport=fake.transport()
    )
    with pytest.raises(EndpointError) as ours:
        async with producer:
            pass
    assert str(theirs.value) in str(ours.value)
    assert "region_name=" in str(ours.value)
    assert fake.calls == []


async def test_an_arn_of_another_region_is_refused_naming_region_name() -> None:
    async with KinesisClient(region_name="us-west-2", credentials=CREDS) as client:
        with pytest.raises(EndpointError, match=r"region_name='us-east-1'"):
            await client.list_shards(stream_arn=_arn("us-east-1"))


async def test_an_account_endpoint_required_without_an_account_id_is_refused_at_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "required")
    fake = FakeKinesis()
    fake.create_stream("s")
    producer = Producer("s", region_name="us-east-1", credentials=CREDS, transport=fake.transport())
    with pytest.raises(EndpointError, match=r"AccountIdEndpointMode.*AWS_ACCOUNT_ID"):
        async with producer:
            pass
    assert fake.calls == []


def test_fips_where_the_partition_has_none_is_refused_with_botocores_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No partition of this botocore lacks FIPS: one is made to, in the data botocore's
    resolver reads (ours and botocore's own provider alike)."""
    from botocore.endpoint_provider import EndpointProvider

    model, ruleset, partitions = _rules._service_data("kinesis")
    altered = json.loads(json.dumps(partitions))
    for partition in altered["partitions"]:
        if partition["id"] == "aws-iso-b":
            partition["outputs"]["supportsFIPS"] = False
    monkeypatch.setattr(_rules, "_service_data", lambda service: (model, ruleset, altered))
    provider = EndpointProvider(ruleset, altered)
    with pytest.raises(_botocore_endpoint_error()) as theirs:
        provider.resolve_endpoint(Region="us-isob-east-1", UseFIPS=True, UseDualStack=False)
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    with pytest.raises(EndpointError) as ours:
        KinesisClient(region_name="us-isob-east-1", credentials=CREDS)
    assert str(theirs.value) in str(ours.value)
    assert "AWS_USE_FIPS_ENDPOINT" in str(ours.value)
    rules = Rules("kinesis", "us-isob-east-1", EndpointSettings())
    assert rules.resolve("PutRecords", {}).url == "https://kinesis.us-isob-east-1.sc2s.sgov.gov"


def _botocore_endpoint_error() -> type[Exception]:
    from botocore.exceptions import EndpointResolutionError

    found: type[Exception] = EndpointResolutionError
    return found
