"""mcp_lib.cutting: each way of cutting keeps what its name says, and says what it left out.

Slack's parts (``split_markdown``, ``slack_len``) are tested with the payloads they make (tests/agent/slack/
test_blocks.py); a budget cut in estimated tokens with the agent's estimate (tests/agent/core/test_messages.py).
"""

from __future__ import annotations

import pytest

from mcp_lib.cutting import (
    MASK_MARGIN,
    TRUNCATION_MARKER,
    excerpt,
    keep_start,
    keep_start_and_end,
    keep_start_masked,
    keep_start_within_tokens,
    shorten_at_word,
    slack_len,
    split_line,
    split_markdown,
    squash_whitespace,
    without_marker,
)

GITHUB_SECRET = "ghp_" + "A1b2C3d4E5" * 3 + "xyz123"
MARKER = "\n…[cut {n}]"


def test_keep_start_counts_what_it_left_out_and_cutting_again_does_not_stack_markers() -> None:
    assert keep_start("abc", 3, MARKER) == "abc"
    once = keep_start("a" * 100, 10, MARKER)
    assert once == "a" * 10 + "\n…[cut 90]"
    assert keep_start(without_marker(once, MARKER), 5, MARKER) == "a" * 5 + "\n…[cut 5]"


def test_keep_start_within_tokens_cuts_near_the_budget_never_below_the_minimum() -> None:
    def estimate(text: str) -> int:  # three ASCII characters a token, one token for any other
        ascii_chars = len(text.encode("ascii", "ignore"))
        return ascii_chars // 3 + len(text) - ascii_chars

    for text in ("x" * 5000, "在庫" * 2000, ("stock 在庫 " * 1000)):
        capped = keep_start_within_tokens(text, 600, estimate, MARKER, minimum=100)
        assert 540 < estimate(without_marker(capped, MARKER)) <= 600 and capped.endswith("]")
    assert keep_start_within_tokens("short", 600, estimate, MARKER) == "short"
    assert len(without_marker(keep_start_within_tokens("x" * 2000, 1, estimate, MARKER, minimum=100), MARKER)) == 100


def test_keep_start_masked_masks_before_it_cuts() -> None:
    text, cut = keep_start_masked("x" * 90 + GITHUB_SECRET + " and some more text", 100)
    assert cut and "ghp_" not in text and "A1b2" not in text
    assert keep_start_masked("short", 100) == ("short", False)


def test_a_fake_marker_with_a_huge_count_is_text_not_a_crash() -> None:
    """A service's text ending in a marker counting 5000 digits (past Python's int parsing limit): no ValueError
    that would turn the whole tool result into an error, the claim is only cut as text."""
    fake = TRUNCATION_MARKER.format(n="9" * 5000)
    text, cut = keep_start_masked("hello" + fake, 100)
    assert cut and text.startswith("hello") and text.endswith(TRUNCATION_MARKER.format(n=len(fake) - 95))
    assert keep_start_masked("x" + TRUNCATION_MARKER.format(n=12), 100) == ("x" + TRUNCATION_MARKER.format(n=12), True)


def test_masking_reads_only_the_limit_plus_the_margin() -> None:
    """Cut, then mask: the cost is what is kept, not the 5 MB that was read (issue "Honest benches")."""
    seen: list[int] = []

    def mask(text: str) -> str:
        seen.append(len(text))
        return text

    text, cut = keep_start_masked("あ" * 5_000_000, 6000, mask=mask)
    assert cut and seen == [6000 + MASK_MARGIN]
    assert text == "あ" * 6000 + TRUNCATION_MARKER.format(n=5_000_000 - 6000)


def test_a_platforms_cut_is_masked_with_the_runs_mask_and_scanned_again_by_the_limits() -> None:
    """``ctx.cut`` masks with the run's mask (the credential values too, not only the patterns), and the result's
    limits scan what they keep again: one scan is not a fixed point, the second catches a key uncovered by the
    first's replacement."""
    from mcp_lib.core import ToolContext
    from mcp_lib.redact import Masker
    from mcp_lib.result import Limits, Result, apply_limits

    seen: list[int] = []
    masker = Masker(values=["held-credential-Zq81x"])

    def run_mask(text: str) -> str:
        seen.append(len(text))
        return masker.mask(text)

    limits = Limits(max_field_chars=1500, mask=run_mask)
    cut, was_cut = ToolContext(None, None, limits=limits).cut("held-credential-Zq81x " + "z" * 10_000, 6000)
    assert was_cut and "held-credential" not in cut and seen == [6000 + MASK_MARGIN]
    apply_limits(Result(item={"body": cut}), limits)
    assert seen[1:3] == [len("body"), 1500 + MASK_MARGIN]  # the key (keys are masked too), then the kept text


