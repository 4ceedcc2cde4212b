"""The masking patterns -- secrets, personal data, exact credential values -- in one pass over a text, the one
pattern library: mcp_lib masks tool results with the secrets, helpbot's egress guard builds a :class:`Masker`
with personal data and the process's credential values. Deliberately broad (a false positive costs a few
characters); ASCII-only (``re.ASCII``: Japanese runs straight into Latin text) and matched on a copy with
full-width forms folded to ASCII one character for one, so spans carry over."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

MASK = "[REDACTED]"

# Full-width ASCII and look-alike dashes/spaces, one code point for one.
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
_FOLD.update({0x3000: 0x20, 0x30FC: 0x2D, 0x2010: 0x2D, 0x2011: 0x2D, 0x2012: 0x2D, 0x2013: 0x2D, 0x2212: 0x2D})
_FOLD.update({cp: 0x20 for cp in (0xA0, *range(0x2000, 0x200B), 0x202F, 0x205F)})  # no-break and other spaces

# A value after ``KEY=`` / ``"key": ``: printable ASCII without quotes or brackets (secrets are ASCII; Japanese
# prose after 「password:」 is not a secret), taken whole (possessive) and not followed by ``(`` or ``[`` so that
# code such as ``token = get_token()`` or ``os.environ["X"]`` is left alone.
_CHARS = r"[A-Za-z0-9!#$%&*+\-./:;=?@^_`|~]"
_KEY_WORDS = (r"api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|secret"
              r"|password|passwd|passphrase|pass|pwd|pw|token|credentials?")
# Key words that, followed by only a space, still announce a secret.
_SPACED_KEY_WORDS = r"password|passwd|passphrase|pwd|api[_-]?key|access[_-]?key|secret[_-]?key|client[_-]?secret"
# Japanese key words: 「パスワード：Hunter2」「暗証番号は 4711」 (the full-width colon is folded to ``:``).
# Written as matched: on the folded text, where the long-vowel mark ー is a dash.
_JA_KEY_WORDS = ("パスワード|暗証番号|パスコード|合言葉|トークン|アクセスキー|シークレット|秘密鍵|APIキー|API キー"
                 "|ﾊﾟｽﾜｰﾄﾞ|ﾄｰｸﾝ".translate(_FOLD))  # half-width katakana: ﾊﾟ is two code points, not folded


class _Run(NamedTuple):
    """A pattern that begins inside a run of ``chars`` and needs ``tail`` right after the run: the regex
    ``start chars* last tail``, where ``last`` matches only ``chars`` and ``tail`` begins with a character
    outside them. In one alternation it is quadratic (from each position of a long run the engine reads the run
    again); found apart (:class:`_Starts`), each run is read once: its tail and its latest start do not depend
    on where in the run the match begins."""

    start: str  # the pattern's own condition where it begins (a lookbehind, ``\b``, a first letter)
    chars: str  # the class of the run the match begins in
    last: str  # what the run ends with: a match begins no later than where this does
    after: str  # what ``tail`` begins with: a run followed by anything else is passed over at once
    tail: str  # what follows the run, to the match's end
    dead: str = ""  # stretches where the tail cannot match: a run that ends inside one is passed over


# What follows a private key's BEGIN line, up to its END line or the text's end.
_PEM_REST = r"(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
_PEM_END = re.compile(_PEM_REST, re.ASCII)

# (name, pattern) in priority order; a pattern with groups ``s`` and ``q`` keeps what they end (key, separator,
# quote) and masks the rest, so the reader still sees what was there.
_SECRETS: list[tuple[str, str | _Run]] = [
    # (to its end or the text's, read on by _PEM_REST once it is the match: from every BEGIN a key's match
    # passed over, the alternation would read to the end of the text)
    ("pem", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"),
    # Credentials inside a URL: postgres://u:pw@db keeps the user, loses the password. From the ``://`` on, so a
    # match that took the scheme (``a@b.compostgres://``) leaves it to be found; the user is masked in turn.
    ("url", r"://[^\s/:@<>|\"']*(?P<url_s>:)(?P<url_q>)[^\s/@<>|\"']+(?=@)"),
    # Distinctive prefixes match anywhere, also glued to the text before them (``TOKEN_ghp_…``, ``キーxoxb-…``).
    ("slack", r"(?:xoxe\.)?xox[abposre]-[A-Za-z0-9-]{3,}|xapp-[A-Za-z0-9-]{3,}"),
    ("github", r"gh[pousr]_[A-Za-z0-9]{4,}|github_pat_[A-Za-z0-9_]{8,}"),
    ("aws", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("anthropic", r"sk-ant-[A-Za-z0-9_-]{8,}"),
    ("openai", r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("gitlab", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("npm", r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    ("bedrock", r"(?<![A-Za-z0-9])ABSK[A-Za-z0-9+/=]{20,}"),
    ("google", r"(?<![A-Za-z0-9])AIza[A-Za-z0-9_-]{35}"),
    ("stripe", r"(?<![A-Za-z0-9])[sr]k_live_[A-Za-z0-9]{16,}"),
    ("jwt", _Run("(?<![A-Za-z0-9])(?=eyJ)", "[A-Za-z0-9_-]", "[A-Za-z0-9_-]{11}", r"\.",
                 r"\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    # Slack incoming webhooks and workflow triggers: the path is the secret, the host tells the reader what it was.
    ("hook", r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}"),
    # Authorization: Bearer <credential> / Basic <credential>: the scheme is kept
    ("auth", r"(?P<auth_k>(?i:\bbearer\s+|\bauthorization:\s*basic\s+))(?P<auth_s>)(?P<auth_q>)"
             r"[A-Za-z0-9._~+/-]{16,}=*"),
    # KEY=value, KEY: value, "key": "value", with any prefix: REDMINE_API_KEY=..., GITHUB_TOKEN=..., db_password
    # (not a sentence going on: ``SLACK_BOT_TOKEN: Slack rejected the token`` is helpbot naming a variable)
    ("kv", _Run("(?<![A-Za-z0-9])", "[A-Za-z0-9_.-]", f"(?i:{_KEY_WORDS})", r"[\"']?\s*[:=]",
                rf"(?P<kv_s>[\"']?\s*[:=]\s*)(?P<kv_q>[\"']?)(?:(?<=:\s)(?![A-Z][A-Za-z]*[a-z] [a-z])|(?<!:\s))"
                rf"{_CHARS}{{5,}}+(?![(\[])",
                # a value run that ends before ``(``: from any ``=`` or ``:`` in it the value reads on to the ``(``
                # (``token=`` repeated: every separator would read the run again)
                rf"(?<!{_CHARS}){_CHARS}++(?=[(\[])")),
    # ``password hunter2x``: a key word, spaces, then a value with a letter and a digit (``password reset``,
    # ``token expired`` and ``secret 42`` stay prose)
    ("sp", rf"(?<![A-Za-z0-9_.-])(?P<sp_k>(?i:{_SPACED_KEY_WORDS}))(?P<sp_s>[ \t]+)(?P<sp_q>)"
           rf"(?={_CHARS}*[0-9])(?={_CHARS}*[A-Za-z]){_CHARS}{{6,}}+(?![(\[])"),
    # 「パスワードは、X」「暗証番号 4711」: a particle or colon (then maybe a comma), or only spaces or a comma
    ("ja", rf"(?P<ja_k>{_JA_KEY_WORDS})(?P<ja_s>\s*(?:[:=]|は|が|を)[\s、,]*|[\s、,]+)(?P<ja_q>[\"'「]?)"
           rf"{_CHARS}{{4,}}+"),
]
# Card numbers (13-19 digits, spaces or dashes between groups), masked only when the Luhn check passes.
_CARD = ("card", r"(?<![A-Za-z0-9_.-])\d(?:[ -]?\d){12,18}(?![A-Za-z0-9_-])")
_EMAIL = ("email", _Run(r"\b(?!git@)", "[A-Za-z0-9._%+-]", "[A-Za-z0-9._%+-]", "@",
                        r"@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"))
# 03-1234-5678, 090-1234-5678, 0120-123-456, (03) 1234-5678, +81 90 1234 5678, +1 (555) 123-4567, 09012345678,
# 0312345678 (a landline's ten digits), 090.1234.5678 (dots: only the Japanese shapes, so 01.02.2024 is a date)
_PHONES = [
    ("phone", r"(?<![\w.-])\(?0\d{1,4}\)?[ -]?\d{1,4}[ -]\d{3,4}(?![\w-])"),
    ("phone2", r"(?<![\w.+-])\+\d{1,3}[ -]?\(?\d{1,4}\)?(?:[ -]?\d{2,4}){2,3}(?![\w-])"),
    ("phone3", r"(?<![\w.+-])(?:0[5789]0\d{8}|0[1-9]\d{8})(?![\w-]|\.\d)"),
    ("phone4", r"(?<![\w.+-])(?:0[5789]0\.\d{4}|0\d\.\d{4}|0\d{2}\.\d{3}|0\d{3}\.\d{2}|0\d{4}\.\d)\.\d{4}"
               r"(?![\w-]|\.\d)"),
]
# Where a match can begin (every branch above starts with printable ASCII or a Japanese key word; an exact value
# anywhere): ``(?=[…])`` in front lets the engine pass over other text, such as Japanese prose, in one test a
# character instead of trying every branch there. It changes no match, only where none can start.
_LEADS = "!-~" + "".join(sorted({word[0] for word in _JA_KEY_WORDS.split("|")}))
_LABELS = {"card": "[card]", "email": "[email]", **dict.fromkeys([name for name, _ in _PHONES], "[phone]")}


def _forms(value: str) -> set[str]:
    """A credential as it may appear in outward text: as it is, and as JSON writes it inside a string (a quote or
    backslash escaped; non-ASCII as ``\\uXXXX`` too), since the trace, ``--json`` and transcripts are JSON."""
    return {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}


def _compiled(run: _Run) -> tuple[re.Pattern[str], ...]:
    """A run pattern as :class:`_Starts` reads it: ``host`` (a whole run that ends with ``last`` and is followed by
    ``after``; group ``last``: where the latest start is), ``start``, ``tail`` and ``dead`` (none: ``(?!)``)."""
    chars = run.chars
    host = rf"(?<!{chars})(?={chars}++{run.after}){chars}*(?P<last>{run.last})(?!{chars})"
    return tuple(re.compile(part, re.ASCII) for part in (host, run.start, run.tail, run.dead or "(?!)"))


def luhn(digits: str) -> bool:
    """The card-number check digit (ISO/IEC 7812)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


