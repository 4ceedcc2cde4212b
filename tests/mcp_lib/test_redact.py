"""Secrets and personal data are masked, also when they touch Japanese text or are written full-width."""

from __future__ import annotations

import pytest

from mcp_lib.redact import redact_deep, redact_personal, redact_secrets

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


@pytest.mark.parametrize("text", ["git@github.com:acme/shop.git", "2025-05-15", "注文番号 100234", "v1.2.3",
                                  "SKU-0012-3456"])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_personal(redact_secrets(text)) == text


def test_deep_redaction_walks_json() -> None:
    value = {"items": [{"text": f"see {SLACK}", "n": 1}], "ok": True}
    assert redact_deep(value) == {"items": [{"text": "see [REDACTED]", "n": 1}], "ok": True}
