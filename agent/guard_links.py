"""Where rendered text has links, as the egress guard cleans them, found in time linear in the text.

:data:`LINKS` is what a renderer may read as a link or an image: markdown's ``![alt](src)`` and ``[label](url
"title")``, Slack's ``<url|label>`` and a bare URL. Searched for as it is, it reads from every ``[`` (or ``<``) on
to the ``]``, ``)`` or ``>`` it needs, so text of links that never close (``[x](`` repeated) took time quadratic
in its length: 4 s of CPU at 20,000 characters. :func:`link_matches` finds the same matches, reading the text once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_URL_CHARS = r"[A-Za-z0-9\-._~:/?#@!$&*+,;=%]"  # ASCII: 「…はhttps://wiki/xを参照」 ends before を
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*:"
_BARE = rf"(?P<bare>(?<![A-Za-z0-9+.\-/@])(?:https?://|www\.){_URL_CHARS}+)"  # a bare URL (Slack links www. too)
LINKS = re.compile(
    r"!\[(?P<alt>[^\]\n]*)\]\((?P<image>[^)\n]*)\)"  # an image: never shown
    r"|\[(?P<label>[^\]\n]*)\]\(\s*<?(?P<href>[^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)"  # [label](url "title")
    rf"|<(?P<slack>{_SCHEME}[^|>\s]*)(?:\|(?P<slack_label>[^>]*))?>"  # Slack's <url|label>
    rf"|{_BARE}",
    re.IGNORECASE,
)
_START = re.compile(rf"[!\[<]|{_BARE}", re.IGNORECASE)  # where a match may begin
_SLACK_SCHEME = re.compile("<" + _SCHEME, re.IGNORECASE)
# Where a part of LINKS stops reading: a label, an image's source, a URL, a title, Slack's URL and label
_LABEL_END, _SOURCE_END, _URL_END = re.compile(r"[\]\n]"), re.compile(r"[)\n]"), re.compile(r"[)>\s]")
_TITLE_END, _SLACK_URL_END, _SLACK_LABEL_END = re.compile(r"[\"\n]"), re.compile(r"[|>\s]"), re.compile(">")
_NON_SPACE = re.compile(r"\S")


class _NextChar:
    """Where the next character of a class stands, at or after a position (the text's length if none). The last
    search is remembered: asked in increasing positions, it reads the text once."""

    def __init__(self, text: str, chars: re.Pattern[str]) -> None:
        self.text = text
        self.chars = chars
        self.since, self.found = 0, -1

    def __call__(self, pos: int) -> int:
        if not self.since <= pos <= self.found:  # else no character of the class stands in pos..found
            match = self.chars.search(self.text, pos)
            self.since, self.found = pos, match.start() if match else len(self.text)
        return self.found


def link_matches(text: str) -> Iterator[re.Match[str]]:
    """The matches of ``LINKS.finditer(text)``, in time linear in the text.

    The pattern is tried only where it matches. Each of its repeats reads on to the first character it excludes, and
    giving characters back never helps (what follows needs such a character), so whether it matches is decided by
    where those characters stand: a label's "]" or newline, a source's ")" or newline, a URL's ")", ">" or space, a
    title's quote, Slack's "|" or ">". Each is searched for by its own :class:`_NextChar`; every opener asks at or
    after where the one before it asked, so each search reads the text once, where the pattern read it from every
    opener to a closer far away or none."""
    size = len(text)
    label_end, source_end = _NextChar(text, _LABEL_END), _NextChar(text, _SOURCE_END)
    url_start, url_end, after_url = _NextChar(text, _NON_SPACE), _NextChar(text, _URL_END), _NextChar(text, _NON_SPACE)
    title_end, after_title = _NextChar(text, _TITLE_END), _NextChar(text, _NON_SPACE)
    slack_url_end, slack_label_end = _NextChar(text, _SLACK_URL_END), _NextChar(text, _SLACK_LABEL_END)

    def image(pos: int) -> bool:  # ![alt](source) at "!"
        label = label_end(pos + 2) if text.startswith("![", pos) else size
        return text.startswith("](", label) and text.startswith(")", source_end(label + 2))

    def link(pos: int) -> bool:  # [label](<url> "title") at "["
        label = label_end(pos + 1)
        url = url_start(label + 2) if text.startswith("](", label) else size
        if url == size or text[url] in ")>":
            return False
        end = url_end(url + 1 if text[url] == "<" else url)  # the URL is "<" itself if nothing else follows it
        rest = end + 1 if text.startswith(">", end) else end
        close = after_url(rest)
        if close > rest and text.startswith('"', close):  # a title: only with it can a ")" follow
            quote = title_end(close + 1)
            close = after_title(quote + 1) if text.startswith('"', quote) else size
        return text.startswith(")", close)

    def slack(pos: int) -> bool:  # <scheme:url|label> at "<"
        scheme = _SLACK_SCHEME.match(text, pos)
        end = slack_url_end(scheme.end()) if scheme else size
        if text.startswith("|", end):
            return slack_label_end(end + 1) < size
        return text.startswith(">", end)

    found = _START.search(text)
    while found:
        pos = found.start()
        opener = text[pos]
        if opener == "!":
            matches = image(pos)
        elif opener == "[":
            matches = link(pos)
        elif opener == "<":
            matches = slack(pos)
        else:
            matches = True  # a bare URL, which the pattern reads once
        match = LINKS.match(text, pos) if matches else None
        if match:
            yield match
        found = _START.search(text, match.end() if match else pos + 1)
