"""The declaration model: a platform declares each tool once, as a typed function with a docstring.

Everything else -- the JSON schema, the CLI command, the markdown docs, the Claude tool schema and the MCP tool --
is derived from that one declaration (the idea of FastMCP's ``func_metadata``). A tool's first parameter is the
injected :class:`ToolContext`; it is left out of the schema. Tools return a list of items, one item (a dict) or
a :class:`Result`; every item that comes from a source carries ``url`` and ``title``.

Tool failures are values: :meth:`Tool.invoke` never raises, it returns ``status: "error"`` with a message.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .config import env_int
from .redact import redact_deep

TRUNCATION_MARKER = "…[truncated: {n} more characters]"


class ToolError(Exception):
    """A failure the model should hear about (not found, rate limited, forbidden by a rule)."""


class CredentialsError(ToolError):
    """The service rejected our credentials: a configuration problem (the CLI exits 2 on it)."""


class ArgumentError(Exception):
    """Arguments that do not fit the tool's schema."""


@dataclass(frozen=True)
class Caller:
    """Who is asking and where the answer will be posted: the Slack private-channel rule needs both."""

    user: str | None = None
    answer_channel: str | None = None


@dataclass(frozen=True)
class Limits:
    """How much one tool call may hand to the model. A tool declaration may lower or raise them."""

    max_items: int = 20
    max_field_chars: int = 1500
    max_result_chars: int = 16000

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        return cls(
            max_items=env_int(env, "HELPBOT_TOOL_MAX_ITEMS", cls.max_items, minimum=1),
            max_field_chars=env_int(env, "HELPBOT_TOOL_MAX_FIELD_CHARS", cls.max_field_chars, minimum=100),
            max_result_chars=env_int(env, "HELPBOT_TOOL_MAX_RESULT_CHARS", cls.max_result_chars, minimum=1000),
        )

    def merged(self, **overrides: int | None) -> Limits:
        values = {k: v for k, v in overrides.items() if v is not None}
        return Limits(**{**self.__dict__, **values})


@dataclass
class ToolContext:
    """What a tool receives besides its arguments. Tests hand in fakes here; nothing is a module global."""

    client: Any
    config: Any
    caller: Caller = field(default_factory=Caller)
    limits: Limits = field(default_factory=Limits)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time


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

    @classmethod
    def error(cls, tool: str, message: str, kind: Literal["arguments", "credentials", "failed"] = "failed") -> Result:
        return cls(status="error", tool=tool, message=message, kind=kind)

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    def sources(self) -> list[dict[str, str]]:
        """``{"url", "title"}`` of every item that came from a source, in order."""
        found = [self.item] if self.item else []
        found += self.items
        return [
            {"url": str(entry["url"]), "title": str(entry.get("title") or entry["url"])}
            for entry in found
            if entry.get("url")
        ]

    def to_json(self, indent: int | None = None) -> str:
        data = {"status": self.status, **self.model_dump(exclude_defaults=True, exclude={"status"})}
        return json.dumps(data, ensure_ascii=False, indent=indent)


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters with the explicit marker; and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARKER.format(n=len(text) - limit), True


