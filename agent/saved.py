"""Transcripts for ``helpbot ask --save / --continue``: the last question, its answer and sources and the turns before
it in a JSON file, handed back to the loop as history; a file that cannot be used is one line and exit 2
(:class:`TranscriptError`), before anything runs."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent import guard
from agent.core.run import Turn
from agent.errors import TranscriptError

if TYPE_CHECKING:
    from agent.core.run import Answer

TRANSCRIPT_VERSION = 1
MAX_TRANSCRIPT_TURNS = 10  # older turns are dropped: the history must stay affordable


def _turn(data: Any, where: str) -> Turn:
    if not isinstance(data, dict):
        raise TranscriptError(f"{where} must be an object with question, answer and sources")
    for key in ("question", "answer"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise TranscriptError(f"{where}.{key} must be a non-empty string")
    sources = data.get("sources", [])
    if not isinstance(sources, list) or not all(
            isinstance(s, dict) and isinstance(s.get("url"), str) and isinstance(s.get("title", ""), str)
            for s in sources):
        raise TranscriptError(f"{where}.sources must be a list of {{title, url}} objects")
    return Turn(question=data["question"], answer=data["answer"],
                sources=[{"title": str(s.get("title") or s["url"]), "url": s["url"]} for s in sources])


def load_transcript(path: str | os.PathLike[str]) -> list[Turn]:
    """The conversation so far from a file written by ``helpbot ask --save``: earlier turns, then the last one."""
    name = repr(os.fspath(path))
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TranscriptError(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TranscriptError(f"{name} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"{name} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or data.get("helpbot_transcript") != TRANSCRIPT_VERSION:
        raise TranscriptError(f"{name} is not a helpbot transcript (written by helpbot ask --save)")
    history = data.get("history", [])
    if not isinstance(history, list):
        raise TranscriptError("history must be a list of turns")
    turns = [_turn(item, f"history[{i}]") for i, item in enumerate(history)]
    turns.append(_turn(data, "transcript"))
    return turns[-MAX_TRANSCRIPT_TURNS:]


def save_transcript(path: str | os.PathLike[str], question: str, answer: Answer, history: Sequence[Turn]) -> None:
    """Question, answer, its sources and the turns before it: what ``--continue`` reads back."""
    data = {
        "helpbot_transcript": TRANSCRIPT_VERSION,
        "question": question,
        "answer": answer.text,
        "sources": [{"title": s["title"], "url": s["url"]} for s in answer.sources],
        "history": [{"question": t.question, "answer": t.answer, "sources": t.sources} for t in history],
        "degraded": answer.degraded,
    }
    try:
        guard.write_file(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    except OSError as exc:
        raise TranscriptError(f"cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from None
