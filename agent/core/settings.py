"""The agent's knobs (:class:`Settings`), read once from the environment, and the model prices they imply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from agent.config import DECLARED, env_float, env_int, env_timezone
from agent.core.model import Usage
from agent.core.model_config import DEFAULT_MODELS
from mcp_lib.config import ConfigError, env_datetime, env_str

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


# List prices of the Claude 4.5 generation by family, found in the model id (jp.anthropic.claude-haiku-4-5-...).
# Older generations and regional endpoints may be priced differently: HELPBOT_PRICE_* / HELPBOT_SUMMARY_PRICE_*
# override. An id naming no family (an application inference profile ARN) is priced as Sonnet.
LIST_PRICES = {"haiku": Price(1.0, 5.0), "sonnet": Price(3.0, 15.0), "opus": Price(5.0, 25.0)}


@dataclass(frozen=True)
class Settings:
    """The loop's knobs; each default is its variable's declared one (agent/config.py says what each means)."""

    model: str = DEFAULT_MODELS["bedrock"][0]
    summary_model: str = DEFAULT_MODELS["bedrock"][1]
    max_rounds: int = DECLARED.value("HELPBOT_MAX_ROUNDS", int)
    deadline_s: float = DECLARED.value("HELPBOT_DEADLINE_S", float)
    tool_timeout_s: float = DECLARED.value("HELPBOT_TOOL_TIMEOUT_S", float)
    max_tokens: int = DECLARED.value("HELPBOT_MAX_TOKENS", int)
    request_budget_tokens: int = DECLARED.value("HELPBOT_REQUEST_BUDGET_TOKENS", int)
    summary_threshold_tokens: int = DECLARED.value("HELPBOT_SUMMARY_THRESHOLD_TOKENS", int)
    summary_max_tokens: int = 2048
    clear_after_reads: int | None = DECLARED.value("HELPBOT_CLEAR_AFTER_READS", int)  # None: never
    summary_timeout_s: float = DECLARED.value("HELPBOT_SUMMARY_TIMEOUT_S", float)
    tool_result_max_chars: int = DECLARED.value("HELPBOT_TOOL_RESULT_MAX_CHARS", int)
    # One result's cap in (calibrated) estimated tokens: an eighth of the summary threshold at most, so one round
    # of a few results does not fill it and summaries stay rare.
    tool_result_max_tokens: int = 7_500
    max_question_chars: int = 20_000
    timezone: str = DECLARED["HELPBOT_TIMEZONE"].default
    # USD per million tokens; None: the list price of the model's family (LIST_PRICES).
    price_input: float | None = None
    price_output: float | None = None
    summary_price_input: float | None = None
    summary_price_output: float | None = None
    max_cost_usd: float | None = None  # the run's spend cap (estimated); None: no cap
    now: datetime | None = None  # HELPBOT_NOW: a fixed "now" for the date context (replays, evals)

    @property
    def final_reserve_s(self) -> float:
        """Time kept back for the final answer: past ``deadline - reserve`` no more tool rounds start."""
        return min(60.0, self.deadline_s * 0.125)

    def price_of(self, model: str) -> Price:
        """The list price of the model's family, with the configured overrides for the main or summary model."""
        listed = LIST_PRICES[next((name for name in LIST_PRICES if name in model.lower()), "sonnet")]
        given = {self.summary_model: (self.summary_price_input, self.summary_price_output),  # the main one wins
                 self.model: (self.price_input, self.price_output)}.get(model, (None, None))
        return Price(listed.input if given[0] is None else given[0], listed.output if given[1] is None else given[1])

    def cost(self, usage_by_model: Mapping[str, Usage]) -> float:
        """Estimated USD of a run's usage."""
        return sum(self.price_of(model).cost(usage) for model, usage in usage_by_model.items())

    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        budget = env_int(env, "HELPBOT_REQUEST_BUDGET_TOKENS", minimum=10_000)
        threshold = env_int(env, "HELPBOT_SUMMARY_THRESHOLD_TOKENS", min(cls.summary_threshold_tokens,
                                                                         budget * 6 // 10), minimum=2_000)
        if threshold >= budget:
            raise ConfigError("HELPBOT_SUMMARY_THRESHOLD_TOKENS",
                              f"{threshold} must be below HELPBOT_REQUEST_BUDGET_TOKENS ({budget})")
        timezone = env_timezone(env, "HELPBOT_TIMEZONE")
        zone = ZoneInfo(timezone)
        now = env_datetime(env, "HELPBOT_NOW")
        return cls(
            max_rounds=env_int(env, "HELPBOT_MAX_ROUNDS", minimum=1),
            deadline_s=env_float(env, "HELPBOT_DEADLINE_S", minimum=10.0),
            tool_timeout_s=env_float(env, "HELPBOT_TOOL_TIMEOUT_S", minimum=1.0),
            max_tokens=env_int(env, "HELPBOT_MAX_TOKENS", minimum=256),
            request_budget_tokens=budget,
            summary_threshold_tokens=threshold,
            summary_timeout_s=env_float(env, "HELPBOT_SUMMARY_TIMEOUT_S", minimum=1.0),
            clear_after_reads=env_int(env, "HELPBOT_CLEAR_AFTER_READS", minimum=0) or None,
            tool_result_max_tokens=max(500, min(cls.tool_result_max_tokens, threshold // 8)),
            tool_result_max_chars=env_int(env, "HELPBOT_TOOL_RESULT_MAX_CHARS", minimum=1_000),
            timezone=timezone,
            price_input=_optional_price(env, "HELPBOT_PRICE_INPUT"),
            price_output=_optional_price(env, "HELPBOT_PRICE_OUTPUT"),
            summary_price_input=_optional_price(env, "HELPBOT_SUMMARY_PRICE_INPUT"),
            summary_price_output=_optional_price(env, "HELPBOT_SUMMARY_PRICE_OUTPUT"),
            max_cost_usd=_optional_price(env, "HELPBOT_MAX_COST_USD"),
            now=None if now is None else now.replace(tzinfo=zone) if now.tzinfo is None else now.astimezone(zone),
        )


def _optional_price(env: Mapping[str, str], name: str) -> float | None:
    return env_float(env, name, 0.0) if env_str(env, name) is not None else None
