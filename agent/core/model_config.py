"""Which Claude, where and with which credentials: :class:`ModelConfig` from the environment (Bedrock or the direct
Anthropic API), checked before anything is built -- model ids, region and inference-profile geography."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agent.config import DECLARED, env_float, env_int
from mcp_lib.config import ConfigError, env_str, env_url

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
DEFAULT_REGION = DECLARED["AWS_REGION"].default
Provider = Literal["bedrock", "anthropic"]
DEFAULT_MODELS = {  # Bedrock's are the declared defaults; the direct API's differ (4.5 is deprecated there)
    "bedrock": (DECLARED["HELPBOT_MODEL"].default, DECLARED["HELPBOT_SUMMARY_MODEL"].default),
    "anthropic": ("claude-sonnet-4-6", "claude-haiku-4-5-20251001"),
}

# Bedrock ids: optional cross-region prefix, provider, model, optional version; or an inference-profile ARN.
_BEDROCK_ID = re.compile(r"^(?:(global|us|eu|apac|jp|au|ca|us-gov)\.)?anthropic\.claude-[a-z0-9.-]+(?::\d+)?$")
_BEDROCK_ARN = re.compile(r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]+:\d{12}:"
                          r"(?:inference-profile|application-inference-profile|foundation-model)/\S+$")
_ANTHROPIC_ID = re.compile(r"^claude-[a-z0-9.-]+$")
_REGION = re.compile(r"^[a-z]{2}(?:-gov)?-[a-z]+-\d$")
# A cross-region profile is only callable from the regions of its geography (jp. routes only to Tokyo and Osaka).
_PROFILE_REGIONS = {"jp": "ap-northeast-[13]", "apac": "ap-.+", "au": "ap-southeast-.+", "us": "us-.+",
                    "us-gov": "us-gov-.+", "eu": "eu-.+", "ca": "ca-.+"}
_KIND = {"bedrock": "a Bedrock", "anthropic": "an Anthropic API", None: "a Claude"}
# What turns the model on, for the lines that say it is off (degraded `ask`, `doctor`).
TURN_ON = "set AWS_BEARER_TOKEN_BEDROCK, or AWS_ROLE_ARN (OIDC) or AWS keys, or ANTHROPIC_API_KEY"


@dataclass(frozen=True)
class ModelConfig:
    """Which provider, which models, and how to reach and authenticate to them (all from the environment)."""

    provider: Provider
    model: str
    summary_model: str
    region: str | None = None
    base_url: str | None = None
    bearer_token: str | None = None  # AWS_BEARER_TOKEN_BEDROCK
    aws_access_key: str | None = None
    aws_secret_key: str | None = None
    aws_session_token: str | None = None
    aws_profile: str | None = None
    anthropic_api_key: str | None = None
    request_timeout_s: float = DECLARED.value("HELPBOT_MODEL_TIMEOUT_S", float)
    max_attempts: int = DECLARED.value("HELPBOT_MODEL_MAX_ATTEMPTS", int)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ModelConfig | None:
        """The configured provider; None when no credentials are set at all (helpbot then degrades)."""
        bearer, access_key, secret_key, profile, web_identity, api_key = (env_str(env, name) for name in (
            "AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
            "AWS_WEB_IDENTITY_TOKEN_FILE", "ANTHROPIC_API_KEY"))
        aws_keys = access_key or secret_key or profile
        if web_identity and not env_str(env, "AWS_ROLE_ARN"):
            raise ConfigError("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not; OIDC "
                                              "web identity needs the role to assume")
        if web_identity and not os.path.isfile(web_identity):
            raise ConfigError("AWS_WEB_IDENTITY_TOKEN_FILE", f"{web_identity!r} is not a file (the OIDC token)")
        if bearer and aws_keys:
            other = "AWS_ACCESS_KEY_ID" if access_key else "AWS_SECRET_ACCESS_KEY" if secret_key else "AWS_PROFILE"
            raise ConfigError("AWS_BEARER_TOKEN_BEDROCK",
                              f"set together with {other}; use either a Bedrock API key or AWS credentials")
        has_bedrock = bool(bearer or aws_keys or web_identity)
        provider = env_str(env, "HELPBOT_PROVIDER")
        if provider is not None and provider not in DEFAULT_MODELS:
            raise ConfigError("HELPBOT_PROVIDER", f"{provider!r} is not one of: bedrock, anthropic")
        if provider is None:
            if has_bedrock and api_key:
                raise ConfigError("HELPBOT_PROVIDER", "both ANTHROPIC_API_KEY and AWS credentials are set; "
                                                      "choose one with HELPBOT_PROVIDER=bedrock or anthropic")
            provider = "bedrock" if has_bedrock else "anthropic" if api_key else None
        elif provider == "bedrock" and not has_bedrock:
            raise ConfigError("AWS_BEARER_TOKEN_BEDROCK", "HELPBOT_PROVIDER=bedrock but no Bedrock API key or "
                                                          "AWS credentials are set")
        elif provider == "anthropic" and not api_key:
            raise ConfigError("ANTHROPIC_API_KEY", "HELPBOT_PROVIDER=anthropic but ANTHROPIC_API_KEY is not set")

        model, summary_model = _model_ids(env, provider)
        timeout = env_float(env, "HELPBOT_MODEL_TIMEOUT_S", minimum=1.0)
        attempts = env_int(env, "HELPBOT_MODEL_MAX_ATTEMPTS", minimum=1)
        if provider is None:
            return None
        if provider == "anthropic":
            return cls("anthropic", model, summary_model, base_url=env_url(env, "ANTHROPIC_BASE_URL"),
                       anthropic_api_key=api_key, request_timeout_s=timeout, max_attempts=attempts)

        region = _region(env, (model, summary_model))
        if access_key and not secret_key:
            raise ConfigError("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID is set but its secret key is not")
        if secret_key and not access_key:
            raise ConfigError("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not")
        return cls("bedrock", model, summary_model, region=region,
                   base_url=env_url(env, "ANTHROPIC_BEDROCK_BASE_URL"), bearer_token=bearer,
                   aws_access_key=access_key, aws_secret_key=secret_key,
                   aws_session_token=env_str(env, "AWS_SESSION_TOKEN") if access_key else None,
                   aws_profile=profile, request_timeout_s=timeout, max_attempts=attempts)


def _model_ids(env: Mapping[str, str], provider: str | None) -> tuple[str, str]:
    defaults = DEFAULT_MODELS[provider or "bedrock"]
    ids = []
    for variable, default in zip(("HELPBOT_MODEL", "HELPBOT_SUMMARY_MODEL"), defaults, strict=True):
        value = env_str(env, variable) or default
        valid = {"bedrock": bool(_BEDROCK_ID.match(value) or _BEDROCK_ARN.match(value)),
                 "anthropic": bool(_ANTHROPIC_ID.match(value))}
        if not (valid[provider] if provider else any(valid.values())):
            raise ConfigError(variable, f"{value!r} is not {_KIND[provider]} model id; expected e.g. {defaults[0]}")
        ids.append(value)
    return ids[0], ids[1]


def _region(env: Mapping[str, str], model_ids: tuple[str, ...]) -> str:
    variable = "AWS_DEFAULT_REGION" if env_str(env, "AWS_DEFAULT_REGION") and not env_str(env, "AWS_REGION") \
        else "AWS_REGION"
    region = env_str(env, variable) or DEFAULT_REGION
    if not _REGION.match(region):
        raise ConfigError(variable, f"{region!r} is not an AWS region; expected e.g. {DEFAULT_REGION}")
    for model_id in model_ids:
        match = _BEDROCK_ID.match(model_id)
        geography = match.group(1) if match else None
        if geography in _PROFILE_REGIONS and not re.fullmatch(_PROFILE_REGIONS[geography], region):
            raise ConfigError(variable, f"{region!r} cannot call the {geography}. inference profile {model_id}; "
                                        f"use a region of that geography (e.g. {DEFAULT_REGION} for jp.)")
    return region
