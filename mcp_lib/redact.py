"""Masking of secrets (and, for public posts, personal data) in any text that leaves a tool or the bot.

Tool output is untrusted: a pasted token in a Slack message or a wiki page must not travel on to the model,
the trace or a public answer. The patterns are deliberately broad; a false positive costs a few characters.

Japanese text runs straight into Latin text (「トークンはxoxb-…です」), so the patterns are ASCII-only
(``re.ASCII``: a kana is not a word character for ``\\b``), and matching runs on a copy where full-width
forms (０９０－１２３４, ｔａｒｏ＠…) are folded to ASCII one character for one, so spans carry over.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "[REDACTED]"

_A = re.ASCII
# A value after ``KEY=`` / ``"key": ``: printable ASCII without quotes or brackets (secrets are ASCII; Japanese
# prose after 「password:」 is not a secret), at least 8 characters, taken whole (possessive) and not followed by
# ``(`` or ``[`` so that code such as ``token = get_token()`` or ``os.environ["X"]`` is left alone.
_VALUE = r"[A-Za-z0-9!#$%&*+\-./:;=?@^_`|~]{8,}+(?![(\[])"
_KEY_WORDS = (r"api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|secret"
              r"|password|passwd|passphrase|token|credentials?")
_SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S | _A),
    # Distinctive prefixes match anywhere, also glued to the text before them (``TOKEN_ghp_…``, ``キーxoxb-…``).
    re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,}", _A),  # Slack tokens
    re.compile(r"xapp-[A-Za-z0-9-]{10,}", _A),
    re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}", _A),  # GitHub tokens: ghp_ gho_ ghu_ ghs_ ghr_
    re.compile(r"github_pat_[A-Za-z0-9_]{30,}", _A),
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _A),  # AWS access key ids
    re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}", _A),  # Anthropic keys
    re.compile(r"(?<![A-Za-z0-9])ABSK[A-Za-z0-9+/=]{20,}", _A),  # Bedrock API keys
    re.compile(r"(?<![A-Za-z0-9])AIza[A-Za-z0-9_-]{35}", _A),  # Google API keys
    re.compile(r"(?<![A-Za-z0-9])[sr]k_live_[A-Za-z0-9]{16,}", _A),  # Stripe secret keys
    re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", _A),  # JWTs
    # Slack incoming webhooks and workflow triggers: the path is the secret, the host tells the reader what it was.
    re.compile(r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}", _A),
    # Authorization: Bearer <credential> / Basic <credential>: the scheme is kept (three groups, as key=value)
    re.compile(r"(?i)(\bbearer\s+|\bauthorization:\s*basic\s+)()()[A-Za-z0-9._~+/-]{16,}=*", _A),
    # KEY=value, KEY: value, "key": "value", with any prefix: REDMINE_API_KEY=..., GITHUB_TOKEN=..., db_password
    re.compile(rf"(?i)(?<![A-Za-z0-9])([A-Za-z0-9_.-]*(?:{_KEY_WORDS}))([\"']?\s*[:=]\s*)([\"']?){_VALUE}", _A),
]

_EMAIL = re.compile(r"\b(?!git@)[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", _A)
# 03-1234-5678, 090-1234-5678, 0120-123-456, (03) 1234-5678, +81 90 1234 5678, +1 (555) 123-4567, 09012345678
_PHONES = [
    re.compile(r"(?<![\w.-])\(?0\d{1,4}\)?[ -]?\d{1,4}[ -]\d{3,4}(?![\w-])", _A),
    re.compile(r"(?<![\w.+-])\+\d{1,3}[ -]?\(?\d{1,4}\)?(?:[ -]?\d{2,4}){2,3}(?![\w-])", _A),
    re.compile(r"(?<![\w.+-])0[5789]0\d{8}(?![\w-])", _A),
]

# Full-width ASCII and look-alike dashes/spaces, one code point for one.
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
_FOLD.update({0x3000: 0x20, 0x30FC: 0x2D, 0x2010: 0x2D, 0x2011: 0x2D, 0x2012: 0x2D, 0x2013: 0x2D, 0x2212: 0x2D})


def _sub(pattern: re.Pattern[str], text: str, replace: Callable[[re.Match[str]], str]) -> str:
    """``pattern.sub`` matched on the folded text, replacing in the original."""
    folded = text.translate(_FOLD)
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(folded):
        pieces += [text[last : match.start()], replace(match)]
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _mask_secret(match: re.Match[str]) -> str:
    if match.re.groups == 3:  # key=value form: keep the key (and quote) so the reader knows what was there
        return f"{match.group(1)}{match.group(2)}{match.group(3)}{MASK}"
    return MASK


def redact_secrets(text: str) -> str:
    for pattern in _SECRET_PATTERNS:
        text = _sub(pattern, text, _mask_secret)
    return text


def redact_personal(text: str) -> str:
    """E-mail addresses and phone numbers: masked in public answers (the seed's rule against personal data)."""
    text = _sub(_EMAIL, text, lambda m: "[email]")
    for pattern in _PHONES:
        text = _sub(pattern, text, lambda m: "[phone]")
    return text


def redact_deep(value: Any) -> Any:
    """Secrets masked in every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: redact_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_deep(v) for v in value]
    return value
