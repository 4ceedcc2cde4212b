"""Held credential values next to and inside the secrets the patterns know: a short held value (any variable
named like a credential is held, ``ACCESS_TOKEN_TTL=3600`` too) must not split a pattern's secret so that the rest
shows, and a held value glued to a key is masked with it.
"""

from __future__ import annotations

import pytest

from mcp_lib.external import credential_values
from mcp_lib.redact import Masker
from tests.fakes.growi import page_as_the_model_reads_it

# A held "credential" an ordinary environment gives: ACCESS_TOKEN_TTL reads as a credential's name
TTL_ENV = {"ACCESS_TOKEN_TTL": "3600"}
TTL = "3600"
URL = "https://wiki.example.com"
TOKEN = "test-growi-token-Vv93"
GOOGLE = "AIza" + "g" * 35
AWS = "AKIA" + "Q7" * 8

# (text, the secret a pattern masks whole without the held value) -- each secret holds the value 3600
_HOLDING = [
    ("password: Summer3600!xyzw", "Summer3600!xyzw"),
    ("db_password=Summer3600", "Summer3600"),
    ("password Summer3600x", "Summer3600x"),
    ("パスワード：abcd3600efgh", "abcd3600efgh"),
    ("key AKIAQQQQQQ3600QQQQQQ here", "AKIAQQQQQQ3600QQQQQQ"),
    ("ghp_abcdefgh3600ijklmnopqrstuvwxyz012345", "ghp_abcdefgh3600ijklmnopqrstuvwxyz012345"),
    ("token=ghp_ab3600cdefghijklmnopqrstuvwxyz0123", "ghp_ab3600cdefghijklmnopqrstuvwxyz0123"),
    ("Authorization: Bearer abcdefghijklmnop3600qrstuvwxyz", "abcdefghijklmnop3600qrstuvwxyz"),
    ("eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abcdefgh3600ijkl", "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abcdefgh3600ijkl"),
    ("sk-ant-api03-abcdefgh3600ijklmnop", "sk-ant-api03-abcdefgh3600ijklmnop"),
]


def shown_pieces(secret: str, value: str) -> list[str]:
    """The parts of ``secret`` beside the held ``value`` long enough to matter (4 characters or more)."""
    return [piece for piece in secret.split(value) if len(piece) >= 4]


def growi_page(body: str, extra_env: dict[str, str]) -> str:
    return page_as_the_model_reads_it(body, token=TOKEN, url=URL, env=extra_env)


# -- the exact scan first: a held value inside a pattern's secret splits it ---------------------------------
def test_the_environment_holds_a_short_value() -> None:
    """What makes the next tests ordinary: any variable named like a credential is held by value, 3600 too."""
    assert credential_values(TTL_ENV) == [TTL]


@pytest.mark.parametrize(("text", "secret"), _HOLDING)
def test_the_patterns_alone_mask_each_secret_whole(text: str, secret: str) -> None:
    """Without held values every one of these secrets is masked by its pattern (what the next test loses)."""
    masked = Masker().mask(text)
    assert all(piece not in masked for piece in shown_pieces(secret, TTL))


@pytest.mark.parametrize(("text", "secret"), _HOLDING)
def test_a_held_value_inside_a_secret_does_not_unmask_the_rest(text: str, secret: str) -> None:
    """A held value (3600) inside a password, an AWS key, a GitHub token, a JWT: each masked whole by its pattern
    (replacing 3600 first would leave ``password: Summer[REDACTED]!xyzw``, a value running into ``[`` that kv reads
    as code, and ``AKIAQQQQQQ[REDACTED]QQQQQQ``, a key short of its 16 characters)."""
    masked = Masker(values=[TTL]).mask(text)
    assert all(piece not in masked for piece in shown_pieces(secret, TTL)), masked


def test_a_wiki_page_with_a_key_holding_the_ttl_never_shows_the_key() -> None:
    """End to end: an environment with ACCESS_TOKEN_TTL=3600, a Growi page quoting an AWS key and a password
    that hold 3600. The model must read neither."""
    shown = growi_page("移行メモ AKIAQQQQQQ3600QQQQQQ / db_password=Summer3600 終わり", TTL_ENV)
    assert "AKIAQQQQQQ" not in shown and "Summer" not in shown


def test_a_held_value_beside_a_key_is_still_masked_whole() -> None:
    """The value never survives, glued to a key or inside a password (folded full-width forms included); a key
    glued after it is the one-scan limit of tests/mcp_lib/test_cutting_masked.py."""
    mask = Masker(values=["held-credential-Zq81x"]).mask
    wide = "ｈｅｌｄ－ｃｒｅｄｅｎｔｉａｌ－Ｚｑ８１ｘ"
    for text in ("held-credential-Zq81x" + AWS,
                 f"前{wide}{AWS}後", f"ｐａｓｓｗｏｒｄ＝{wide}", f"{GOOGLE}held-credential-Zq81x{AWS}"):
        masked = mask(text)
        assert "Zq81x" not in masked and "Ｚｑ８１ｘ" not in masked, masked
