"""The Glue tests' fixtures: a fake serving Glue and a client of it (in-memory connections)."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_trio import StaticCredentials
from kinesis_trio._aws._glue import GlueClient
from kinesis_trio.testing import FakeKinesis

CREDS = StaticCredentials("AKIDEXAMPLE", "secret")

AVRO_V1 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"int"}]}'
AVRO_V2 = (
    '{"type":"record","name":"Order","fields":[{"name":"id","type":"int"},'
    '{"name":"note","type":"string","default":""}]}'
)
#: "id" changes type: no reader of one reads the other
AVRO_BAD = '{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}'


@pytest.fixture
def fake() -> FakeKinesis:
    return FakeKinesis()


def client_of(fake: FakeKinesis, **options: Any) -> GlueClient:
    """A Glue client of ``fake`` (its pool and HTTP framing over in-memory connections)."""
    options.setdefault("retry_backoff", 0.05)
    return GlueClient(
        region_name="us-east-1",
        endpoint_url="http://fake",
        credentials=CREDS,
        transport=fake.transport(),
        **options,
    )
