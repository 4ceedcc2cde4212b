"""One streamed Messages API request (Bedrock's ``invoke-with-response-stream``, the API's SSE) through the
anthropic SDK: the text as it arrives, then the message as ``messages.create`` would have given it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def streamed_message(client: Any, on_text: Callable[[str], None], **kwargs: Any) -> Any:
    """``client.messages.stream(**kwargs)``: each text delta to ``on_text``, then the final message. A stream that
    ends before ``message_stop`` (a reset, a proxy cutting it) is an ``APIConnectionError`` -- the SDK would give
    what arrived as if it were the whole message."""
    import anthropic

    with client.messages.stream(**kwargs) as stream:
        ended = False
        for event in stream:
            if event.type == "text" and event.text:
                on_text(event.text)
            ended = ended or event.type == "message_stop"
        if not ended:
            raise anthropic.APIConnectionError(message="the response stream ended before message_stop",
                                               request=stream.response.request)
        return stream.get_final_message()
