"""Secrets and personal data are masked, also when they touch Japanese text or are written full-width."""

from __future__ import annotations

import random
import re
import string
from typing import Any

import pytest

from mcp_lib import redact
from mcp_lib.redact import _FOLD, Masker, luhn, redact_deep, redact_personal, redact_secrets

SLACK = "xoxb-" + "1234567890-abcdefghijkl"
GITHUB = "ghp_" + "a" * 36
AWS = "AKIA" + "ABCDEFGHIJKLMNOP"


@pytest.mark.parametrize(
    "text",
    [
        f"トークンは{SLACK}です",
        f"token: {GITHUB}",
        f"キー{AWS}を使う",
        "github_pat_" + "b" * 40,
        "sk-ant-" + "c" * 30,
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
        "password=hunter2hunter2",
    ],
)
def test_secrets_are_masked(text: str) -> None:
    masked = redact_secrets(text)
    assert "[REDACTED]" in masked
    for secret in (SLACK, GITHUB, AWS, "hunter2hunter2", "MIIE"):
        assert secret not in masked


def test_key_value_form_keeps_the_key() -> None:
    assert redact_secrets("api_key = abcdefgh12345") == "api_key = [REDACTED]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a prefix before the key word (the word boundary never matched after an underscore)
        ("REDMINE_API_KEY=0123456789abcdef0123456789abcdef01234567", "REDMINE_API_KEY=[REDACTED]"),
        ("GROWI_ACCESS_TOKEN=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==", "GROWI_ACCESS_TOKEN=[REDACTED]"),
        ("export GITHUB_TOKEN=gho_shortbutsecret1", "export GITHUB_TOKEN=[REDACTED]"),
        ("MY_PASSWORD=hunter2hunter2", "MY_PASSWORD=[REDACTED]"),
        ("db.password: s3cr3t-pass", "db.password: [REDACTED]"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]"),
        # JSON: the closing quote of the key comes before the colon
        ('{"api_key": "abcdef0123456789"}', '{"api_key": "[REDACTED]"}'),
        ("{'client_secret': 'abcdef0123456789'}", "{'client_secret': '[REDACTED]'}"),
        # Authorization headers and JWTs
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
         "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "Authorization: Bearer [REDACTED]"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMzQ=", "Authorization: Basic [REDACTED]"),
        ("id_token は eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2V4YW1wbGUifQ.c2lnbmF0dXJlMTIzNDU2 です",
         "id_token は [REDACTED] です"),
        # Slack webhooks: the path is the secret
        ("通知先 https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx に送る",
         "通知先 https://hooks.slack.com/[REDACTED] に送る"),
        # GitHub's other token kinds, also straight after an underscore or Japanese text
        ("トークンgho_" + "a" * 36 + "です", "トークン[REDACTED]です"),
        ("x_ghs_" + "B" * 36, "x_[REDACTED]"),
        ("prefixghp_" + "F" * 36, "prefix[REDACTED]"),
        ("ghu_" + "c" * 36 + " ghr_" + "d" * 36, "[REDACTED] [REDACTED]"),
        ("key AIza" + "e" * 35, "key [REDACTED]"),
    ],
)
def test_secrets_behind_prefixes_quotes_and_headers_are_masked(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_masking_is_idempotent() -> None:
    once = redact_secrets('GITHUB_TOKEN="abcdefgh12345678" and Bearer abcdefghijklmnopqrstuv')
    assert redact_secrets(once) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("連絡先はtaro@example.comまで", "連絡先は[email]まで"),
        ("電話は03-1234-5678です", "電話は[phone]です"),
        ("携帯 090-1234-5678", "携帯 [phone]"),
        ("携帯09012345678へ", "携帯[phone]へ"),
        ("+81 90 1234 5678", "[phone]"),
        ("０９０－１２３４－５６７８に電話", "[phone]に電話"),
        ("ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ", "[email]"),
    ],
)
def test_personal_data_is_masked(text: str, expected: str) -> None:
    assert redact_personal(text) == expected


