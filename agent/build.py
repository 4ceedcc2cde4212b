"""The one composition root: the agent as the environment configures it (``helpbot ask``, ``answer``, ``eval``).
Heavy SDKs are imported inside :func:`build_agent`, so importing this module stays cheap for ``--help``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.core.loop import Agent
    from agent.core.run import Progress
    from mcp_lib import Registry

MAX_ROUNDS_LIMIT = 50
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def parse_rounds(value: str) -> int:
    """``--max-rounds N`` (``helpbot ask`` and ``helpbot eval``): a whole number from 1 to 50."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if not 1 <= number <= MAX_ROUNDS_LIMIT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_ROUNDS_LIMIT}, got {number}")
    return number


def check_configuration(env: Mapping[str, str]) -> None:
    """What :func:`build_agent` will read (settings, model, tags, helpbot.toml, every platform), checked without
    importing an SDK or contacting a server: a ConfigError here is exit 2 before anything is posted."""
    from agent.core.model_config import ModelConfig
    from agent.core.settings import Settings
    from agent.core.tags import load_tag_config
    from mcp_lib import Registry

    Settings.from_env(env)
    ModelConfig.from_env(env)
    load_tag_config(env)
    Registry(env).enabled()


def hold_freed_memory(libc: Any = None) -> None:
    """Let glibc keep freed memory for reuse: by default each allocation over 128 KiB is a mapping of its own and
    the heap is trimmed past 128 KiB, so a tool's multi-MB answer is zero-filled and faulted in page by page each
    time (three 5 MB pages in one round: 1.7x the CPU of the same calls in a row, bench/README.md **Parallel**).
    The thresholds are where glibc's own adjustment would end; without glibc's ``mallopt``, nothing changes."""
    if libc is None:
        import ctypes

        try:
            libc = ctypes.CDLL(None)
        except (OSError, TypeError):  # no C library to open by the process's own symbols (Windows)
            return
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        mallopt(_M_TRIM_THRESHOLD, 64 << 20)


def build_agent(env: Mapping[str, str], *, max_rounds: int | None = None, registry: Registry | None = None,
                on_progress: Callable[[Progress], None] | None = None,
                on_event: Callable[[dict[str, Any]], None] | None = None) -> Agent:
    """The agent: its model (None without credentials: degraded mode) and the enabled platforms' tools, from
    ``registry`` when the caller holds one (``helpbot answer``'s, with the Slack clients it reads the thread with)."""
    from agent import guard
    from agent.core.claude import build_model
    from agent.core.loop import Agent
    from agent.core.model_config import TURN_ON, ModelConfig
    from agent.core.settings import Settings
    from agent.core.tags import load_tag_config
    from agent.core.tools import RegistryTools
    from mcp_lib import Registry

    env = dict(env)
    hold_freed_memory()
    settings = Settings.from_env(env)
    config = ModelConfig.from_env(env)
    if config is not None:
        settings = replace(settings, model=config.model, summary_model=config.summary_model)
    if max_rounds is not None:
        settings = replace(settings, max_rounds=max_rounds)
    model = build_model(config) if config is not None else None
    registry = registry or Registry(env, server_log=guard.server_err)
    tools = RegistryTools(registry)
    tag_config = load_tag_config(env)  # helpbot.toml [[tags]]: each question is tagged before its run
    for warning in registry.warnings():  # half-configured: in the run's log, not silently off
        guard.err(f"helpbot: warning: {warning}")
    if model is None:
        guard.err(f"helpbot: no AI model is configured ({TURN_ON} to use Claude)")
    return Agent(model, tools, settings, on_progress=on_progress, on_event=on_event, tags=tag_config)
