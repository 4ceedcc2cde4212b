"""Question tagging: before the loop, tag the question by ``helpbot.toml``'s ``[[tags]]`` (see helpbot.example.toml) and
tell the model what the tags imply: their hints in the system prompt, their FAQ tags as faq_search boosts. Keywords
first, matched NFKC-normalised and lower-cased (a Latin keyword as a whole word, a Japanese one anywhere). Only when
they are ambiguous -- no tag matched, or more than ``max_tags`` -- the summary model chooses among the tag names in one
small request; without a model, or when it fails, the keyword result stands. Tagging never fails a run."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, ValidationError, field_validator

from agent.core.model import Model, Request, Usage
from agent.core.settings import Settings
from agent.core.transcript import user_message
from agent.errors import ModelError
from mcp_lib.clock import Clock
from mcp_lib.config import ConfigError, validation_problem
from mcp_lib.external import load_file_config
from mcp_lib.platforms.faq import normalize

FAQ_SEARCH = "faq_search"
TAGGER_MAX_TOKENS = 200
TAGGER_TIMEOUT_S = 30.0
TAGGER_SYSTEM = """\
You tag questions that team members ask a help bot, so that it knows where to look. Choose the tags from the \
list that fit the question; choose none when none fits. Reply with JSON only, no other text: \
{"tags": ["<tag name>", ...]}"""


# -- configuration ---------------------------------------------------------------------------------------------
def regex(pattern: str, prefix: str = "") -> str:
    """A configured regular expression (after ``prefix``) as written; ValueError saying why it is none."""
    try:
        re.compile(pattern.removeprefix(prefix))
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression ({exc})") from None
    return pattern


class Tag(BaseModel):
    """One ``[[tags]]`` entry, its keywords and patterns compiled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    keywords: list[str] = Field(min_length=1)  # as written, for the prompt and the trace
    patterns: list[str] = []
    description: Annotated[str, StringConstraints(strip_whitespace=True)] = ""
    hints: list[Annotated[str, StringConstraints(strip_whitespace=True)]] = []
    search_first: list[str] = []
    faq_tags: list[str] = []
    _matchers: tuple[tuple[str, re.Pattern[str]], ...] = PrivateAttr(default=())

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, value: list[str]) -> list[str]:
        if any(not normalize(word).strip() for word in value):
            raise ValueError("a keyword is blank")
        return value

    @field_validator("hints", mode="before")
    @classmethod
    def _one_hint(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # one hint may be written as a plain string

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return [regex(pattern) for pattern in value]

    def model_post_init(self, context: Any) -> None:
        self._matchers = (*((word, _keyword_matcher(word)) for word in self.keywords),
                          *((pattern, re.compile(pattern)) for pattern in self.patterns))

    def matches(self, normalized: str) -> list[str]:
        """The keywords and patterns found in an already normalised text."""
        return [written for written, matcher in self._matchers if matcher.search(normalized)]


def _keyword_matcher(word: str) -> re.Pattern[str]:
    """A Latin keyword as a whole word (``api`` is not in ``rapid``, but in ``sp-api``), a Japanese one anywhere."""
    norm = normalize(word).strip()
    pattern = re.escape(norm)
    if norm[0].isascii() and norm[0].isalnum():
        pattern = r"(?<![a-z0-9])" + pattern
    if norm[-1].isascii() and norm[-1].isalnum():
        pattern += r"(?![a-z0-9])"
    return re.compile(pattern)


class TaggingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tags: int = Field(3, ge=1, le=20)
    ask_model: bool = True


class TagConfig(TaggingOptions):
    tags: tuple[Tag, ...]


def parse_tag_config(raw: Mapping[str, Any], where: str = "helpbot.toml") -> TagConfig | None:
    """The ``[[tags]]`` and ``[tagging]`` of a parsed ``helpbot.toml``; None when it defines no tags."""
    if "tags" not in raw:
        if "tagging" in raw:
            raise ConfigError(f"{where} tagging", "there is a [tagging] table but no [[tags]] to use it with")
        return None
    items = raw["tags"]
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ConfigError(f"{where} tags", "must be a list of [[tags]] tables (name, keywords, ...)")
    tags = []
    for index, item in enumerate(items):
        label = f"{where} tags[{index}]" + (f" ({item['name']})" if isinstance(item.get("name"), str) else "")
        try:
            tags.append(Tag.model_validate(item))
        except ValidationError as exc:
            raise ConfigError(label, validation_problem(exc, "entry")) from None
    names = [normalize(t.name).strip() for t in tags]
    duplicate = next((t.name for t, n in zip(tags, names, strict=True) if names.count(n) > 1), None)
    if duplicate:
        raise ConfigError(f"{where} tags", f"two tags are named {duplicate!r}")
    options = raw.get("tagging", {})
    if not isinstance(options, dict):
        raise ConfigError(f"{where} tagging", "must be a table ([tagging])")
    try:
        checked = TaggingOptions.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(f"{where} tagging", validation_problem(exc, "tagging")) from None
    return TagConfig(tags=tuple(tags), **checked.model_dump()) if tags else None


def load_tag_config(env: Mapping[str, str]) -> TagConfig | None:
    """Tags from ``helpbot.toml`` (``HELPBOT_CONFIG`` or ``./helpbot.toml``); None when there are none."""
    return parse_tag_config(load_file_config(env))


# -- tagging ---------------------------------------------------------------------------------------------------
@dataclass
class Tagging:
    """The outcome of tagging one question: the tags chosen, and how."""

    tags: list[Tag]
    matched: dict[str, list[str]]  # tag name -> keywords/patterns found, for every tag the keywords hit
    method: Literal["keywords", "model", "none"]
    ambiguous: str | None = None  # why the keywords were not enough
    consulted: bool = False  # the summary model was asked
    model_error: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    seconds: float = 0.0

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tags]

    @property
    def faq_tags(self) -> list[str]:
        return list(dict.fromkeys(ft for t in self.tags for ft in t.faq_tags))

    def prompt_part(self, tool_names: Sequence[str] = ()) -> str:
        """The system-prompt part: which tags, what each implies, and the FAQ boosts to pass."""
        if not self.tags:
            return ""
        how = "by keywords" if self.method == "keywords" else "by a quick classification"
        lines = ["## Question tags",
                 f"Before the investigation this question was tagged {how}: {', '.join(self.names)}. Use the tags "
                 "to decide where to look first; they are a hint from the wording, not a fact about the question."]
        for tag in self.tags:
            lines.append(f"\n### {tag.name}")
            if tag.description:
                lines.append(tag.description)
            lines += [f"- {hint}" for hint in tag.hints if hint]
            if tag.search_first:
                lines.append(f"- Search these first: {'; '.join(tag.search_first)}")
        if self.faq_tags and FAQ_SEARCH in tool_names:
            lines.append(f"\nWhen you call {FAQ_SEARCH}, pass tags={json.dumps(self.faq_tags, ensure_ascii=False)}"
                         ": FAQ entries with these tags rank higher.")
        return "\n".join(lines)

    def event(self) -> dict[str, Any]:
        return {"event": "tags", "tags": self.names, "method": self.method, "matched": self.matched,
                "ambiguous": self.ambiguous, "model_consulted": self.consulted, "model_error": self.model_error,
                "faq_tags": self.faq_tags, "usage": self.usage.to_dict() if self.consulted else None,
                "seconds": round(self.seconds, 3)}


