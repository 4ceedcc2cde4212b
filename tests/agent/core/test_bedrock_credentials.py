"""Bedrock's AWS credentials end to end: the real client (agent.core.claude, botocore's SigV4) to the local Bedrock
stub, which checks the signatures; the keys given, a profile, and OIDC's web identity through a local STS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError, EndpointConnectionError

from agent.core.claude import Claude, build_model
from agent.core.model import Request
from agent.core.model_config import ModelConfig
from agent.errors import ModelRequestError
from mcp_lib.config import ConfigError
from tests.fakes.bedrock import HELLO, MODEL, SYSTEM, BedrockStub
from tests.fakes.clock import FakeClock
from tests.fakes.sts import StsStub


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


# -- OIDC: botocore's web identity provider (AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE) asks STS --------------
ROLE = "arn:aws:iam::123456789012:role/helpbot-bedrock"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.github-oidc-token.signature"


@pytest.fixture
def sts(stub: BedrockStub, aws_files: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StsStub]:
    """The STS stand-in, found by botocore through its own ``AWS_ENDPOINT_URL_STS``; the keys it issues are the
    ones the Bedrock stub checks signatures with."""
    token = tmp_path / "web-identity-token"
    token.write_text(TOKEN)
    with StsStub(stub.aws_secrets) as running:
        for name, value in {"AWS_ROLE_ARN": ROLE, "AWS_WEB_IDENTITY_TOKEN_FILE": str(token),
                            "AWS_ENDPOINT_URL_STS": running.url, "AWS_REGION": "ap-northeast-1"}.items():
            monkeypatch.setenv(name, value)
        yield running


def oidc_model(stub: BedrockStub) -> Claude:
    config = ModelConfig.from_env({**os.environ, "ANTHROPIC_BEDROCK_BASE_URL": stub.url})
    assert config is not None and config.aws_access_key is None  # nothing but the role and the token
    return build_model(config, clock=FakeClock())


def test_oidc_credentials_come_from_sts_once_and_sign_the_requests(stub: BedrockStub, sts: StsStub) -> None:
    model = oidc_model(stub)
    assert ask(model).text == "ok" and ask(model).text == "ok"
    assert [(call.role_arn, call.token) for call in sts.calls] == [(ROLE, TOKEN)]  # one call for both requests
    assert sts.calls[0].session_name.startswith("botocore-session-")
    issued = sts.calls[0]
    for request in stub.requests:  # the stub recomputed each signature with the issued secret
        assert request.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={issued.access_key}/")
        assert request.headers["x-amz-security-token"] == issued.session_token


def test_a_role_sts_will_not_assume_for_the_token_reaches_no_model(stub: BedrockStub, sts: StsStub) -> None:
    sts.accepts = lambda role_arn, token: False  # the role's trust policy names another repository
    with pytest.raises(ConfigError, match=r"AWS STS refused the credentials \(AccessDenied: .*"
                                          r"sts:AssumeRoleWithWebIdentity.*trust policy") as refused:
        ask(oidc_model(stub))
    assert refused.value.variable == "AWS_ROLE_ARN" and "bedrock" not in str(refused.value)
    assert sts.refused == [(403, "AccessDenied")] and stub.requests == []


@pytest.mark.parametrize(("params", "code", "words"), [
    ({}, "ValidationError", "3 validation errors detected: Value null at 'roleArn'"),
    ({"RoleArn": ROLE, "RoleSessionName": "helpbot"}, "ValidationError",
     "Value null at 'webIdentityToken' failed to satisfy constraint: Member must not be null"),
    ({"RoleArn": ROLE, "RoleSessionName": "help bot", "WebIdentityToken": TOKEN}, "ValidationError",
     "'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern"),
])
def test_sts_refuses_what_sts_refuses_in_its_error_shape(sts: StsStub, params: dict[str, str], code: str,
                                                        words: str) -> None:
    """Through botocore's own STS client with its checks off, so the stand-in's answer is what botocore parses."""
    from botocore.config import Config
    from botocore.session import Session

    client = Session().create_client("sts", config=Config(signature_version=UNSIGNED, parameter_validation=False))
    with pytest.raises(ClientError) as caught:
        client.assume_role_with_web_identity(**params)
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400 and error["Error"]["Code"] == code
    assert words in error["Error"]["Message"] and sts.calls == []
