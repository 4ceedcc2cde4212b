"""Hostile tests of :class:`mcp_lib.cutting.Masked`: a platform's cut (``ctx.cut``) is not masked again by the
result's limits, so the mask must be a fixed point (a replacement can uncover a key its neighbour hid) and what is
kept must be the cut of the masked whole text; and the rest of the masking a tool result goes through.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest

from mcp_lib.core import ToolContext
from mcp_lib.cutting import MASK_MARGIN, TRUNCATION_MARKER, Masked, keep_start_masked
from mcp_lib.platforms import growi
from mcp_lib.redact import Masker, redact_secrets
from mcp_lib.registry import Registry
from mcp_lib.result import Limits, Result, apply_limits
from tests.fakes.clock import FakeClock
from tests.fakes.growi import FakeGrowi

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
    """getPage of a page with ``body``, end to end through the registry (its credential mask, its limits)."""
    fake = FakeGrowi(token=TOKEN, url=URL)
    fake.add_page("/手順/罠", body)
    env = {"GROWI_URL": URL, "GROWI_ACCESS_TOKEN": TOKEN}
    config = growi.load_config(env)
    assert config is not None
    registry = Registry(env=env, clients={"growi": growi.make_client(config, transport=fake.transport())},
                        clock=FakeClock(wall=1_800_000_000.0), platforms={"growi": growi.PLATFORM})
    result = registry.call("growi_getPage", {"path": "/手順/罠"})
    assert result.status == "ok", result.message
    return result.to_json()


# -- keys hiding each other: masked to a fixed point ---------------------------------------------------------
def test_a_key_freed_by_an_earlier_replacement_is_masked() -> None:
    """``AIza…`` (fixed length, no lookahead) glued to an AWS key: the AWS key's lookbehind sees a letter, not
    ``]``, until the first is replaced. An attacker who can write beside a pasted key arranges this."""
    assert AWS not in growi_page(f"設定メモ {GOOGLE}{AWS} ここまで")


def test_a_key_followed_by_a_replaced_token_is_masked() -> None:
    """The AWS key's lookahead sees the ``g`` of a GitHub token until that one is replaced."""
    assert AWS not in through_limits(f"{AWS}ghp_abcdef tail", run_mask(), 6000, 20_000)


def test_the_run_mask_is_a_fixed_point() -> None:
    """What Masked rests on: masking what is masked finds nothing new (a chain of keys hiding each other too)."""
    mask = run_mask()
    chain = GOOGLE * 6 + AWS  # each AIza key hidden by the one before it until that one is replaced
    for text in (GOOGLE + AWS, CREDENTIAL + AWS, AWS + "ghp_abcdef", GOOGLE + "dbpassword=hunter2222", chain):
        once = mask(text)
        assert mask(once) == once and "AKIA" not in once and "AIza" not in once


def test_a_credential_is_not_swallowed_by_a_patterns_match() -> None:
    """A fixed-length pattern (``AIza`` + 35) ending inside a held credential: the credential is masked whole
    first, so none of it is left beside the pattern's replacement."""
    masked = run_mask()("AIza" + "g" * 30 + CREDENTIAL)
    assert CREDENTIAL[5:] not in masked and "[REDACTED]" in masked


def test_what_the_platform_cut_keeps_is_the_cut_of_the_masked_page() -> None:
    """``password=hunter22(x)`` reads as code (the value is followed by ``(``), so the whole page shows it. Cut
    right before ``(``, the model reads the same characters it would read uncut: the cut of the masked page, not a
    second judgement of a text taken out of its context."""
    lead = "x" * (6000 - len("password=hunter22"))
    page = growi_page(lead + "password=hunter22(x)" + "y" * 100)
    assert "password=hunter22…[truncated: 103 more characters]" in page


# -- what held -------------------------------------------------------------------------------------------
def test_no_string_operation_makes_a_masked_text() -> None:
    """Only keep_start_masked makes a Masked: whatever is joined to one, formatted, sliced or read back from
    JSON is a plain str, scanned again by the result's limits."""
    # a Masked made by hand has no ``by``: cutting it fails (an error result), it is never taken as masked
    with pytest.raises(AttributeError):
        keep_start_masked(Masked(CREDENTIAL), 100, run_mask())
    first, _ = keep_start_masked("harmless " * 10, 40, run_mask())
    assert type(first) is Masked
    made = [first + CREDENTIAL, CREDENTIAL + first, f"{first}{CREDENTIAL}", str.format("{}{}", first, CREDENTIAL),
            first.replace("harmless", CREDENTIAL), first[:10], first * 2, "".join([first, CREDENTIAL]),
            first.upper(), first.strip(), str(first), json.loads(json.dumps(first)), str.__mod__("%s", first),
            first.__add__(CREDENTIAL), Masked("{}%s").format(CREDENTIAL), Masked("%s") % CREDENTIAL,
            first.center(200, "x"), first.join(["a", "b"]), first[:], first.translate({}), format(first, "")]
    assert all(type(text) is str for text in made)
    # the only ways a Masked comes back are formats with nothing to format: the very same text
    assert first.format() is first and first % () is first
    assert all(type(text) is str for text in [*first.split(" "), *first.partition("s"), *first.splitlines()])
    assert CREDENTIAL not in keep_start_masked(first + CREDENTIAL, 10_000, run_mask())[0]


def test_copies_keep_their_mask_and_nothing_else() -> None:
    """A deep copy (``model_copy(deep=True)``) is the same masked text by the same mask."""
    mask = run_mask()
    first, _ = keep_start_masked(CREDENTIAL + " x", 100, mask)
    deep = Result(item={"body": first}).model_copy(deep=True).item or {}
    for copied in (copy.copy(first), copy.deepcopy(first), deep["body"]):
        assert copied == first and CREDENTIAL not in copied


def test_another_mask_never_passes_for_the_run_mask() -> None:
    """Two maskers of the same values, a partial, a lambda or the patterns alone: each scans again."""
    weak = Masker().mask
    masks = [Masker(values=[CREDENTIAL]).mask, functools.partial(weak), lambda text: weak(text), redact_secrets]
    for mask in masks:
        first, _ = keep_start_masked(CREDENTIAL + " " + "z" * 3000, 2000, weak)
        assert CREDENTIAL in first
        assert CREDENTIAL not in keep_start_masked(first, 1500, run_mask())[0]
        assert (first.by == run_mask()) is False and (mask == run_mask()) is False


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