@pytest.mark.parametrize("text", [
    "git@github.com:acme/shop.git", "2025-05-15", "注文番号 100234", "v1.2.3", "SKU-0012-3456",
    # words that name secrets, in prose and code, without a secret after them
    "パスワード: 管理者に聞いてください", "password: 管理者に確認", "token: 期限切れ", "the token expired yesterday",
    "max_tokens: 4096", "TOKEN_EXPIRY=3600", "tokens: 1234567890", "token_count=123456789",
    "token = get_token()", 'token = os.environ["GITHUB_TOKEN"]', "password: ${DB_PASSWORD}",
    "token: ${{ secrets.GITHUB_TOKEN }}", "secret: 社外秘です", "Bearer トークンを使う", "Bearer tokens expire",
    "basic authentication is disabled", "https://hooks.slack.com/", "Slack の hooks.slack.com を使う",
    "commit 0123456789abcdef0123456789abcdef01234567", "eyJ だけでは JWT ではない", "AKIA is a prefix",
    "ghp_", "xoxb-", "xoxb-… のトークン", "[REDACTED]", "p1735779660000001", "1735779660.000001",
    "注文 4111111111111112 件", "password: str", "パスワードは変更しました", "暗証番号は 123",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_personal(redact_secrets(text)) == text


def test_deep_redaction_walks_json() -> None:
    value = {"items": [{"text": f"see {SLACK}", "n": 1}], "ok": True}
    assert redact_deep(value) == {"items": [{"text": "see [REDACTED]", "n": 1}], "ok": True}
    assert redact_deep({SLACK: [1], 2: "x"}) == {"[REDACTED]": [1], 2: "x"}  # keys too


@pytest.mark.parametrize(("text", "expected"), [
    # the short ones the long-token patterns let through
    ("ghp_fakefakefake", "[REDACTED]"),
    ("トークンはxoxb-fake-botです", "トークンは[REDACTED]です"),
    ("接続先 postgres://u:pw@db/app", "接続先 postgres://u:[REDACTED]@db/app"),
    ("https://admin:hunter2@redmine.example.test/issues/1", "https://admin:[REDACTED]@redmine.example.test/issues/1"),
    ("パスワード：Hunter2Hunter2", "パスワード：[REDACTED]"),
    ("パスワードはHunter2です", "パスワードは[REDACTED]です"),
    ("暗証番号は 4711 です", "暗証番号は [REDACTED] です"),
    ("password=hunter2", "password=[REDACTED]"),
    ("ＰＡＳＳＷＯＲＤ＝ｈｕｎｔｅｒ２", "ＰＡＳＳＷＯＲＤ＝[REDACTED]"),
    ("sk-ant-shortkey1", "[REDACTED]"),
])
def test_short_secrets_are_masked(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("カード 4111 1111 1111 1111 で決済", "カード [card] で決済"),
    ("カード4111-1111-1111-1111で決済", "カード[card]で決済"),
    ("４１１１１１１１１１１１１１１１", "[card]"),
    ("amex 378282246310005", "amex [card]"),
])
def test_card_numbers_that_pass_luhn_are_masked(text: str, expected: str) -> None:
    assert redact_personal(text) == expected
    assert Masker(cards=True).mask(text) == expected  # cards without e-mail and phone masking


def test_luhn() -> None:
    assert luhn("4111111111111111") and luhn("378282246310005") and not luhn("4111111111111112")


def test_exact_values_are_masked_whatever_their_length() -> None:
    masker = Masker(values=["pw9", "a-long-redmine-key-0123", ""])
    assert masker.mask("鍵はa-long-redmine-key-0123、パスはpw9。") == "鍵は[REDACTED]、パスは[REDACTED]。"
    assert masker.mask("ｐｗ９") == "[REDACTED]"  # a full-width spelling is the same value
    assert masker.values == ("a-long-redmine-key-0123", "pw9")  # the empty value masks nothing


def test_one_scan_masks_neighbouring_matches_of_different_kinds() -> None:
    text = "taro@example.com 090-1234-5678 ghp_fakefakefake password=hunter2 4111111111111111"
    assert redact_personal(text) == "[email] [phone] [REDACTED] password=[REDACTED] [card]"
    assert redact_secrets(text) == "taro@example.com 090-1234-5678 [REDACTED] password=[REDACTED] 4111111111111111"


@pytest.mark.parametrize(("text", "expected"), [
    ("電話0312345678です", "電話[phone]です"),  # a landline's ten digits, no separators
    ("フリーダイヤル0120123456", "フリーダイヤル[phone]"),
    ("携帯 090.1234.5678 まで", "携帯 [phone] まで"),
    ("03.1234.5678", "[phone]"),
    ("０３１２３４５６７８", "[phone]"),
])
def test_phone_numbers_without_dashes_are_masked(text: str, expected: str) -> None:
    assert redact_personal(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("password hunter2x", "password [REDACTED]"),
    ("Password  Hunter2x です", "Password  [REDACTED] です"),
    ("pwd hunter22x", "pwd [REDACTED]"),
    ("API_KEY abcd1234", "API_KEY [REDACTED]"),
    ("client_secret s3cr3tvalue", "client_secret [REDACTED]"),
])
def test_a_key_word_then_a_space_then_a_value_is_masked(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize("text", [
    "ts 1712345678.123456", "1712345678.123456", "https://x.slack.com/archives/C0ECSUP/p1712345678123456",
    "Redmine #12345", "issue 1234567890", "2025-01-15", "2025-01-15T10:00:00+09:00", "01.02.2024", "v1.2.3",
    "1.2.3.4", "10.0.0.1", "version 2.10.1234", "0.12.3", "password reset", "password policy", "secret 42",
    "password reset 手順", "the password is in 1Password", "order 0000012345",
])
def test_ids_dates_and_versions_are_not_phones_or_secrets(text: str) -> None:
    assert redact_personal(redact_secrets(text)) == text


@pytest.mark.parametrize("text", ["pw=hunter2", "PW: hunter2", "ﾊﾟｽﾜｰﾄﾞ: hunter2", "ﾄｰｸﾝは abcd1234",
                                  "redis://:pw123@redis:6379", "glpat-abcdefghij1234567890",
                                  "sk-proj-abcdefghijklmnopqrst", "sk-" + "Ab1" * 8, "npm_" + "a1" * 18])
def test_secrets_in_these_forms_are_masked(text: str) -> None:
    masked = redact_secrets(text)
    assert "[REDACTED]" in masked
    for secret in ("hunter2", "abcd1234", "pw123", "abcdefghij", "Ab1Ab1", "a1a1a1"):
        assert secret not in masked, masked



def test_helpbot_naming_a_variable_is_prose_not_a_secret() -> None:
    """``VARIABLE: Service rejected …`` is a configuration error's line: the service's name stays readable; a value
    after ``=``, glued to the colon or a mixed word after ``: `` is still masked."""
    assert redact_secrets("HELPBOT_DISPATCH_TOKEN: GitHub rejected the token (HTTP 401)") == \
        "HELPBOT_DISPATCH_TOKEN: GitHub rejected the token (HTTP 401)"
    assert redact_secrets("SLACK_BOT_TOKEN: Slack rejected the token") == "SLACK_BOT_TOKEN: Slack rejected the token"
    for secret in ("password=Hunter rejected", "token:Secretword rejected", "TOKEN: GitHubPAT rejected",
                   "token: Abcdef12345 rejected"):
        assert "[REDACTED]" in redact_secrets(secret), secret


def test_exact_values_that_begin_outside_ascii_are_masked() -> None:
    masker = Masker(values=["秘密の合言葉xyz", "ésame-42"])
    assert masker.mask("答えは秘密の合言葉xyz、またはésame-42。") == "答えは[REDACTED]、または[REDACTED]。"


_FRAGMENTS = [SLACK, GITHUB, AWS, "pw=hunter2", "パスワード：Hunter2", "暗証番号は 4711", "ﾄｰｸﾝは abcd1234",
              "postgres://ユーザー:pw9x@db", "taro@example.com", "090-1234-5678", "+81 90 1234 5678",
              "4111 1111 1111 1111", "-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----",
              "eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl", "Bearer abcdefghijklmnop1234", "ｐｗ９", "秘密の合言葉xyz",
              "hooks.slack.com/services/T000/B000/XXXXXXXX", "sk-ant-abcdefgh12", "password hunter2x",
              "在庫同期が失敗したときは", "トークン", "アクセスキー", "、", "。", " ", "\n", "(", "0", "_", "x"]


def test_the_lead_guard_changes_no_match() -> None:
    """The ``(?=[…])`` in front of the scan only skips text where no branch can begin: over random mixtures of
    every kind of match, Japanese prose and punctuation, the guarded scan finds exactly what the bare one does."""
    rng = random.Random(20261202)
    for masker in (Masker(), Masker(personal=True, cards=True, values=["pw9", "秘密の合言葉xyz", "]x"])):
        guarded = masker._pattern
        bare = re.compile(re.sub(r"^\(\?=\[.*?[^\\]\]\)", "", guarded.pattern, count=1, flags=re.S), re.ASCII)
        assert bare.pattern != guarded.pattern
        for _ in range(3000):
            text = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 8))).translate(_FOLD)
            found = [(m.span(), m.lastgroup) for m in guarded.finditer(text)]
            assert found == [(m.span(), m.lastgroup) for m in bare.finditer(text)], text


