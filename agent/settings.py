"""The agent's knobs, read once from the environment (HELPBOT_*), each with a default that works."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp_lib.config import ConfigError, env_float, env_int, env_str

from .model import DEFAULT_MODELS, Usage

# Cache reads and writes are billed relative to the base input price (api-notes: ~0.1x and ~1.25x).
CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def cost(self, usage: Usage) -> float:
        billed_input = (usage.input_tokens + usage.cache_read_input_tokens * CACHE_READ_FACTOR
                        + usage.cache_creation_input_tokens * CACHE_WRITE_FACTOR)
        return (billed_input * self.input + usage.output_tokens * self.output) / 1_000_000


@dataclass(frozen=True)
class Settings:
    model: str = DEFAULT_MODELS["bedrock"][0]
    summary_model: str = DEFAULT_MODELS["bedrock"][1]
    max_rounds: int = 10
    deadline_s: float = 480.0
    tool_timeout_s: float = 60.0
    max_tokens: int = 4096  # the answer's length limit
    request_budget_tokens: int = 100_000  # no request to the model may be larger (estimated)
    summary_threshold_tokens: int = 60_000  # above this, older tool results are summarized
    summary_max_tokens: int = 2048
    tool_result_max_chars: int = 24_000  # last line of defence; mcp_lib's own limits are tighter
    max_question_chars: int = 20_000
    timezone: str = "Asia/Tokyo"
    price: Price = Price(3.0, 15.0)  # Claude Sonnet 4.5 list price
    summary_price: Price = Price(1.0, 5.0)  # Claude Haiku 4.5 list price

    @property
    def final_reserve_s(self) -> float:
        """Time kept back for the final answer: past ``deadline - reserve`` no more tool rounds start."""
        return min(60.0, self.deadline_s * 0.125)

    def price_of(self, model: str) -> Price:
        return self.summary_price if model == self.summary_model and model != self.model else self.price

    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def with_models(self, model: str, summary_model: str) -> Settings:
        return replace(self, model=model, summary_model=summary_model)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        d = cls()
        budget = env_int(env, "HELPBOT_REQUEST_BUDGET_TOKENS", d.request_budget_tokens, minimum=10_000)
        threshold = env_int(env, "HELPBOT_SUMMARY_THRESHOLD_TOKENS", min(d.summary_threshold_tokens,
                                                                         budget * 6 // 10), minimum=2_000)
        if threshold >= budget:
            raise ConfigError("HELPBOT_SUMMARY_THRESHOLD_TOKENS",
                              f"{threshold} must be below HELPBOT_REQUEST_BUDGET_TOKENS ({budget})")
        timezone = env_str(env, "HELPBOT_TIMEZONE") or d.timezone
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError("HELPBOT_TIMEZONE", f"{timezone!r} is not a time zone name like Asia/Tokyo") from None
        return cls(
            max_rounds=env_int(env, "HELPBOT_MAX_ROUNDS", d.max_rounds, minimum=1),
            deadline_s=env_float(env, "HELPBOT_DEADLINE_S", d.deadline_s, minimum=10.0),
            tool_timeout_s=env_float(env, "HELPBOT_TOOL_TIMEOUT_S", d.tool_timeout_s, minimum=1.0),
            max_tokens=env_int(env, "HELPBOT_MAX_TOKENS", d.max_tokens, minimum=256),
            request_budget_tokens=budget,
            summary_threshold_tokens=threshold,
            tool_result_max_chars=env_int(env, "HELPBOT_TOOL_RESULT_MAX_CHARS", d.tool_result_max_chars,
                                          minimum=1_000),
            timezone=timezone,
            price=Price(env_float(env, "HELPBOT_PRICE_INPUT", d.price.input),
                        env_float(env, "HELPBOT_PRICE_OUTPUT", d.price.output)),
            summary_price=Price(env_float(env, "HELPBOT_SUMMARY_PRICE_INPUT", d.summary_price.input),
                                env_float(env, "HELPBOT_SUMMARY_PRICE_OUTPUT", d.summary_price.output)),
        )