def _cut_fields(value: Any, limit: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        return cut_text(value, limit)
    if isinstance(value, dict):
        cut_any = False
        out = {}
        for key, inner in value.items():
            out[key], cut = _cut_fields(inner, limit)
            cut_any |= cut
        return out, cut_any
    if isinstance(value, list):
        pairs = [_cut_fields(inner, limit) for inner in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def apply_limits(result: Result, limits: Limits) -> Result:
    """Cut long fields, then drop trailing items, then shrink fields until the whole result fits."""
    notes = list(result.notes)
    items = result.items
    if len(items) > limits.max_items:
        notes.append(f"showing {limits.max_items} of {len(items)} items")
        items = items[: limits.max_items]
    items, cut_items = _cut_fields(items, limits.max_field_chars)
    item, cut_item = _cut_fields(result.item, limits.max_field_chars)
    if cut_items or cut_item:
        notes.append(f"long fields cut to {limits.max_field_chars} characters")
    out = result.model_copy(update={"items": items, "item": item, "notes": notes})

    def size(r: Result) -> int:
        return len(r.to_json())

    dropped = 0
    while size(out) > limits.max_result_chars and len(out.items) > 1:
        out.items = out.items[:-1]
        dropped += 1
    field_limit = limits.max_field_chars
    while size(out) > limits.max_result_chars and field_limit > 50:
        field_limit //= 2
        out.items = _cut_fields(out.items, field_limit)[0]
        out.item = _cut_fields(out.item, field_limit)[0]
    if dropped:
        out.notes = [*out.notes, f"{dropped} more items left out to stay within {limits.max_result_chars} characters"]
    return out


def _normalize(tool: str, value: Any) -> Result:
    if isinstance(value, Result):
        return value.model_copy(update={"tool": tool})
    if isinstance(value, list):
        return Result(tool=tool, items=value, total=len(value))
    if isinstance(value, dict):
        return Result(tool=tool, item=value)
    raise TypeError(f"tool {tool} returned {type(value).__name__}; expected list, dict or Result")


@dataclass
class Param:
    name: str
    schema: dict[str, Any]
    required: bool
    description: str


def _pydantic_validator(model: type[BaseModel]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    def validate(arguments: Mapping[str, Any]) -> dict[str, Any]:
        try:
            parsed = model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "arguments"
                problems.append(f"{where}: {err['msg'].lower()}")
            raise ArgumentError("; ".join(problems)) from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    return validate


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("required", [])
    schema["additionalProperties"] = False
    return schema


@dataclass
class Tool:
    """One tool. ``fn(ctx, **arguments)`` does the work; ``validator`` checks arguments against ``input_schema``."""

    platform: str
    function: str
    fn: Callable[..., Any]
    description: str
    input_schema: dict[str, Any]
    validator: Callable[[Mapping[str, Any]], dict[str, Any]]
    read_only: bool = True
    example: str = ""
    limit_overrides: dict[str, int] = field(default_factory=dict)

    @property
    def wire_name(self) -> str:
        return f"{self.platform}_{self.function}"

    @property
    def cli_name(self) -> str:
        return f"{self.platform}:{self.function}"

    @property
    def summary(self) -> str:
        return self.description.split("\n\n")[0].replace("\n", " ").strip()

    @property
    def params(self) -> list[Param]:
        required = set(self.input_schema.get("required", []))
        return [
            Param(name, prop, name in required, prop.get("description", ""))
            for name, prop in self.input_schema.get("properties", {}).items()
        ]

    @classmethod
    def from_function(cls, platform: str, fn: Callable[..., Any], **options: Any) -> Tool:
        """Derive the arguments model from the signature: ``Annotated[int, Field(description=...)]``."""
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for index, (name, param) in enumerate(signature.parameters.items()):
            if index == 0:  # the injected ToolContext
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[name] = (hints.get(name, Any), default)
        model = create_model(
            f"{platform}_{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        description = inspect.cleandoc(fn.__doc__ or "").strip()
        if not description:
            raise ValueError(f"tool {platform}:{fn.__name__} needs a docstring: it is what the model reads")
        return cls(platform=platform, function=fn.__name__, fn=fn, description=description,
                   input_schema=_schema_of(model), validator=_pydantic_validator(model), **options)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Checked and coerced arguments, or an ArgumentError that says what is wrong in one line per field."""
        return self.validator(arguments)

    def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Result:
        """Run the tool: validated, limited, redacted; failures come back as ``status: "error"``."""
        try:
            values = self.validate(arguments)
            result = _normalize(self.wire_name, self.fn(ctx, **values))
        except ArgumentError as exc:
            result = Result.error(self.wire_name, f"invalid arguments: {exc}", kind="arguments")
        except CredentialsError as exc:
            result = Result.error(self.wire_name, str(exc), kind="credentials")
        except ToolError as exc:
            result = Result.error(self.wire_name, str(exc))
        except Exception as exc:  # a tool bug or an unexpected client error must not end the run
            result = Result.error(self.wire_name, f"{type(exc).__name__}: {exc}")
        if not result.is_error:
            result = apply_limits(result, ctx.limits.merged(**self.limit_overrides))
        return Result.model_validate(redact_deep(result.model_dump()))


@dataclass
class Platform:
    """A source of knowledge: its metadata (for docs and the system prompt) and its tools.

    ``load_config(env)`` returns None when the platform is not configured (then it is disabled), a config
    object when it is, and raises ConfigError when the configuration is present but wrong.
    ``make_client(config)`` builds the real client; tests inject their own instead.
    """

    name: str
    overview: str
    scenes: list[str]
    security_rules: list[str]
    load_config: Callable[[Mapping[str, str]], Any | None]
    make_client: Callable[..., Any]
    setup: str = ""
    tools: dict[str, Tool] = field(default_factory=dict)

    def tool(
        self,
        *,
        read_only: bool = True,
        example: str = "",
        max_items: int | None = None,
        max_field_chars: int | None = None,
        max_result_chars: int | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a tool of this platform."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            overrides = {"max_items": max_items, "max_field_chars": max_field_chars,
                         "max_result_chars": max_result_chars}
            self.tools[fn.__name__] = Tool.from_function(
                self.name, fn, read_only=read_only, example=example,
                limit_overrides={k: v for k, v in overrides.items() if v is not None},
            )
            return fn

        return register