_BEFORE = re.match("", "")  # a stand-in before the first dead stretch: they are looked for once a tail is


class _Starts:
    """Where one :class:`_Run` pattern can match in one text, asked with a growing ``pos``: ``host`` finds the runs
    that can hold a start, left to right in one pass; in such a run the first start from ``pos`` up to ``last`` is
    looked for, and the tail is matched (once for the run) only when that start would come first."""

    def __init__(self, compiled: tuple[re.Pattern[str], ...], text: str):
        host, self._start, self._tail, dead = compiled
        self._hosts = host.finditer(text)
        self._deads = dead.finditer(text)
        self._text = text
        self._run = next(self._hosts, None)
        self._at = -1  # the first start in the run at or after every ``pos`` asked so far
        self._matched: re.Match[str] | None = None  # the run's tail, once matched
        self._dead: re.Match[str] | None = _BEFORE  # the first dead stretch that ends after the last tail's start

    def first(self, pos: int) -> int | None:
        """Where the first possible match at or after ``pos`` begins (whether it is one, :meth:`tail` says)."""
        while self._run is not None:
            if pos <= self._at:
                return self._at
            latest = self._run.start("last")
            if pos <= latest:
                found = self._start.search(self._text, max(pos, self._run.start()), self._run.end() + 1)
                if found is not None and found.start() <= latest:
                    self._at = found.start()
                    return self._at
            self._next_run()
        return None

    def tail(self) -> re.Match[str] | None:
        """The tail of the match :meth:`first` found, or None: no match in its run, which is passed over."""
        assert self._run is not None
        if self._matched is None:
            self._matched = self._tail_after(self._run.end())
            if self._matched is None:
                self._next_run()
        return self._matched

    def _next_run(self) -> None:
        self._run = next(self._hosts, None)
        self._at = -1
        self._matched = None

    def _tail_after(self, end: int) -> re.Match[str] | None:
        """The tail matched at ``end``, None at once where ``end`` is in a dead stretch (found in one pass)."""
        while self._dead is not None and self._dead.end() <= end:
            self._dead = next(self._deads, None)
        if self._dead is not None and self._dead.start() <= end:
            return None
        return self._tail.match(self._text, end)


