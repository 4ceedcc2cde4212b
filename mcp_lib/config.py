"""Reading configuration from the environment, with one clear error per bad variable."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

from .errors import EXIT_BAD_INPUT, ExitError


class ConfigError(ExitError):
    """Bad configuration: the CLIs print it as one line and exit 2."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, variable: str, problem: str):
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


def env_str(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def env_url(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """A base URL without a trailing slash; a value without http(s):// is a ConfigError, not a late crash.

    A URL may carry no credentials (``http://admin:pass@host``): every source link built from it would carry
    them into the answer. Credentials go in their own variables. The error names the variable, never the value.
    """
    value = env_str(env, name) or default
    if value is None:
        return None
    try:
        parsed = urlparse(value)
        _ = parsed.port  # raises on a port that is not a number
    except ValueError:
        raise ConfigError(name, "is not a URL; expected something like https://host/path") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(name, "is not a URL; expected something like https://host/path")
    if "@" in parsed.netloc:
        raise ConfigError(name, "must not carry a user name or password (user:pass@host); give the credentials "
                                "in their own variable (the token or API key) and the URL without them")
    return value.rstrip("/")


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env_str(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(name, f"{raw!r} is not a whole number") from None
    if value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    raw = env_str(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(name, f"{raw!r} is not a number") from None
    if value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
    return value


def env_list(env: Mapping[str, str], name: str) -> list[str]:
    """Comma- or space-separated list; empty when unset."""
    raw = env_str(env, name) or ""
    return [part for part in raw.replace(",", " ").split() if part]


def env_bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env_str(env, name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, f"{raw!r} is not a boolean (use true or false)")
