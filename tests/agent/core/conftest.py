"""What the Bedrock client's tests share: the stub, running for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.bedrock import BedrockStub


@pytest.fixture
def stub() -> Iterator[BedrockStub]:
    with BedrockStub() as running:
        yield running