def test_exact_values_with_characters_that_fold_are_masked() -> None:
    """The scan runs on the folded text, so the values are folded too: ー, a full-width letter, an ideographic space."""
    masker = Masker(values=["ひみつのパスワード", "ｓ3cret-ｘ", "合言葉　山"])
    assert masker.mask("ひみつのパスワード と ｓ3cret-ｘ と 合言葉　山") == "[REDACTED] と [REDACTED] と [REDACTED]"


@pytest.mark.parametrize("space", ["\u00a0", "\u2002", "\u2009", "\u202f", "\u205f"])
def test_a_key_value_with_a_unicode_space_is_masked(space: str) -> None:
    assert redact_secrets(f"api_key{space}= abcdefg1234") == f"api_key{space}= [REDACTED]"


def _first_chars(items: Any, ignorecase: bool = False) -> set[int] | None:
    """The characters a parsed pattern can begin with (None: any, or it may match empty), under ``re.ASCII``."""
    from re import _constants as c  # type: ignore[attr-defined]

    spaces = {9, 10, 11, 12, 13, 32}
    categories = {c.CATEGORY_DIGIT: set(range(48, 58)), c.CATEGORY_SPACE: spaces,
                  c.CATEGORY_WORD: {ord(ch) for ch in string.ascii_letters + string.digits + "_"}}
    out: set[int] = set()
    for op, av in items:
        nullable = False
        if op is c.LITERAL:
            found: set[int] | None = {av}
        elif op is c.IN:
            found = set()
            for kind, value in av:
                if kind is c.LITERAL:
                    found.add(value)
                elif kind is c.RANGE:
                    found |= set(range(value[0], value[1] + 1))
                elif kind is c.CATEGORY:
                    found |= categories[value]
                else:  # a negated class
                    return None
        elif op is c.SUBPATTERN:
            found = _first_chars(av[3], ignorecase or bool(av[1] & re.IGNORECASE))
        elif op is c.BRANCH:
            branches = [_first_chars(branch, ignorecase) for branch in av[1]]
            found = None if None in branches else set().union(*branches)  # type: ignore[arg-type]
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            found, nullable = _first_chars(av[2], ignorecase), av[0] == 0
        elif op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            found, nullable = set(), True
        else:  # anything else (any character, a back reference): say "any", and the test fails
            return None
        if found is None:
            return None
        out |= found | ({ord(chr(x).swapcase()) for x in found if chr(x).isascii()} if ignorecase else set())
        if not nullable:
            return out
    return None  # it can match empty


