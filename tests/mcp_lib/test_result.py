"""mcp_lib.result's shortening of snippets and titles (the envelope's limits are tested through the tools)."""

from __future__ import annotations

from mcp_lib.result import excerpt


def test_an_excerpt_marks_each_side_where_text_was_left_out() -> None:
    text = "0123456789"
    assert excerpt(text, 20) == text
    assert excerpt(text, 4) == "0123…"
    assert excerpt(text, 4, start=3) == "…3456…"
    assert excerpt(text, 4, start=6) == "…6789"
    assert excerpt(text, 4, start=-5) == "0123…"
    assert excerpt("", 4) == ""
