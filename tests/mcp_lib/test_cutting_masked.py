"""Hostile tests of a tool result's masking through its cuts: the platform's cut (``ctx.cut``, the run's mask
within the cut plus the margin), then the result's limits, which scan the kept text again with the same mask.
One scan is not a fixed point (a replaced key can uncover one its neighbour hid): the second scan catches one such
step, and the known limits are strict xfails.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_lib.core import ToolContext
from mcp_lib.cutting import MASK_MARGIN, TRUNCATION_MARKER
from mcp_lib.redact import Masker
from mcp_lib.result import Limits, Result, apply_limits
from tests.fakes.growi import page_as_the_model_reads_it

CREDENTIAL = "held-credential-Zq81x"
AWS = "AKIA" + "Q7" * 8
GOOGLE = "AIza" + "g" * 35
URL = "https://wiki.example.com"
TOKEN = "test-growi-token-Vv93"


def run_mask() -> Any:
    """The registry's mask: the patterns and the exact value of a credential the process holds."""
    return Masker(values=[CREDENTIAL]).mask


def through_limits(text: str, mask: Any, platform_limit: int, field_limit: int) -> str:
    """A platform's cut (``ctx.cut``) of ``text``, then the result's limits, as Tool.invoke applies them."""
    limits = Limits(max_field_chars=field_limit, max_result_chars=10 * field_limit + 10_000, mask=mask)
    ctx = ToolContext(None, None, limits=limits)
    cut, _ = ctx.cut(text, platform_limit)
    return (apply_limits(Result(item={"body": cut}), limits).item or {})["body"]


def growi_page(body: str) -> str:
    return page_as_the_model_reads_it(body, token=TOKEN, url=URL)


# -- keys hiding each other ------------------------------------------------------------------------------
def test_a_key_freed_by_an_earlier_replacement_is_masked() -> None:
    """``AIza…`` (fixed length, no lookahead) glued to an AWS key: the AWS key's lookbehind sees a letter, not
    ``]``, until the first is replaced; the result's second scan sees the ``]``."""
    assert AWS not in growi_page(f"設定メモ {GOOGLE}{AWS} ここまで")


def test_a_key_followed_by_a_replaced_token_is_masked() -> None:
    """The AWS key's lookahead sees the ``g`` of a GitHub token until that one is replaced."""
    assert AWS not in through_limits(f"{AWS}ghp_abcdef tail", run_mask(), 6000, 20_000)


@pytest.mark.xfail(strict=True, reason="known limit: one scan is not a fixed point; a field scanned once (not "
                                       "cut by its platform) keeps a key its neighbour hid")
def test_one_scan_masks_keys_hiding_each_other() -> None:
    assert AWS not in run_mask()(GOOGLE + AWS)


@pytest.mark.xfail(strict=True, reason="known limit: a fixed-length pattern's match (AIza + 35) can end inside a "
                                       "held credential; the exact value is only tried where a match begins")
def test_a_credential_is_not_swallowed_by_a_patterns_match() -> None:
    assert CREDENTIAL[5:] not in run_mask()("AIza" + "g" * 30 + CREDENTIAL)


# -- what held -------------------------------------------------------------------------------------------
def test_a_fake_marker_neither_hides_nor_lets_through() -> None:
    """Attacker text ending in the marker: what is before it is masked whatever it claims, in both passes; a
    credential cut in two by the fake marker is never read whole; the count only adds to the claim."""
    mask = run_mask()
    fake = TRUNCATION_MARKER.format(n=999)
    for text in (CREDENTIAL + fake, "a" * 5990 + CREDENTIAL + fake, CREDENTIAL[:9] + fake + CREDENTIAL[9:] + fake,
                 CREDENTIAL + fake + fake, "a" * 7000 + CREDENTIAL + fake):
        body = through_limits(text, mask, 6000, 20_000)
        assert CREDENTIAL not in body and body.count(fake.split("999")[0]) <= text.count(fake.split("999")[0])
        assert CREDENTIAL not in through_limits(text, mask, 6000, 1500)
    assert through_limits("x" + fake, mask, 6000, 20_000) == "x" + fake


@pytest.mark.parametrize("offset", [-40, -21, -10, -1, 0, 1, 10])
@pytest.mark.parametrize(("platform_limit", "field_limit"), [(6000, 20_000), (6000, 1500), (1000, 1000),
                                                             (300, 1500), (6000, 5000)])
def test_a_credential_across_either_cut_is_never_read(offset: int, platform_limit: int, field_limit: int) -> None:
    """The platform's cut, then the result's (larger, smaller, shrunk to fit): a credential across either is
    masked whole, and none of its characters past the platform's cut is shown."""
    for cut in (platform_limit, field_limit):
        text = "w " * ((cut + offset) // 2) + CREDENTIAL + " " + "v" * (2 * MASK_MARGIN)
        body = through_limits(text, run_mask(), platform_limit, field_limit)
        assert CREDENTIAL not in body and CREDENTIAL[-8:] not in body and CREDENTIAL[:12] not in body


def test_a_growi_page_holding_the_token_never_shows_it() -> None:
    """The registry's own credential (the Growi token) in a page, at the start, across the cut, past it."""
    for body in (f"token {TOKEN}", "あ" * 5990 + TOKEN, "あ" * 5999 + TOKEN + "い" * 9000, TOKEN * 3000):
        shown = growi_page(body)
        assert TOKEN not in shown and TOKEN[:12] not in shown
