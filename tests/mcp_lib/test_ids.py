"""Slack ids, ts and permalinks: one definition, used by the trigger, the front and the Slack platform alike."""

from __future__ import annotations

import pytest

from mcp_lib import ids
from mcp_lib.errors import BadInput

GOOD = [
    ("https://acme.slack.com/archives/C0123ABCD/p1700000000123456", ids.Permalink("C0123ABCD", "1700000000.123456")),
    ("https://acme.enterprise.slack.com/archives/G01/p1700000100000200?thread_ts=1700000000.123456&cid=G01",
     ids.Permalink("G01", "1700000100.000200", "1700000000.123456")),
    ("https://agency.slack-gov.com/archives/C0123ABCD/p1700000000123456", ids.Permalink("C0123ABCD",
                                                                                        "1700000000.123456")),
]
BAD = {
    "plain http": "http://acme.slack.com/archives/C0123ABCD/p1700000000123456",
    "another host": "https://evil.example/archives/C0123ABCD/p1700000000123456",
    "look-alike host": "https://acme.slack.com.evil.example/archives/C0123ABCD/p1700000000123456",
    "9-digit seconds": "https://acme.slack.com/archives/C0123ABCD/p170000000123456",
    "channel too long": f"https://acme.slack.com/archives/C{'A' * 21}/p1700000000123456",
    "lower-case channel": "https://acme.slack.com/archives/c0123abcd/p1700000000123456",
    "thread_ts with a newline": "https://acme.slack.com/archives/C01/p1700000000123456?thread_ts=1700000000.123456%0A",
    "cid disagrees": "https://acme.slack.com/archives/C01/p1700000000123456?cid=C02",
    "no ts": "https://acme.slack.com/archives/C0123ABCD",
    "an unclosed [ in the host": "https://[acme.slack.com/archives/C0123ABCD/p1700000000123456",
}


@pytest.mark.parametrize(("url", "expected"), GOOD)
def test_message_links_are_parsed(url: str, expected: ids.Permalink) -> None:
    assert ids.parse_permalink(url) == expected


@pytest.mark.parametrize("url", BAD.values(), ids=BAD.keys())
def test_anything_else_is_one_bad_input_line_naming_where_and_the_url(url: str) -> None:
    with pytest.raises(BadInput) as caught:
        ids.parse_permalink(url, "event.url")
    assert str(caught.value).startswith(f"event.url {url!r} ") and "\n" not in str(caught.value)


def test_ids_and_ts_are_whole_values() -> None:
    assert ids.is_channel_id("C0123ABCD") and not ids.is_channel_id("C0123ABCD\n") and not ids.is_channel_id("C1")
    assert ids.is_ts("1700000000.123456") and not ids.is_ts("170000000.123456") and not ids.is_ts("1700000000.1")
    assert ids.permalink("https://acme.slack.com", "C01", "1700000100.000200", "1700000000.123456") == (
        "https://acme.slack.com/archives/C01/p1700000100000200?thread_ts=1700000000.123456&cid=C01")