@pytest.mark.parametrize("masker", [Masker(), Masker(personal=True, cards=True, values=["]x", "秘密", "\\y", "-z"])])
def test_every_branch_begins_with_a_lead(masker: Masker) -> None:
    """The parse of each branch: the characters it can begin with are all in the lead guard's class (a new
    pattern that begins with a space, a Japanese word or an optional part would be skipped where it matches)."""
    from re import _parser  # type: ignore[attr-defined]

    pattern = masker._pattern.pattern
    lead = re.compile(pattern[: pattern.index(")(?:") + 1], re.ASCII)
    (_, (_, branches)), = list(_parser.parse(pattern[pattern.index(")(?:") + 1 :], re.ASCII))
    for branch in branches:
        found = _first_chars(branch)
        assert found, branch
        assert not [chr(x) for x in found if not lead.match(chr(x))], branch


@pytest.mark.parametrize(("text", "expected"), [
    (f"{GITHUB}.db_password=hunter2x", "[REDACTED].db_password=[REDACTED]"),
    ("x-y.postgres://u:pw@db", "x-y.postgres://u:[REDACTED]@db"),
    ("1-postgres://u:pw@db", "1-postgres://u:[REDACTED]@db"),
    ("xoxb-1234-5678_" + "a" * 70 + "token=abcdef123456", "[REDACTED]_" + "a" * 70 + "token=[REDACTED]"),
    ("0-" + "a" * 70 + "://user:secretpw@host", "0-" + "a" * 70 + "://user:[REDACTED]@host"),  # a speed-up missed these
])
def test_a_key_or_scheme_inside_a_run_is_still_found(text: str, expected: str) -> None:
    """Where an earlier match ended inside a run, or a scheme follows a digit and a dash, a key or scheme within
    64 characters of its separator still begins a match."""
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("x_eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl", "x_[REDACTED]"),
    ("mail: .taro.yamada@example.com", "mail: .[email]"),
    ("%taro@example.com", "%[email]"),
])
def test_an_address_or_token_glued_inside_a_run_is_still_found(text: str, expected: str) -> None:
    assert redact_personal(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("_" * 5000 + "=", "_" * 5000 + "="),
    ("_" * 5000 + "token=abcdef12", "_" * 5000 + "token=[REDACTED]"),
    ("a+" * 2500 + "://", "a+" * 2500 + "://"),
    ("a+" * 2500 + "://u:pw@h", "a+" * 2500 + "://u:[REDACTED]@h"),
    ("a%" * 2500 + "@", "a%" * 2500 + "@"),
    ("a%" * 2500 + "@example.com", "[email]"),
    ("-eyJ" * 1250, "-eyJ" * 1250),
    ("token=" * 800 + "(", "token=" * 800 + "("),
    ("token=" * 800 + "x", "token=[REDACTED]"),
])
def test_long_runs_are_masked_as_short_ones(text: str, expected: str) -> None:
    """The hostile inputs of bench/hostile_inputs.py (a run of key, scheme, e-mail or JWT characters, values run on
    to a ``(``): what comes out; the bench times them."""
    assert redact_personal(text) == expected


