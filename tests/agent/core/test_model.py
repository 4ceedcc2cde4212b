"""Model configuration from the environment: providers, model ids, regions, conflicting credentials."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agent.core.model_config import ModelConfig
from agent.core.settings import Price, Settings
from mcp_lib.config import ConfigError

KEY = {"AWS_BEARER_TOKEN_BEDROCK": "ABSKdGVzdA=="}


def test_no_credentials_means_no_model() -> None:
    assert ModelConfig.from_env({}) is None


def test_bedrock_api_key_with_defaults() -> None:
    config = ModelConfig.from_env(KEY)
    assert config is not None
    assert config.provider == "bedrock" and config.region == "ap-northeast-1"
    assert config.model == "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert config.summary_model == "jp.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert config.bearer_token == "ABSKdGVzdA==" and config.base_url is None


def test_aws_credentials_region_and_base_url() -> None:
    config = ModelConfig.from_env({"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s",
                                   "AWS_SESSION_TOKEN": "t", "AWS_REGION": "us-west-2",
                                   "HELPBOT_MODEL": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                                   "HELPBOT_SUMMARY_MODEL": "global.anthropic.claude-haiku-4-5-20251001-v1:0",
                                   "ANTHROPIC_BEDROCK_BASE_URL": "http://127.0.0.1:9/"})
    assert config is not None
    assert (config.aws_access_key, config.aws_session_token, config.region) == ("AKIAEXAMPLE", "t", "us-west-2")
    assert config.base_url == "http://127.0.0.1:9"


def test_oidc_web_identity_counts_as_credentials(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ...")
    config = ModelConfig.from_env({"AWS_WEB_IDENTITY_TOKEN_FILE": str(token),
                                   "AWS_ROLE_ARN": "arn:aws:iam::1:role/x"})
    assert config is not None and config.provider == "bedrock"


def test_oidc_needs_the_role_and_the_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ...")
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_env({"AWS_WEB_IDENTITY_TOKEN_FILE": str(token)})
    assert caught.value.variable == "AWS_ROLE_ARN"
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_env({"AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "missing"),
                              "AWS_ROLE_ARN": "arn:aws:iam::1:role/x"})
    assert caught.value.variable == "AWS_WEB_IDENTITY_TOKEN_FILE"


def test_anthropic_api_key_uses_anthropic_model_ids() -> None:
    config = ModelConfig.from_env({"ANTHROPIC_API_KEY": "sk-ant-x"})
    assert config is not None
    assert (config.provider, config.model, config.summary_model) == (
        "anthropic", "claude-sonnet-4-6", "claude-haiku-4-5-20251001")


@pytest.mark.parametrize(("env", "variable", "words"), [
    ({**KEY, "HELPBOT_MODEL": "gpt-4o"}, "HELPBOT_MODEL", "not a Bedrock model id"),
    ({**KEY, "HELPBOT_MODEL": "claude-sonnet-4-5"}, "HELPBOT_MODEL", "not a Bedrock model id"),
    ({**KEY, "HELPBOT_SUMMARY_MODEL": "haiku"}, "HELPBOT_SUMMARY_MODEL", "not a Bedrock model id"),
    ({"ANTHROPIC_API_KEY": "k", "HELPBOT_MODEL": "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"},
     "HELPBOT_MODEL", "not an Anthropic API model id"),
    ({"HELPBOT_MODEL": "llama3"}, "HELPBOT_MODEL", "not a Claude model id"),
    ({**KEY, "AWS_REGION": "tokyo"}, "AWS_REGION", "not an AWS region"),
    ({**KEY, "AWS_DEFAULT_REGION": "ap_northeast_1"}, "AWS_DEFAULT_REGION", "not an AWS region"),
    ({**KEY, "AWS_REGION": "us-east-1"}, "AWS_REGION", "cannot call the jp. inference profile"),
    ({**KEY, "AWS_REGION": "ap-northeast-2"}, "AWS_REGION", "cannot call the jp. inference profile"),  # Seoul
    ({**KEY, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s"}, "AWS_BEARER_TOKEN_BEDROCK",
     "use either a Bedrock API key or AWS credentials"),
    ({**KEY, "AWS_PROFILE": "dev"}, "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"),
    ({**KEY, "ANTHROPIC_API_KEY": "k"}, "HELPBOT_PROVIDER", "both ANTHROPIC_API_KEY and AWS credentials"),
    ({"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}, "AWS_SECRET_ACCESS_KEY", "secret key is not"),
    ({"HELPBOT_PROVIDER": "openai"}, "HELPBOT_PROVIDER", "not one of"),
    ({"HELPBOT_PROVIDER": "bedrock"}, "AWS_BEARER_TOKEN_BEDROCK", "no Bedrock API key"),
    ({"HELPBOT_PROVIDER": "anthropic"}, "ANTHROPIC_API_KEY", "not set"),
    ({**KEY, "ANTHROPIC_BEDROCK_BASE_URL": "localhost:8080"}, "ANTHROPIC_BEDROCK_BASE_URL", "not a URL"),
    ({**KEY, "HELPBOT_MODEL_MAX_ATTEMPTS": "0"}, "HELPBOT_MODEL_MAX_ATTEMPTS", "at least 1"),
])
def test_bad_configuration_names_the_variable(env: dict[str, str], variable: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_env(env)
    assert caught.value.variable == variable
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_provider_can_be_chosen_when_both_are_configured() -> None:
    config = ModelConfig.from_env({**KEY, "ANTHROPIC_API_KEY": "k", "HELPBOT_PROVIDER": "anthropic"})
    assert config is not None and config.provider == "anthropic"


@pytest.mark.parametrize("region", ["ap-northeast-1", "ap-northeast-3"])  # Tokyo and Osaka
def test_jp_profiles_are_callable_from_tokyo_and_osaka(region: str) -> None:
    config = ModelConfig.from_env({**KEY, "AWS_REGION": region})
    assert config is not None and config.region == region


def test_an_inference_profile_arn_is_a_valid_model_id() -> None:
    arn = "arn:aws:bedrock:ap-northeast-1:123456789012:application-inference-profile/abc123"
    config = ModelConfig.from_env({**KEY, "HELPBOT_MODEL": arn})
    assert config is not None and config.model == arn


def test_settings_from_env() -> None:
    settings = Settings.from_env({"HELPBOT_MAX_ROUNDS": "4", "HELPBOT_DEADLINE_S": "120",
                                  "HELPBOT_REQUEST_BUDGET_TOKENS": "50000", "HELPBOT_PRICE_INPUT": "3.3"})
    assert (settings.max_rounds, settings.deadline_s, settings.request_budget_tokens) == (4, 120.0, 50_000)
    assert settings.summary_threshold_tokens == 30_000  # follows a smaller budget
    assert settings.price_of(settings.model) == Price(3.3, 15.0)  # the output price stays Sonnet's list price
    assert settings.final_reserve_s == 15.0


def test_prices_follow_the_model_family_and_the_environment_overrides() -> None:
    list_price = Settings().price_of  # no price overrides: the list price of the family
    assert list_price("jp.anthropic.claude-haiku-4-5-20251001-v1:0") == Price(1.0, 5.0)
    assert list_price("claude-opus-4-5") == Price(5.0, 25.0)
    assert list_price("arn:aws:bedrock:ap-northeast-1:123456789012:application-inference-profile/x") == Price(3, 15)
    haiku_main = Settings(model="jp.anthropic.claude-haiku-4-5-20251001-v1:0",
                          summary_model="jp.anthropic.claude-haiku-4-5-20251001-v1:0")
    assert haiku_main.price_of(haiku_main.model) == Price(1.0, 5.0)  # not Sonnet's price for a Haiku run
    env = replace(Settings.from_env({"HELPBOT_PRICE_OUTPUT": "20", "HELPBOT_SUMMARY_PRICE_INPUT": "0.5"}),
                  model="global.anthropic.claude-opus-4-5-20251101-v1:0",
                  summary_model="jp.anthropic.claude-haiku-4-5-20251001-v1:0")
    assert env.price_of(env.model) == Price(5.0, 20.0)
    assert env.price_of(env.summary_model) == Price(0.5, 5.0)


@pytest.mark.parametrize(("env", "variable"), [
    ({"HELPBOT_MAX_ROUNDS": "ten"}, "HELPBOT_MAX_ROUNDS"),
    ({"HELPBOT_MAX_ROUNDS": "0"}, "HELPBOT_MAX_ROUNDS"),
    ({"HELPBOT_SUMMARY_THRESHOLD_TOKENS": "200000"}, "HELPBOT_SUMMARY_THRESHOLD_TOKENS"),
    ({"HELPBOT_TIMEZONE": "Tokyo/Japan"}, "HELPBOT_TIMEZONE"),
    ({"HELPBOT_DEADLINE_S": "-1"}, "HELPBOT_DEADLINE_S"),
    ({"HELPBOT_SUMMARY_TIMEOUT_S": "0"}, "HELPBOT_SUMMARY_TIMEOUT_S"),
    ({"HELPBOT_PRICE_INPUT": "cheap"}, "HELPBOT_PRICE_INPUT"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    assert caught.value.variable == variable