def with_faq_tags(searches: list[tuple[str, dict[str, Any]]], schemas: list[dict[str, Any]],
                  faq_tags: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Degraded mode's searches with the FAQ tags as faq_search's boosts, when its schema takes ``tags``."""
    takes_tags = {s["name"] for s in schemas if "tags" in (s.get("input_schema") or {}).get("properties", {})}
    return [(name, {**args, "tags": list(faq_tags)} if faq_tags and name == FAQ_SEARCH and name in takes_tags
             and "tags" not in args else args) for name, args in searches]


def keyword_matches(config: TagConfig, text: str) -> dict[str, list[str]]:
    normalized = normalize(text)
    return {tag.name: words for tag in config.tags if (words := tag.matches(normalized))}


def parse_tagger_reply(reply: str, candidates: Sequence[Tag], max_tags: int) -> list[Tag] | None:
    """The tags named in the model's reply (only candidates, at most ``max_tags``); None when it is not the
    JSON asked for. Tolerates prose or a code fence around the JSON, and a bare list."""
    match = re.search(r"\{.*\}|\[.*\]", reply, re.S)
    try:
        data = json.loads(match.group()) if match else None
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return None
    names = data.get("tags") if isinstance(data, dict) else data
    if not isinstance(names, list):
        return None
    by_name = {normalize(t.name).strip(): t for t in candidates}
    chosen = [by_name[key] for name in names if isinstance(name, str) and (key := normalize(name).strip()) in by_name]
    return list({tag.name: tag for tag in chosen}.values())[:max_tags]


def tag_question(config: TagConfig, question: str, *, model: Model | None, settings: Settings, clock: Clock) -> Tagging:
    """Keywords first; the summary model only when they are ambiguous (and allowed, and there is a model)."""
    began = clock.monotonic()
    matched = keyword_matches(config, question)
    hit = [t for t in config.tags if t.name in matched]
    if not hit:
        ambiguous: str | None = "no tag's keywords matched"
    elif len(hit) > config.max_tags:
        ambiguous = f"{len(hit)} tags matched (more than max_tags {config.max_tags})"
    else:
        ambiguous = None
    # the hits with the most keywords found, config order breaking ties (a stable sort), at most max_tags
    fallback = sorted(hit, key=lambda t: -len(matched[t.name]))[: config.max_tags]
    result = Tagging(fallback, matched, "keywords" if fallback else "none", ambiguous)
    if ambiguous and config.ask_model and model is not None:
        result.consulted, result.model = True, settings.summary_model
        candidates = hit or list(config.tags)
        try:
            listed = [f"- {tag.name}: {tag.description or ', '.join(tag.keywords[:8])}" for tag in candidates]
            prompt = "\n".join([f"Tags (choose at most {config.max_tags}):", *listed, "", "Question:", question[:2000]])
            response = model.create(Request(
                [{"type": "text", "text": TAGGER_SYSTEM}], [user_message(prompt)], [], None, TAGGER_MAX_TOKENS,
                settings.summary_model, clock.monotonic() + TAGGER_TIMEOUT_S, clock))
            result.usage = response.usage
            chosen = parse_tagger_reply(response.text, candidates, config.max_tags)
            if chosen is None:
                result.model_error = f"unreadable reply: {response.text[:200]!r}"
            else:
                result.tags, result.method = chosen, "model" if chosen else "none"
        except ModelError as exc:  # tagging is an aid: the investigation goes on without it
            result.model_error = f"{type(exc).__name__}: {exc}"
    result.seconds = clock.monotonic() - began
    return result
