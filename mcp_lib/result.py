"""The Result envelope every tool returns, and the limits it is held to before it reaches the model (every string
masked as it is cut, so masking costs what is kept); an MCP server's ``tools/call`` result as a Result."""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import DECLARED, env_float, env_int, env_str
from .cutting import keep_start_masked
from .media import CORRUPT, MAX_RESULT_IMAGE_BYTES, MAX_RESULT_IMAGES, TOO_LARGE, ImageType, check_base64_image
from .redact import redact_secrets

MAX_MESSAGE_CHARS = 1000  # an error message (a server's text, an exception) is no place for a whole page
MAX_NOTES = 12
MAX_NOTE_CHARS = 300
# The limits a tool may set for itself, and the variable that caps each when it is set explicitly.
LIMIT_VARIABLES = {"max_items": "HELPBOT_TOOL_MAX_ITEMS", "max_field_chars": "HELPBOT_TOOL_MAX_FIELD_CHARS",
                   "max_result_chars": "HELPBOT_TOOL_MAX_RESULT_CHARS"}


@dataclass(frozen=True)
class Limits:
    """How much one tool call may hand to the model, and how long it may take (retries included). A tool's own
    limits (``@platform.tool(max_field_chars=20000)``) replace the defaults, not past one set in the environment.
    ``mask``: the secret patterns and the held credentials' values (the model cannot re-encode what it never reads)."""

    max_items: int = DECLARED.value("HELPBOT_TOOL_MAX_ITEMS", int)
    max_field_chars: int = DECLARED.value("HELPBOT_TOOL_MAX_FIELD_CHARS", int)
    max_result_chars: int = DECLARED.value("HELPBOT_TOOL_MAX_RESULT_CHARS", int)
    budget_s: float = DECLARED.value("HELPBOT_TOOL_BUDGET_S", float)
    explicit: frozenset[str] = frozenset()  # the fields set by environment variables
    mask: Callable[[str], str] = field(default=redact_secrets, compare=False, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str], mask: Callable[[str], str] = redact_secrets) -> Limits:
        return cls(max_items=env_int(env, "HELPBOT_TOOL_MAX_ITEMS", minimum=1),
                   max_field_chars=env_int(env, "HELPBOT_TOOL_MAX_FIELD_CHARS", minimum=100),
                   max_result_chars=env_int(env, "HELPBOT_TOOL_MAX_RESULT_CHARS", minimum=1000),
                   budget_s=env_float(env, "HELPBOT_TOOL_BUDGET_S", minimum=1.0), mask=mask,
                   explicit=frozenset(name for name, variable in LIMIT_VARIABLES.items() if env_str(env, variable)))

    def merged(self, **overrides: int) -> Limits:
        """A tool's own limits over these; a limit set explicitly in the environment stays the upper bound."""
        values: dict[str, Any] = {name: min(value, getattr(self, name)) if name in self.explicit else value
                                  for name, value in overrides.items()}
        return dataclasses.replace(self, **values)


