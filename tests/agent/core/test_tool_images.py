"""A tool's images reach Claude as image blocks inside its tool_result, within the run's room for tool images,
and count in the request estimate by what the model sees, not by their base64 text."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tokens import IMAGE_TOKENS, request_tokens
from agent.core.tools import RegistryTools
from mcp_lib import Platform, Registry, Result, ToolContext
from mcp_lib.media import MAX_RUN_IMAGES
from mcp_lib.result import Image
from tests.fakes.attachments import png
from tests.fakes.clock import FakeClock
from tests.fakes.loop import check_transcript
from tests.fakes.model import Request, ScriptedModel, calls, text

BIG = base64.b64encode(png(2, 2) + b"\x00" * 600_000).decode()  # 800 kB of base64: ~230k tokens read as text


def charts() -> Registry:
    platform = Platform(name="pics", overview="Charts.", scenes=[], security_rules=[], load_config=lambda env: {},
                        make_client=lambda config: config)

    @platform.tool()
    def chart(ctx: ToolContext, month: str) -> Result:
        """Three charts of a month."""
        return Result(item={"month": month}, images=[Image(media_type="image/png", data=BIG)] * 3)

    return Registry(env={}, platforms={"pics": platform})


def test_images_are_image_blocks_in_the_tool_result_and_the_run_bounds_them() -> None:
    def script(request: Request) -> Any:
        if request.round <= 3:
            return calls(("pics_chart", {"month": f"2025-0{request.round}"}))
        return text("done")

    model = ScriptedModel(script)
    agent = Agent(model, RegistryTools(charts()), Settings(),
                  clock=FakeClock(wall=datetime(2026, 11, 18, tzinfo=UTC).timestamp()))
    answer = agent.run("売上のグラフは？")
    assert answer.text == "done"
    final = model.requests[-1].messages
    check_transcript(final)
    results = [b for m in final if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_result"]
    shown = [[b for b in r["content"] if b["type"] == "image"] if isinstance(r["content"], list) else []
             for r in results]
    assert [len(images) for images in shown] == [3, 3, 0]  # MAX_RUN_IMAGES = 6 for the run
    assert sum(map(len, shown)) == MAX_RUN_IMAGES
    assert shown[0][0] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": BIG}}
    assert results[0]["content"][0]["type"] == "text" and '"month": "2025-01"' in results[0]["content"][0]["text"]
    assert "3 image(s) of this result not shown" in results[2]["content"]
    estimate = request_tokens("", [], final)
    assert MAX_RUN_IMAGES * IMAGE_TOKENS < estimate < MAX_RUN_IMAGES * IMAGE_TOKENS + 5_000  # not 1.4M of base64