class Masker:
    """One compiled scan: the secret patterns, card numbers, optionally e-mail addresses and phone numbers, and
    the exact ``values`` given (a credential's value whatever its length, as Actions' ``add-mask`` does)."""

    def __init__(self, *, personal: bool = False, cards: bool = False, values: Iterable[str] = ()):
        # folded like the text they are looked for in: a passphrase with ー or a full-width letter is found too
        exact = sorted({form.translate(_FOLD) for v in values if v for form in _forms(v)}, key=len, reverse=True)
        parts: list[tuple[str, str | _Run]] = [("exact", "|".join(re.escape(v) for v in exact))] if exact else []
        parts += _SECRETS
        if cards:
            parts.append(_CARD)
        if personal:
            parts += [_EMAIL, *_PHONES]
        self.values = tuple(exact)
        self._order = {name: index for index, (name, _) in enumerate(parts)}
        leads = _LEADS + "".join(re.escape(c) for c in sorted({v[0] for v in exact}))
        branches = "|".join(f"(?P<{name}>{body})" for name, body in parts if isinstance(body, str))
        self._pattern = re.compile(f"(?=[{leads}])(?:{branches})", re.ASCII)
        self._runs = {name: _compiled(body) for name, body in parts if isinstance(body, _Run)}
        groups = set(self._pattern.groupindex)
        for _, _, tail, _ in self._runs.values():
            groups.update(tail.groupindex)
        self._keyed = {name for name in self._order if f"{name}_q" in groups}

    def _matches(self, text: str) -> Iterator[tuple[str, int, int, int]]:
        """(name, start, end, end of the part kept) of each match, as ``finditer`` over one alternation of all
        the patterns in order finds them: the leftmost start, there the first pattern that matches, then on from
        its end. The one compiled pattern scans for the others; each run pattern has its own :class:`_Starts`."""
        runs = {name: _Starts(compiled, text) for name, compiled in self._runs.items()}
        found = self._pattern.search(text)
        pos = 0
        while True:
            if found is not None and found.start() < pos:
                found = self._pattern.search(text, pos)
            best = None  # (start, order, name) of what comes first: a match of the pattern, or a run's start
            if found is not None:
                best = (found.start(), self._order[found.lastgroup or ""], found.lastgroup or "")
            for name, starts in runs.items():
                at = starts.first(pos)
                if at is not None and (best is None or (at, self._order[name]) < best[:2]):
                    best = (at, self._order[name], name)
            if best is None:
                return
            start, _, name = best
            match = runs[name].tail() if name in runs else found
            if match is None:  # that run holds no match after all: look again
                continue
            kept = match.end(f"{name}_q") if name in self._keyed else start
            end = match.end()
            if name == "pem":  # on to the key's END line (the rest always matches, at the latest at the text's end)
                rest = _PEM_END.match(text, end)
                end = rest.end() if rest else len(text)
            yield name, start, end, kept
            pos = end

    def mask(self, text: str) -> str:
        """``text`` with every match replaced: matched on the folded copy, replaced in the original."""
        folded = text.translate(_FOLD)
        pieces: list[str] = []
        last = 0
        for name, start, end, kept in self._matches(folded):
            if name == "card" and not luhn(re.sub(r"\D", "", folded[start:end])):
                continue
            # keep key, separator and quote: the reader knows what was there; masked in turn, since a URL's user
            # (``https://ghp_…:x-oauth-basic@``, a credential's value) is kept too (it holds no match of its own)
            replacement = self.mask(text[start:kept]) + MASK if name in self._keyed else _LABELS.get(name, MASK)
            pieces += [text[last:start], replacement]
            last = end
        pieces.append(text[last:])
        return "".join(pieces)

    def deep(self, value: Any) -> Any:
        """Every string inside a JSON-like value masked, keys too (a peer's JSON may key rows by their text)."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.deep(k): self.deep(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.deep(v) for v in value]
        return value


SECRETS = Masker()
_PERSONAL = Masker(personal=True, cards=True)


def redact_secrets(text: str) -> str:
    """Secrets masked (the patterns; no personal data): what tool results get before the model sees them."""
    return SECRETS.mask(text)


def redact_personal(text: str) -> str:
    """Secrets, card numbers, e-mail addresses and phone numbers masked."""
    return _PERSONAL.mask(text)


def redact_deep(value: Any) -> Any:
    """Secrets masked in every string inside a JSON-like value."""
    return SECRETS.deep(value)
