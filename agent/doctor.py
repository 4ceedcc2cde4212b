"""``helpbot doctor [--json]``: which parts of helpbot are configured, half-configured or off, then a live check of
each configured part with the permissions helpbot needs. Lines name variables, never values. Exit 0 when every
configured part works, 2 otherwise."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agent import faq_pr, guard
from agent.core.claude import build_model
from agent.core.model import Request
from agent.core.model_config import TURN_ON, ModelConfig
from agent.errors import ExitError, ModelError
from agent.slack.trigger import env_channels
from mcp_lib import Registry, ToolContext
from mcp_lib.config import ConfigError, env_str
from mcp_lib.core import ToolError
from mcp_lib.platforms.slack import channel_info

PartState = Literal["ok", "failed", "half-configured", "not configured"]
_MARK: Mapping[PartState, str] = {"ok": "✓", "failed": "✗", "half-configured": "!", "not configured": "–"}


@dataclass
class Part:
    """One part of the deployment and what doctor found; ``warnings`` do not fail it."""

    name: str
    state: PartState
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")


def main(args: argparse.Namespace) -> int:
    parts = diagnose(dict(os.environ))
    if args.json:
        guard.out(json.dumps({"ok": healthy(parts), "parts": [dataclasses.asdict(p) for p in parts]},
                             ensure_ascii=False, indent=2))
    else:
        lines = []
        for part in parts:
            lines.append(f"{_MARK[part.state]} {part.name}: {part.state}")
            lines += [f"    {line}" for line in part.lines] + [f"    warning: {line}" for line in part.warnings]
        problems = sum(part.state in ("failed", "half-configured") for part in parts)
        lines.append("doctor: every configured part works" if not problems else
                     f"doctor: {problems} part{'s' if problems > 1 else ''} to fix")
        guard.out("\n".join(lines))
    return 0 if healthy(parts) else 2


def healthy(parts: list[Part]) -> bool:
    return all(part.state in ("ok", "not configured") for part in parts)


def diagnose(env: Mapping[str, str], *, registry: Registry | None = None) -> list[Part]:
    """Every part, in the order a setup goes: the model, then each platform (Slack with the bot's channels)."""
    parts = [_model(env)]
    try:
        registry = registry or Registry(dict(env), server_log=guard.server_err)
        names = list(registry.platforms())
    except ConfigError as exc:  # helpbot.toml itself is wrong
        return [*parts, Part("helpbot.toml", "failed", [str(exc)])]
    with contextlib.closing(registry):
        for name in names:
            part = _platform(registry, name)
            if name == "slack" and part.state == "ok":
                _channels(registry, env, part)
            parts.append(part)
    if env_str(env, "HELPBOT_FAQ_PR_TOKEN"):  # faq-draft.yml opens pull requests only then
        parts.append(_faq_pull_requests(env))
    return parts


def _faq_pull_requests(env: Mapping[str, str]) -> Part:
    """faq-draft --pr: the token reads GITHUB_REPOSITORY and may push to it."""
    try:
        config = faq_pr.load_config(env)
        with faq_pr.make_client(config) as client:
            faq_pr.PullRequestWriter(config, client).check()
    except ExitError as exc:  # ConfigError too
        return Part("faq-draft pull requests", "failed", [str(exc)])
    return Part("faq-draft pull requests", "ok", [f"{config.token_name} may push to {config.repository} (pull-requests "
                                                 "write shows only when one is opened)"])


def _model(env: Mapping[str, str]) -> Part:
    """Each of HELPBOT_MODEL and HELPBOT_SUMMARY_MODEL answers a one-token request."""
    try:
        config = ModelConfig.from_env(env)
    except ConfigError as exc:
        return Part("model", "failed", [str(exc)])
    if config is None:
        return Part("model", "not configured", [f"degraded mode (FAQ search only): {TURN_ON}"])
    config = dataclasses.replace(config, max_attempts=1, request_timeout_s=min(config.request_timeout_s, 30.0))
    model = build_model(config)
    part = Part("model", "ok", [config.provider + (f", region {config.region}" if config.region else "")])
    for variable, model_id in (("HELPBOT_MODEL", config.model), ("HELPBOT_SUMMARY_MODEL", config.summary_model)):
        try:
            model.create(Request([], [{"role": "user", "content": "ping"}], [], None, max_tokens=1, model=model_id))
            part.lines.append(f"{variable} answers")
        except (ModelError, ConfigError) as exc:
            part.state = "failed"
            part.lines.append(f"{variable}: {exc}")
    return part


def _platform(registry: Registry, name: str) -> Part:
    platform = registry.platforms()[name]
    try:
        config = registry.config(name)
    except ConfigError as exc:
        return Part(name, "failed", [str(exc)])
    if config is None:
        if half := registry.half_configured(name):
            return Part(name, "half-configured", [half])
        return Part(name, "not configured", [f"set {' and '.join(platform.variables)} to turn it on"]
                    if platform.variables else [])
    part = Part(name, "ok")
    try:
        part.lines += platform.check(_context(registry, name)) if platform.check is not None else ["configured"]
    except Exception as exc:  # a ToolError (CredentialsError too) says what; a client that cannot even be built
        part.state = "failed"
        part.lines.append(str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}")
    part.warnings += registry.unoffered(name)
    return part


def _context(registry: Registry, name: str) -> ToolContext:
    """The platform's context with one tool call's budget for the whole check."""
    ctx = registry.context(name)
    return dataclasses.replace(ctx, deadline=ctx.clock.monotonic() + ctx.limits.budget_s)


def _channels(registry: Registry, env: Mapping[str, str], part: Part) -> None:
    """The bot is a member of every channel of HELPBOT_CHANNELS (else it can read and answer none there)."""
    channels = env_channels(env, "HELPBOT_CHANNELS")
    if not channels:
        part.warnings.append("HELPBOT_CHANNELS is not set: helpbot answers in every channel it is invited to")
        return
    if env_str(env, "SLACK_BOT_TOKEN") is None:
        part.state = "failed"
        part.lines.append("SLACK_BOT_TOKEN is not set: helpbot cannot read or answer threads")
        return
    ctx = _context(registry, "slack")
    outside = []
    for channel in channels:
        try:
            info = channel_info(ctx, channel)
        except ToolError:
            info = {}
        if not info.get("is_member"):
            outside.append(channel)
    if outside:
        part.state = "failed"
        part.lines.append(f"the bot is not a member of {', '.join(outside)} (HELPBOT_CHANNELS): /invite it there")
    else:
        part.lines.append(f"the bot is a member of all {len(channels)} channels of HELPBOT_CHANNELS")