class Image(BaseModel):
    """An image a tool returns (checked by :func:`mcp_lib.media.check_base64_image`), beside the JSON text: an
    image block for Claude, image content for ``mcp-lib serve``; the JSON only names it (a note)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    media_type: ImageType
    data: str = Field(repr=False)  # base64


class Result(BaseModel):
    """The envelope every tool returns, on every surface."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "error"] = "ok"
    tool: str = ""
    items: list[dict[str, Any]] = []
    item: dict[str, Any] | None = None
    total: int | None = None
    notes: list[str] = []
    message: str | None = None
    kind: Literal["arguments", "credentials", "failed"] | None = None
    images: list[Image] = []  # left out of the JSON text (to_dict)

    @classmethod
    def error(cls, tool: str, message: str, kind: Literal["arguments", "credentials", "failed"] = "failed") -> Result:
        return cls(status="error", tool=tool, message=message, kind=kind)

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form every surface shows: ``status`` first, defaults left out."""
        return {"status": self.status, **self.model_dump(exclude_defaults=True, exclude={"status", "images"})}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)


# Fields that are never cut: a cut link or title is a broken source, a cut id cannot be looked up.
_WHOLE = frozenset({"url", "title", "id", "path", "filename", "repo", "ts", "thread_ts", "wikiTitle", "permalink"})


def _keep_whole(key: str | None) -> bool:
    return key is not None and (key in _WHOLE or key.endswith(("Id", "_id", "_url", "Url")))


@dataclass
class _Shrink:
    """One pass over a result's original values (so every marker counts what was really left out): strings cut
    to ``field_limit``, nested lists to ``list_limit``; with ``whole_only`` only the never-cut fields kept."""

    field_limit: int
    list_limit: int
    whole_only: bool = False
    mask: Callable[[str], str] = redact_secrets
    # (id of an original string, limit) -> (cut and masked, whether cut): the builds of one apply_limits share it
    memo: dict[tuple[int, int], tuple[str, bool]] = field(default_factory=dict)
    fields_cut: int = 0
    fields_dropped: int = 0
    lists: dict[str, tuple[int, int]] = field(default_factory=dict)  # where -> (kept, longest seen)
    names: dict[str, str] = field(default_factory=dict)  # a key masked: keys repeat in every row

    def value(self, value: Any, where: str, key: str | None = None) -> Any:
        if isinstance(value, str):
            limit = -1 if _keep_whole(key) else self.field_limit  # a link, title or id is masked, never cut
            memo_key = (id(value), limit)
            if memo_key not in self.memo:
                self.memo[memo_key] = ((self.mask(value), False) if limit < 0
                                       else keep_start_masked(value, limit, self.mask))
            text, cut = self.memo[memo_key]
            self.fields_cut += cut
            return text
        if isinstance(value, dict):
            shown = {name: inner for name, inner in value.items() if not self.whole_only or _keep_whole(name)}
            self.fields_dropped += len(value) - len(shown)
            # where is named for a note (cut there anyway): held to its length, a deep nest of long keys is linear
            return {self._name(name): self.value(inner, f"{where}.{self._name(name)}"[:MAX_NOTE_CHARS], name)
                    for name, inner in shown.items()}
        if isinstance(value, list):
            if len(value) > self.list_limit:
                kept, longest = self.lists.get(where, (self.list_limit, 0))
                self.lists[where] = (kept, max(longest, len(value)))
                value = value[: self.list_limit]
            return [self.value(inner, f"{where}[]", key) for inner in value]
        return value

    def _name(self, name: Any) -> Any:
        """A key as the model reads it: masked like any text (a peer's JSON may key rows by their text)."""
        if not isinstance(name, str):
            return name
        if name not in self.names:
            self.names[name] = self.mask(name)
        return self.names[name]

    def notes(self) -> list[str]:
        notes = [f"long fields cut to {self.field_limit} characters"] if self.fields_cut else []
        notes += [f"showing {kept} of {longest} entries at {where}" if "[]" not in where
                  else f"lists at {where} cut to {kept} entries (the longest had {longest})"
                  for where, (kept, longest) in self.lists.items()]
        if self.fields_dropped:
            notes.append("only titles, links and ids are shown: the full result was too large; read one item "
                         "with the platform's get tool")
        return notes


def capped_notes(notes: list[str], mask: Callable[[str], str] = redact_secrets) -> list[str]:
    kept = [keep_start_masked(str(note), MAX_NOTE_CHARS, mask)[0] for note in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        kept.append(f"{len(notes) - MAX_NOTES} more notes left out")
    return kept


def apply_limits(result: Result, limits: Limits) -> Result:
    """The result within the limits, its JSON within ``max_result_chars`` by the steps below, each built from the
    originals; the notes say what was left out, where. Each string is masked once per limit (one shared memo)."""
    notes = list(result.notes)
    items = list(result.items)
    if len(items) > limits.max_items:
        notes.append(f"showing {limits.max_items} of {len(items)} items")
        items = items[: limits.max_items]
    cap = limits.max_result_chars
    memo: dict[tuple[int, int], tuple[str, bool]] = {}

    def build(count: int, field_limit: int, list_limit: int, whole_only: bool = False) -> Result:
        shrink = _Shrink(field_limit, list_limit, whole_only, limits.mask, memo=memo)
        shown = [shrink.value(item, "items[]") for item in items[:count]]
        one = shrink.value(result.item, "item")
        left = len(items) - count
        dropped = [f"{left} more items left out to stay within {cap} characters"] if left else []
        return result.model_copy(update={"items": shown, "item": one,
                                         "notes": capped_notes(notes + shrink.notes() + dropped, limits.mask)})

    def fits(out: Result) -> bool:
        return len(out.to_json()) <= cap

    field_limit, list_limit = limits.max_field_chars, limits.max_items
    out = build(len(items), field_limit, list_limit)
    if fits(out):
        return out
    # 1. fewer items, keeping the best-ranked ones: the largest count that fits (bisected: sizes are monotone)
    fitting = bisect.bisect(range(1, len(items) + 1), False,
                            key=lambda count: not fits(build(count, field_limit, list_limit)))
    count = max(1, fitting) if items else 0
    out = build(count, field_limit, list_limit)
    # 2. shorter fields and nested lists, from the originals
    while not fits(out) and (field_limit > 100 or list_limit > 1):
        if field_limit > 100:
            field_limit = max(100, field_limit // 2)
        if list_limit > 1 and field_limit <= 400:
            list_limit = max(1, list_limit // 2)
        out = build(count, field_limit, list_limit)
    # 3. only what identifies each item; 4. nothing but the notes
    if not fits(out):
        out = build(count, field_limit, list_limit, whole_only=True)
    if not fits(out):
        out = result.model_copy(update={"items": [], "item": None, "notes": capped_notes(
            [*notes, f"the result was too large to show within {cap} characters; ask for less"], limits.mask)[:3]})
    return out


def as_result(tool: str, value: Any) -> Result:
    """What a tool function returned (a list of items, one item, or a Result) as the Result of ``tool``."""
    if isinstance(value, Result):
        return value.model_copy(update={"tool": tool})
    if isinstance(value, list):
        return Result(tool=tool, items=value, total=len(value))
    if isinstance(value, dict):
        return Result(tool=tool, item=value)
    raise TypeError(f"tool {tool} returned {type(value).__name__}; expected list, dict or Result")


def _error_message(payload: Any, text: str) -> str:
    """The server's own words: ``message`` or ``data.error`` of a structured error, else its text."""
    if isinstance(payload, dict):
        data = payload["data"] if isinstance(payload.get("data"), dict) else {}
        found = data.get("error") or payload.get("error") or payload.get("message")
        if found:
            code = payload.get("status_code")
            return f"{found} (status {code})" if code else str(found)
    return text or "the MCP server reported an error"


# What helpbot cannot show the model, named in the result's notes (MCP spec 2025-06-18, server/tools "Tool Result")
_UNSHOWN = {"audio": "audio item", "resource": "binary resource", "resource_link": "resource link"}


def _content(called: Any) -> tuple[str, list[Image], list[dict[str, str]], list[str]]:
    """A result's content blocks as helpbot shows them: the text, the images the model may be shown (within
    :mod:`mcp_lib.media`'s limits), embedded text resources, and notes naming what is not shown."""
    texts: list[str] = []
    images: list[Image] = []
    resources: list[dict[str, str]] = []
    notes: list[str] = []
    unshown: Counter[tuple[str, str]] = Counter()  # (what, why) -> how many
    image_bytes = decoded = 0
    over = f"over the limit of one result ({MAX_RESULT_IMAGES} images, {MAX_RESULT_IMAGE_BYTES / 1e6:.2f} MB)"
    for block in called.content:
        kind = str(getattr(block, "type", "?"))
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            # each decoded may be 80 megapixels, and a server sends as many as it likes: the first few are decoded
            checked = check_base64_image(str(block.data), over if decoded >= MAX_RESULT_IMAGES else None)
            decoded += not isinstance(checked, str) or checked in (CORRUPT, TOO_LARGE)
            if isinstance(checked, str):
                unshown["image", checked] += 1
                continue
            media_type, width, height, size = checked
            if image_bytes + size > MAX_RESULT_IMAGE_BYTES:
                unshown["image", over] += 1
                continue
            images.append(Image(media_type=media_type, data=block.data))
            image_bytes += size
            notes.append(f"image {len(images)}: {media_type}, {width}x{height} px")
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            resources.append({"uri": str(block.resource.uri), "text": block.resource.text})
        else:
            unshown[_UNSHOWN.get(kind, f"{kind[:40]!r} item"), "helpbot shows text and images"] += 1
    notes += [f"[{count} {what}{'s' if count > 1 else ''} not shown: {why}]" for (what, why), count in unshown.items()]
    return "\n".join(texts).strip(), images, resources, notes


def from_call_result(name: str, called: Any) -> Result:
    """An MCP ``CallToolResult`` as a Result: the error's own words, or the structured content (else the text as
    JSON, else as text) with its images, embedded text resources and notes."""
    text, images, resources, notes = _content(called)
    payload = called.structured_content
    if payload is None and text:
        try:
            payload = json.loads(text)
        except (ValueError, RecursionError):  # a server's text: not JSON, or nested deeper than the parser goes
            payload = {"text": text}
    if called.is_error:
        return Result.error(name, _error_message(payload, text))
    items = [p if isinstance(p, dict) else {"value": p} for p in payload] if isinstance(payload, list) else []
    if isinstance(payload, list | dict):
        item = payload if isinstance(payload, dict) else None
    else:  # a bare value; nothing at all beside images or resources is no value
        item = {} if payload is None and (images or resources) else {"value": payload}
    if resources:
        item = {**(item or {}), "embedded_resources": resources}
    return Result(items=items, item=item, images=images, notes=notes)