_RUNS = ["_" * 70, "a." * 40, "a-" * 40, "-eyJ" * 20, "eyJaaaaaaa", "eyJaaaaaaaa", ".bbbbbbb", ".bbbbbbbb",
         "token=" * 12, "a@" * 20, "a://b:" * 10, "://", "@", ".", "=", ":", ": ", "'", "(", "[", "git@github.com",
         "a.co", "db_password", "Slack x"]


def _one_alternation(masker: Masker) -> re.Pattern[str]:
    """The masker's patterns in order in one alternation, a run pattern written whole (``start chars* last tail``):
    the scan it replaced, quadratic on long runs."""
    parts = [*redact._SECRETS, redact._CARD, redact._EMAIL, *redact._PHONES]
    bodies = dict(parts, exact="|".join(re.escape(v) for v in masker.values))
    branches = []
    for name in masker._order:
        body = bodies[name]
        if isinstance(body, redact._Run):
            body = f"{body.start}{body.chars}*{body.last}{body.tail}"
        elif name == "pem":
            body += redact._PEM_REST
        branches.append(f"(?P<{name}>{body})")
    return re.compile("|".join(branches), re.ASCII)


def test_the_run_patterns_match_as_one_alternation_would() -> None:
    """Found apart (each run read once), the key, URL, JWT and e-mail patterns give the matches one alternation of
    all patterns gives: the same names, spans and kept keys, also where a match ends inside a run or starts in one."""
    rng = random.Random(20270101)
    for masker in (Masker(), Masker(personal=True, cards=True, values=["pw9", "秘密の合言葉xyz", "a.b", "x@y"])):
        whole = _one_alternation(masker)
        for _ in range(3000):
            text = "".join(rng.choice(_FRAGMENTS + _RUNS) for _ in range(rng.randint(1, 8))).translate(_FOLD)
            expected = []
            for match in whole.finditer(text):
                name = match.lastgroup or ""
                kept = match.end(f"{name}_q") if f"{name}_q" in whole.groupindex else match.start()
                expected.append((name, match.start(), match.end(), kept))
            assert list(masker._matches(text)) == expected, text


@pytest.mark.parametrize(("text", "expected"), [
    ("https://ghp_abcd1234efgh:x-oauth-basic@github.com/o/r", "https://[REDACTED]:[REDACTED]@github.com/o/r"),
    ("https://s3cr3t-value:x@github.com", "https://[REDACTED]:[REDACTED]@github.com"),
    ("git clone https://xoxb-1-abcdef:pw@h", "git clone https://[REDACTED]:[REDACTED]@h"),
    ("postgres://u:pw@db", "postgres://u:[REDACTED]@db"),
    ("DB_URL_postgres://u:pw9x@db", "DB_URL_postgres://u:[REDACTED]@db"),
    ("9http://u:pw@h", "9http://u:[REDACTED]@h"),
])
def test_what_a_match_keeps_is_masked_too(text: str, expected: str) -> None:
    """A URL keeps its user to show what was there, and a token or a credential's own value can be that user (GitHub
    documents ``https://<token>:x-oauth-basic@``); a scheme glued to a word is still one."""
    masker = Masker(values=["s3cr3t-value"])
    assert masker.mask(text) == expected
    assert masker.mask(expected) == expected  # a fixed point: the guard checks its own output this way