@pytest.mark.parametrize("offset", [-40, -10, -3, -1, 0, 1, 10])
@pytest.mark.parametrize(("secret", "masked"), [
    (GITHUB_SECRET, "[REDACTED]"), ("ghp_fakefakefake", "[REDACTED]"), ("password=hunter2", "password=[REDACTED]"),
    ("postgres://u:pw@db", "postgres://u:[REDACTED]@db")])
def test_no_secret_straddles_the_cut_unmasked(offset: int, secret: str, masked: str) -> None:
    """Whatever the cut goes through, the text kept is the cut of the fully masked text."""
    before, after = "x" * (1000 + offset - len(secret) // 2) + " ", " " + "y" * 100_000
    text, cut = keep_start_masked(before + secret + after, 1000)
    assert cut and text.split("…[truncated")[0] == (before + masked + after)[:1000]


def test_keep_start_and_end_keeps_a_logs_end() -> None:
    assert keep_start_and_end("abc", 10) == ("abc", 0)
    cut, left_out = keep_start_and_end("x" * 100 + "END", 30)
    assert cut.endswith("END") and left_out == 73 and "中略 73 文字" in cut


def test_an_excerpt_marks_each_side_where_text_was_left_out() -> None:
    text = "0123456789"
    assert excerpt(text, 20) == text
    assert excerpt(text, 4) == "0123…"
    assert excerpt(text, 4, start=3) == "…3456…"
    assert excerpt(text, 4, start=6) == "…6789"
    assert excerpt(text, 4, start=-5) == "0123…"
    assert excerpt("", 4) == ""


def test_shorten_at_word_cuts_after_a_sentence_or_a_space_in_slacks_count() -> None:
    assert shorten_at_word("  short  ", 10) == "short"
    assert shorten_at_word("在庫同期が遅れています。確認手順を教えてください", 16) == "在庫同期が遅れています。…"
    assert shorten_at_word("stock sync is late today", 15) == "stock sync is…"
    assert shorten_at_word("👍" * 10, 7) == "👍👍👍…"  # two units each: never half an emoji


def test_a_character_wider_than_the_budget_goes_alone_and_the_cut_moves_on() -> None:
    # a budget of 1 once looped forever on a 2-unit emoji (a fence line longer than the part left a budget of 1)
    assert split_line("😀😀", 1) == ["😀", "😀"]
    assert split_line("👍🏽x", 1) == ["👍🏽", "x"]  # the skin tone stays with its hand
    assert shorten_at_word("😀😀😀", 2) == "😀…"


@pytest.mark.parametrize("line", ["a" + "\u0301" * 5000, "a" + "\u200d" * 5000, "\U0001f3fb" * 5000])
def test_a_grapheme_wider_than_the_budget_is_cut_at_the_windows_end(line: str) -> None:
    """A letter and 5000 combining marks (the model's answer): the search for a break went back over the whole
    window for each single character it then cut off -- 4000 pieces, and the budget times the length in time."""
    pieces = split_line(line, 1000)
    assert "".join(pieces) == line and len(pieces) <= 12 and all(slack_len(p) <= 1000 for p in pieces)


@pytest.mark.parametrize("line", [" " * 20_000 + "x", "---" + " " * 20_000 + "x", "|---" + " " * 20_000 + "x"])
def test_a_line_of_spaces_under_a_table_head_is_told_from_a_rule_in_linear_time(line: str) -> None:
    """The model's answer: a ``|`` line, then 20,000 spaces and a letter. The table-rule pattern shared the spaces
    out between its ``\\s*`` anew for every way to fail: 3.4 s for this one line, growing with the square."""
    parts = split_markdown(f"|a|b|\n{line}", 12_000)
    assert parts[0].startswith("|a|b|") and parts[-1].endswith("x")


def test_squash_whitespace_puts_a_text_on_one_line() -> None:
    assert squash_whitespace("  在庫\n\n同期 \t が\r\n遅い ") == "在庫 同期 が 遅い"
    assert squash_whitespace("\n \t") == ""
