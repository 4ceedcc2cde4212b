"""Masking of secrets (and, for public posts, personal data) in any text that leaves a tool or the bot.

Tool output is untrusted: a pasted token in a Slack message or a wiki page must not travel on to the model,
the trace or a public answer. The patterns are deliberately broad; a false positive costs a few characters.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

_SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"\bxapp-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub classic tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key ids
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"),  # Anthropic keys
    re.compile(r"\bABSK[A-Za-z0-9+/=]{20,}"),  # Bedrock API keys
    re.compile(r"(?i)\b(aws_secret_access_key|secret_access_key|api[_-]?key|password|passwd|token)"
               r"(\s*[:=]\s*)([\"']?)[^\s\"']{8,}"),
]

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
# Japanese and international phone numbers: 03-1234-5678, 090-1234-5678, +81 90 1234 5678, 0120-123-456
_PHONE = re.compile(r"(?<![\w.-])(?:\+\d{1,3}[ -]?)?(?:\(?0\d{1,4}\)?[ -]?\d{1,4}[ -]\d{3,4})(?![\w-])")


def _mask_secret(match: re.Match[str]) -> str:
    if match.lastindex == 3:  # key=value form: keep the key so the reader knows what was there
        return f"{match.group(1)}{match.group(2)}{MASK}"
    return MASK


def redact_secrets(text: str) -> str:
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(_mask_secret, text)
    return text


def redact_personal(text: str) -> str:
    """E-mail addresses and phone numbers: masked in public answers (the seed's rule against personal data)."""
    text = _EMAIL.sub("[email]", text)
    return _PHONE.sub("[phone]", text)


def redact_deep(value: Any) -> Any:
    """Secrets masked in every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: redact_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_deep(v) for v in value]
    return value
