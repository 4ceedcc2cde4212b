"""The egress guard across a stream's deltas (agent.slack.stream.GuardedText): whatever the split, what reaches
Slack is, piece by piece, a beginning of what the guard makes of the whole text, so that the stop adds the rest
(AnswerStream.deliver)."""

from __future__ import annotations

import random

import pytest

from agent import guard
from agent.slack.stream import GuardedText

SECRET = "xoxb-123456789012-123456789012-abcdefABCDEF1234"
HOSTILE = [
    f"トークンは {SECRET} です。これで Slack に投稿できます。以上が手順になります。よろしくお願いします。" * 2,
    "password: hunter2secret を設定してから再起動してください。設定画面の下の方にある保存ボタンを押します。" * 2,
    "パスワードは、Zq8xYw7v です。 " + "念のため、あとで変更してください。" * 6,
    "皆さん <!channel> に知らせます。 <@U0SUZUKI|鈴木> さんと @here の人も。" + "詳しくはスレッドで。" * 8,
    "カード 4111 1111 1111 1111 は使えません。 " + "別のカードで試してください。" * 6,
    "詳しくは [在庫 同期 の 手順](https://evil.example/page?token=abc#frag) と ![img](http://x/y.png) を。" * 2,
    "リンク <https://wiki.example/a b|見出し 付き> と www.example.com/path?q=1 を見てください。" * 3,
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789 を送ります。 " + "以上です。" * 10,
    "AWS_SECRET_ACCESS_KEY = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY で、" + "あとは待つだけです。" * 8,
    "電話は +81 90 1234 5678 か 03-1234-5678 へ。 " + "受付は平日のみです。" * 8,
    "パスワードは、Zq8xYw7vQ です。カードは4111111111111111、電話は09012345678です。" + "受付は平日のみです。" * 8,
    "連絡は<!here>で、担当は<@U0SUZUKI|鈴木>さん。トークン：ghp_abcdefghijklmnopqrstuvwxyz0123456789です。" * 2,
]


def split(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 40))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


@pytest.mark.parametrize("text", HOSTILE)
def test_any_split_streams_exactly_what_the_guard_makes_of_the_whole(text: str) -> None:
    whole = guard.current().markdown(text)
    assert whole != text or "以上" in text  # the corpus has something to catch
    rng = random.Random(text)
    for _ in range(60):
        stream, shown = GuardedText(hold=40), ""
        for delta in split(text, rng):
            stream.feed(delta)
            if rng.random() < 0.7:
                shown += stream.take()
                assert whole.startswith(shown), (shown, whole)  # never a piece the whole would not show
        assert whole.startswith(shown) and not stream.broken  # what the stop needs to add the rest


def test_a_secret_split_in_one_character_deltas_never_shows() -> None:
    text = f"設定は {SECRET} と <!channel> です。" + "続きの説明です。" * 20
    stream, pieces = GuardedText(hold=40), []
    for char in text:
        stream.feed(char)
        pieces.append(stream.take())
    shown, whole = "".join(pieces), guard.current().markdown(text)
    assert SECRET not in whole and "<!channel>" not in whole and whole.startswith(shown) and not stream.broken
    assert all(SECRET[:12] not in p for p in pieces)


def test_text_is_held_back_while_it_could_still_become_something_else() -> None:
    stream = GuardedText(hold=40)
    stream.feed("短い前置き。")
    assert stream.take() == ""  # shorter than the hold: a tool call's preamble never shows
    stream.feed("<@U0SUZUKI|" + "x " * 60)  # a mention still open: nothing inside it is released
    assert "<@" not in stream.take()


def test_an_answer_longer_than_one_message_stops_streaming_at_the_limit() -> None:
    stream = GuardedText(hold=10, limit=100)
    stream.feed("あいう えお。" * 40)
    assert len(stream.take()) <= 100


@pytest.mark.parametrize(("first", "word"), [("[", "a "), ("", "< ")])
def test_text_that_stays_open_is_not_searched_again_at_every_delta(first: str, word: str) -> None:
    """An answer opening "[" (or "<" every word) and never closing it: every delta searched every word start again,
    a copy of the text each -- 4,000 words took 4.5 s in the model's stream."""
    stream = GuardedText()
    stream.feed(first)
    for _ in range(4_000):
        stream.feed(word)
        assert stream.take() == ""


def test_text_that_closes_after_a_long_search_is_released_once_it_grew_a_quarter() -> None:
    stream = GuardedText()
    stream.feed("[" + "a " * 4_000)
    assert stream.take() == ""
    stream.feed("] 閉じた")
    assert stream.take() == ""  # still within the hold
    stream.feed(" です" * 1_000)
    assert stream.take().startswith("[a a ")
