"""The declaration model: a platform declares each tool once, as a typed function whose docstring the model
reads; the schema, CLI command, docs, Claude tool and MCP tool all derive from it (FastMCP's ``func_metadata``).
The :class:`ToolContext` parameter is injected, never in the schema. :meth:`Tool.invoke` never raises: every
failure is a ``status: "error"`` Result (the envelope, :mod:`mcp_lib.result`, is re-exported for platforms)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .clock import SYSTEM_CLOCK, Clock
from .cutting import keep_start_masked
from .errors import ArgumentError, CredentialsError, ToolError
from .result import MAX_MESSAGE_CHARS, Limits, Result, apply_limits, as_result, capped_notes


@dataclass(frozen=True)
class Caller:
    """Where the answer will be posted: the Slack private-channel rule reads it."""

    answer_channel: str | None = None


@dataclass
class ToolContext:
    """What a tool receives besides its arguments (tests hand in fakes here; nothing is a module global)."""

    client: Any
    config: Any
    caller: Caller = field(default_factory=Caller)
    limits: Limits = field(default_factory=Limits)
    clock: Clock = SYSTEM_CLOCK
    deadline: float | None = None  # on clock.monotonic(), set by Tool.invoke: no retry of the call waits past it

    def cut(self, text: str, limit: int) -> tuple[str, bool]:
        """A platform's cut of a long field, masked with the run's mask, and whether it was cut."""
        return keep_start_masked(text, limit, self.limits.mask)


@dataclass
class Param:
    name: str
    schema: dict[str, Any]
    required: bool
    description: str


def _validated(model: type[BaseModel], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` checked and coerced by ``model``; an ArgumentError naming each field that is wrong."""
    try:
        return dict(model.model_validate(dict(arguments)))
    except ValidationError as exc:
        problems = (f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg'].lower()}" for err in exc.errors())
        raise ArgumentError("; ".join(problems)) from None


@dataclass
class Tool:
    """One tool: ``fn(ctx=..., **arguments)`` does the work; ``validate`` checks and coerces the arguments against
    ``input_schema`` (an ArgumentError saying what is wrong, one line per field)."""

    platform: str
    function: str
    fn: Callable[..., Any]
    description: str
    input_schema: dict[str, Any]
    validate: Callable[[Mapping[str, Any]], dict[str, Any]]
    read_only: bool = True
    example: str = ""
    limit_overrides: dict[str, int] = field(default_factory=dict)
    context_param: str = "ctx"  # the parameter that receives the ToolContext (found by its annotation)
    needs: tuple[str, ...] = ()  # variables it needs beyond its platform's: unset, the tool is not offered

    @property
    def wire_name(self) -> str:
        return f"{self.platform}_{self.function}"

    @property
    def cli_name(self) -> str:
        return f"{self.platform}:{self.function}"

    @property
    def usage(self) -> str:
        """``mcp-lib platform:function <required> [optional=…]``: the CLI form, for usage messages and the docs."""
        args = " ".join(f"<{p.name}>" if p.required else f"[{p.name}=…]" for p in self.params)
        return f"mcp-lib {self.cli_name} {args}".rstrip()

    @property
    def params(self) -> list[Param]:
        required = set(self.input_schema.get("required", []))
        return [Param(name, prop, name in required, prop.get("description", ""))
                for name, prop in self.input_schema.get("properties", {}).items()]

    @classmethod
    def declared(cls, platform: str, fn: Callable[..., Any], **options: Any) -> Callable[[], Tool]:
        """The tool of a function, its arguments model from the signature (``Annotated[int, Field(...)]``), in two
        steps: a function that cannot be a tool is refused now; the callable returned builds the (costly) model."""
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
        context = next((name for name in signature.parameters  # as FastMCP finds its ``Context``
                        if isinstance(hint := hints.get(name), type) and issubclass(hint, ToolContext)), None)
        if context is None:
            raise TypeError(f"tool {platform}:{fn.__name__} takes no parameter annotated ToolContext: every tool "
                            "gets its clients, limits and deadline from one (e.g. ``ctx: ToolContext``)")
        fields: dict[str, Any] = {
            name: (hints.get(name, Any), ... if param.default is inspect.Parameter.empty else param.default)
            for name, param in signature.parameters.items() if name != context  # the context is injected
        }
        description = inspect.cleandoc(fn.__doc__ or "").strip()
        if not description:
            raise ValueError(f"tool {platform}:{fn.__name__} needs a docstring: it is what the model reads")

        def build() -> Tool:
            model = create_model(f"{platform}_{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
            schema = model.model_json_schema()
            schema.pop("title", None)
            for prop in schema.get("properties", {}).values():
                prop.pop("title", None)
            schema.setdefault("required", [])  # additionalProperties: false comes from extra="forbid"
            return cls(platform=platform, function=fn.__name__, fn=fn, description=description,
                       input_schema=schema, validate=functools.partial(_validated, model), context_param=context,
                       **options)

        return build

    def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Result:
        """Run the tool: validated, masked, limited, within its time budget. Never raises (also not while masking
        or limiting): every failure is ``status: "error"`` with a short message."""
        try:
            if ctx.deadline is None:
                ctx = dataclasses.replace(ctx, deadline=ctx.clock.monotonic() + ctx.limits.budget_s)
            values = self.validate(arguments)
            result = as_result(self.wire_name, self.fn(**{self.context_param: ctx}, **values))
        except ArgumentError as exc:
            result = Result.error(self.wire_name, f"invalid arguments: {exc}", kind="arguments")
        except CredentialsError as exc:
            result = Result.error(self.wire_name, str(exc), kind="credentials")
        except ToolError as exc:
            result = Result.error(self.wire_name, str(exc))
        except Exception as exc:  # a tool bug or an unexpected client error must not end the run
            result = Result.error(self.wire_name, f"{type(exc).__name__}: {exc}")
        try:
            if result.is_error:
                return result.model_copy(update={"message": _message(result.message or "failed", ctx.limits.mask),
                                                 "notes": capped_notes(result.notes, ctx.limits.mask)})
            # JSON-safe (a date becomes its string), then cut and masked to the limits
            payload = _json_safe({"items": result.items, "item": result.item, "notes": result.notes})
            return apply_limits(result.model_copy(update=payload), ctx.limits.merged(**self.limit_overrides))
        except Exception as exc:  # while masking or limiting: still a result
            return Result.error(self.wire_name, _message(f"{type(exc).__name__}: {exc}", ctx.limits.mask))


def _json_safe(value: Any, path: frozenset[int] = frozenset()) -> Any:
    """What ``json.loads(json.dumps(value, default=str))`` gives (a value containing itself: ValueError), without
    serialising the strings: a 5 MB field is not copied twice before it is cut."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict | list | tuple):
        if id(value) in path:
            raise ValueError("Circular reference detected")
        inside = path | {id(value)}
        if isinstance(value, dict):
            return {_json_key(key): _json_safe(inner, inside) for key, inner in value.items()}
        return [_json_safe(inner, inside) for inner in value]
    return str(value)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _message(text: str, mask: Callable[[str], str]) -> str:
    """An error message masked and cut: it may carry a server's text or an exception's."""
    return keep_start_masked(text, MAX_MESSAGE_CHARS, mask)[0]


@dataclass
class Platform:
    """A source of knowledge: its metadata (for the docs and the system prompt) and its tools."""

    name: str
    overview: str
    scenes: list[str]
    security_rules: list[str]
    load_config: Callable[[Mapping[str, str]], Any | None]  # None: not configured (off); ConfigError: wrong
    make_client: Callable[..., Any]  # the real client, from the config; tests hand in their own
    setup: str = ""
    variables: tuple[str, ...] = ()  # what configures it: some set while it is off is *half-configured*
    # helpbot doctor's live check: what it found (names and counts, never values), or a ToolError saying what is wrong
    check: Callable[[ToolContext], list[str]] | None = field(default=None, repr=False, compare=False)
    # fills in the tools on the first use of .tools, once, under the lock (an MCP server is contacted only then)
    load_tools: Callable[[Platform], None] | None = field(default=None, repr=False, compare=False)
    close: Callable[[], None] | None = field(default=None, repr=False, compare=False)  # ends what it holds open
    _tools: dict[str, Tool] = field(default_factory=dict, repr=False)
    # declared with :meth:`tool`, built on the first use of .tools: checking the configuration builds no pydantic model
    _declared: dict[str, Callable[[], Tool]] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _loader: int | None = field(default=None, repr=False, compare=False)  # the thread running load_tools

    @property
    def tools(self) -> dict[str, Tool]:
        if (self._declared or self.load_tools is not None) and self._loader != threading.get_ident():
            with self._lock:  # built once, in the order declared; a second first use waits, never sees half of it
                self._tools.update((name, build()) for name, build in self._declared.items())
                self._declared = {}
                if (load := self.load_tools) is not None:
                    self._loader = threading.get_ident()  # load's own uses of .tools see its work, not the lock
                    try:
                        load(self)
                    finally:
                        self.load_tools, self._loader = None, None
        return self._tools

    def tool(self, *, read_only: bool = True, example: str = "", max_items: int | None = None,
             max_field_chars: int | None = None, max_result_chars: int | None = None,
             needs: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a tool of this platform (``needs``: see :attr:`Tool.needs`)."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            limits = {"max_items": max_items, "max_field_chars": max_field_chars, "max_result_chars": max_result_chars}
            self._declared[fn.__name__] = Tool.declared(
                self.name, fn, read_only=read_only, example=example, needs=needs,
                limit_overrides={k: v for k, v in limits.items() if v is not None})
            return fn

        return register


T = TypeVar("T")


def in_background(work: Callable[[], T], name: str) -> Future[T]:
    """``work()`` on a daemon thread (a run that ends or is cancelled does not wait for it), its outcome -- a
    value or any exception -- in the future: reads started ahead of their use (Slack's, a name lookup)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
