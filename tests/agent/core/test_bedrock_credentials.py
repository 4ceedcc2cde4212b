"""Bedrock's AWS credentials end to end: the real client (agent.core.claude, botocore's SigV4) to the local Bedrock
stub, which checks the signatures; the keys given, a profile, and what botocore resolves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from botocore.exceptions import EndpointConnectionError

from agent.core.claude import Claude, build_model
from agent.core.model import Request
from agent.core.model_config import ModelConfig
from agent.errors import ModelRequestError
from mcp_lib.config import ConfigError
from tests.fakes.bedrock import BedrockStub
from tests.fakes.clock import FakeClock

MODEL = "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"
SYSTEM = [{"type": "text", "text": "You are a test."}]
HELLO = [{"role": "user", "content": [{"type": "text", "text": "こんにちは"}]}]


@pytest.fixture
def stub() -> Iterator[BedrockStub]:
    with BedrockStub() as running:
        yield running


def ask(model: Claude) -> Any:
    return model.create(Request(SYSTEM, HELLO, [], None, 256, MODEL))


@pytest.mark.usefixtures("aws_files")
@pytest.mark.parametrize(("profile", "variable", "words"), [
    ("nope", "AWS_PROFILE", "The config profile (nope) could not be found"),
    ("empty", "AWS credentials", "Could not resolve AWS credentials"),
])
def test_local_credential_problems_are_configuration_errors(stub: BedrockStub, profile: str, variable: str,
                                                            words: str) -> None:
    config = ModelConfig.from_env({"AWS_PROFILE": profile, "ANTHROPIC_BEDROCK_BASE_URL": stub.url})
    assert config is not None
    with pytest.raises(ConfigError) as caught:
        ask(build_model(config, clock=FakeClock()))
    assert caught.value.variable == variable and words in str(caught.value)
    assert stub.requests == []  # nothing reached Bedrock: it rejected nothing


def test_botocore_network_errors_are_retried(stub: BedrockStub) -> None:
    """STS unreachable while botocore resolves OIDC credentials: the signer fails the way botocore does."""
    failures = [EndpointConnectionError(endpoint_url="https://sts.ap-northeast-1.amazonaws.com")]

    def sign(url: str, data: bytes) -> dict[str, str]:
        if failures:
            raise failures.pop(0)
        return {"authorization": "Bearer k"}

    clock = FakeClock()
    model = Claude(httpx2.Client(), "bedrock", stub.url, sign, clock=clock)
    response = ask(model)
    assert response.text == "ok" and len(clock.sleeps) == 1 and clock.sleeps[0] <= 1.25  # unreachable: quick
    assert "EndpointConnectionError" in response.retries[0] and len(stub.requests) == 1


def test_aws_credentials_are_signed_with_sigv4(stub: BedrockStub) -> None:
    stub.aws_secrets["AKIAIOSFODNN7EXAMPLE"] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # the stub checks it
    config = ModelConfig.from_env({"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
                                   "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                   "AWS_SESSION_TOKEN": "session-token", "ANTHROPIC_BEDROCK_BASE_URL": stub.url})
    assert config is not None
    assert ask(build_model(config, clock=FakeClock())).text == "ok"  # the model id's ":" signed as sent
    sent = stub.requests[0].headers
    assert sent["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/")
    assert "/ap-northeast-1/bedrock/aws4_request" in sent["authorization"]
    assert sent["x-amz-security-token"] == "session-token"


def test_a_signature_bedrock_would_not_accept_is_refused_not_retried(stub: BedrockStub) -> None:
    stub.aws_secrets["AKIAIOSFODNN7EXAMPLE"] = "another secret"
    config = ModelConfig.from_env({"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wrong",
                                   "ANTHROPIC_BEDROCK_BASE_URL": stub.url})
    assert config is not None
    with pytest.raises(ModelRequestError, match="403 InvalidSignatureException"):
        ask(build_model(config, clock=FakeClock()))
    assert len(stub.requests) == 1
