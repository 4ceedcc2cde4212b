"""``helpbot eval CASES.yaml [--json]``: run questions through the agent ``helpbot ask`` builds and score the answers
against the sources and phrases a good answer must contain (the case file's format: evals/README.md). Exit 0 when every
case passed, 1 when some failed, 2 when the file or a case is malformed (one line naming where)."""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import unquote

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from agent import guard
from agent.build import MAX_ROUNDS_LIMIT, build_agent, parse_rounds
from agent.core.model import Usage
from agent.core.tags import regex
from agent.errors import UsageError, describe_error
from mcp_lib import Registry
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import ConfigError, env_datetime, validation_problem

if TYPE_CHECKING:
    from agent.core.loop import Agent

_ID = re.compile(r"^[\w.-]{1,80}$")


def _check(ok: Callable[[str], object], problem: str) -> AfterValidator:
    """A value ``ok`` accepts, else the case's error ``problem``."""
    def check(value: str) -> str:
        if not ok(value):
            raise ValueError(problem)
        return value

    return AfterValidator(check)


_NOT_BLANK = _check(str.strip, "is blank")
_PATTERN = AfterValidator(lambda p: regex(p, "re:") if p.startswith("re:") else p)  # a regular expression compiles


def _now(value: Any) -> Any:
    """``now`` read exactly as HELPBOT_NOW is (YAML reads an unquoted 2026-11-30T09:00:00+09:00 as a datetime)."""
    if isinstance(value, datetime):
        value = value.isoformat()
    if isinstance(value, str):
        try:
            env_datetime({"HELPBOT_NOW": value}, "HELPBOT_NOW")
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("HELPBOT_NOW: ")) from None
    return value


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    id: Annotated[str, _check(_ID.match, "must be 1-80 letters, digits, '.', '_' or '-'")]
    question: Annotated[str, Field(min_length=1), _NOT_BLANK, AfterValidator(str.strip)]
    expect_sources: list[Annotated[str, _NOT_BLANK, _PATTERN]] = []
    expect_phrases: list[Annotated[str, _NOT_BLANK]] = []
    max_rounds: int | None = Field(None, ge=1, le=MAX_ROUNDS_LIMIT)
    now: Annotated[str | None, BeforeValidator(_now)] = None  # ISO 8601


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a YAML file, or a UsageError (exit 2) naming the file, the case and the field."""
    import yaml

    where = str(path)
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"helpbot eval: {where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"helpbot eval: {where}: cannot read it ({exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"helpbot eval: {where}: not valid YAML{line}") from None
    if isinstance(raw, dict) and set(raw) == {"cases"}:
        raw = raw["cases"]
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"helpbot eval: {where}: expected a non-empty list of cases (or `cases:` with one)")
    cases: list[Case] = []
    for number, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise UsageError(f"helpbot eval: {where}: case #{number}: must be a mapping (id, question, expect_...)")
        name = f"case {str(item['id'])!r} (#{number})" if isinstance(item.get("id"), str | int) else f"case #{number}"
        try:
            case = Case.model_validate(item)
        except ValidationError as exc:
            raise UsageError(f"helpbot eval: {where}: {name}: {validation_problem(exc, 'case')}") from None
        if not case.expect_sources and not case.expect_phrases:
            raise UsageError(f"helpbot eval: {where}: {name}: expect_sources: give expect_sources or "
                             "expect_phrases (a case without expectations always passes)")
        if any(c.id == case.id for c in cases):
            raise UsageError(f"helpbot eval: {where}: {name}: id: used by an earlier case too")
        cases.append(case)
    return cases


def url_matches(pattern: str, url: str) -> bool:
    """``re:`` + a regular expression (searched), else a glob over the whole URL; raw or percent-decoded."""
    candidates = {url, unquote(url)}
    if pattern.startswith("re:"):
        return any(re.search(pattern[3:], u) for u in candidates)
    return any(fnmatch.fnmatchcase(u, pattern) for u in candidates)


def _comparable(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


@dataclass
class CaseResult:
    id: str
    question: str
    passed: bool
    sources_expected: int
    sources_found: int
    missing_sources: list[str]  # patterns no cited source matched ("(consulted, not cited)" when consulted)
    source_ranks: dict[str, int | None]  # pattern -> position (1-based) of the first cited source it matched
    phrases_expected: int
    phrases_found: int
    missing_phrases: list[str]
    rounds: int
    tokens: dict[str, int]
    cost_usd: float
    seconds: float
    degraded: bool
    stop: str
    error: str | None
    tags: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)


def _scored(case: Case, cited: list[str], consulted: list[str], text: str, **run: Any) -> CaseResult:
    """The case against what the answer cited, what the tools returned and the answer's text."""
    ranks = {p: next((i for i, url in enumerate(cited, 1) if url_matches(p, url)), None) for p in case.expect_sources}
    missing_sources = [p + (" (consulted, not cited)" if any(url_matches(p, url) for url in consulted) else "")
                       for p in case.expect_sources if ranks[p] is None]
    missing_phrases = [p for p in case.expect_phrases if _comparable(p) not in _comparable(text)]
    return CaseResult(
        id=case.id, question=case.question, passed=not missing_sources and not missing_phrases and not run["error"],
        sources_expected=len(case.expect_sources), sources_found=len(case.expect_sources) - len(missing_sources),
        missing_sources=missing_sources, source_ranks=ranks, phrases_expected=len(case.expect_phrases),
        phrases_found=len(case.expect_phrases) - len(missing_phrases), missing_phrases=missing_phrases, cited=cited,
        **run)


def totals(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Sums over the cases, and the mean reciprocal rank of the expected sources among the cited ones (1.0: every
    expected source cited first; 0 for one not cited) -- finer than pass/fail when tuning ranking or tags."""
    ranks = [rank for r in results for rank in r.source_ranks.values()]
    return {
        "cases": len(results),
        "passed": sum(r.passed for r in results),
        "failed": sum(not r.passed for r in results),
        "sources_expected": sum(r.sources_expected for r in results),
        "sources_found": sum(r.sources_found for r in results),
        "phrases_expected": sum(r.phrases_expected for r in results),
        "phrases_found": sum(r.phrases_found for r in results),
        "source_mrr": round(sum(1 / r for r in ranks if r) / len(ranks), 4) if ranks else None,
        "rounds": sum(r.rounds for r in results),
        "tokens": sum(r.tokens["total"] for r in results),
        "cost_usd": round(sum(r.cost_usd for r in results), 6),
        "seconds": round(sum(r.seconds for r in results), 3),
        "degraded": sum(r.degraded for r in results),
    }


AgentFactory = Callable[[int | None, str | None], "Agent"]  # (max_rounds, now), None: the default -> a fresh agent


def run_cases(cases: Sequence[Case], make_agent: AgentFactory, *, max_rounds: int | None = None,
              clock: Clock = SYSTEM_CLOCK,
              on_result: Callable[[int, CaseResult], None] | None = None) -> list[CaseResult]:
    """Each case on a fresh agent, one after the other. A run that raises fails its case only."""
    results = []
    for number, case in enumerate(cases, 1):
        agent = make_agent(case.max_rounds or max_rounds, case.now)  # a ConfigError here ends the eval (exit 2)
        began = clock.monotonic()
        try:
            answer = agent.run(case.question)
        except Exception as exc:  # one broken case (e.g. a rejected request) fails, the others still run
            result = _scored(case, [], [], "", rounds=0, tokens={**Usage().to_dict(), "total": 0}, cost_usd=0.0,
                             seconds=clock.monotonic() - began, degraded=False, stop="error", error=describe_error(exc))
        else:
            usage = answer.usage
            result = _scored(case, [s["url"] for s in answer.sources], [s["url"] for s in answer.consulted],
                             answer.text, rounds=answer.rounds, cost_usd=answer.cost_usd, tags=list(answer.tags),
                             tokens={**usage.to_dict(), "total": usage.prompt_tokens + usage.output_tokens},
                             seconds=clock.monotonic() - began, degraded=answer.degraded, stop=answer.stop, error=None,
                             tool_calls=[guard.current().name(c.name) for c in answer.tool_calls])
        results.append(result)
        if on_result is not None:
            on_result(number, result)
    return results


def report_text(results: Sequence[CaseResult]) -> str:
    width = max([len(r.id) for r in results] + [4])
    lines = [f"{'case':<{width}}  result  sources  phrases  rounds  tokens    cost      seconds"]
    for r in results:
        tokens = f"{r.tokens['total'] / 1000:.1f}k" if r.tokens["total"] >= 10_000 else str(r.tokens["total"])
        lines.append(f"{r.id:<{width}}  {'PASS' if r.passed else 'FAIL':<6}  "
                     f"{f'{r.sources_found}/{r.sources_expected}':<7}  {f'{r.phrases_found}/{r.phrases_expected}':<7}  "
                     f"{r.rounds:<6}  {tokens:<8}  ${r.cost_usd:<8.4f} {r.seconds:.1f}"
                     + ("  (degraded)" if r.degraded else "") + (f"  tags: {', '.join(r.tags)}" if r.tags else ""))
        notes = [*(f"missing source: {p}" for p in r.missing_sources),
                 *(f"missing phrase: {p}" for p in r.missing_phrases), *([f"error: {r.error}"] if r.error else [])]
        lines += [f"{'':<{width}}    {note}" for note in notes]
    t = totals(results)
    mrr = f" (MRR {t['source_mrr']:.3f})" if t["source_mrr"] is not None else ""
    lines.append(f"\ntotal: {t['passed']}/{t['cases']} passed · sources {t['sources_found']}/{t['sources_expected']}"
                 f"{mrr} · phrases {t['phrases_found']}/{t['phrases_expected']} · rounds {t['rounds']} · tokens "
                 f"{t['tokens']:,} · est. ${t['cost_usd']:.4f} · {t['seconds']:.1f} s"
                 + (f" · {t['degraded']} degraded (no AI model)" if t["degraded"] else ""))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases", metavar="CASES.yaml", help="the case file (see evals/README.md)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--case", action="append", metavar="ID", help="run only this case (repeatable)")
    parser.add_argument("--max-rounds", type=parse_rounds, metavar="N",
                        help="tool rounds for cases without max_rounds (default HELPBOT_MAX_ROUNDS or 10)")


def cmd_eval(args: argparse.Namespace) -> int:
    cases = load_cases(args.cases)
    if args.case:
        unknown = sorted(set(args.case) - {c.id for c in cases})
        if unknown:
            raise UsageError(f"helpbot eval: {args.cases}: no case with id {', '.join(unknown)}")
        cases = [c for c in cases if c.id in args.case]
    env = dict(os.environ)
    with contextlib.closing(Registry(env, server_log=guard.server_err)) as registry:
        guard.narrow(names=guard.registry_names(registry))  # the report names only these tools

    def progress(number: int, result: CaseResult) -> None:
        guard.err(f"helpbot eval: {number}/{len(cases)} {result.id}: {'PASS' if result.passed else 'FAIL'} "
                  f"({result.seconds:.1f} s)")

    def make_agent(rounds: int | None, now: str | None) -> Agent:
        return build_agent(env if now is None else {**env, "HELPBOT_NOW": now}, max_rounds=rounds)

    results = run_cases(cases, make_agent, max_rounds=args.max_rounds, on_result=progress)
    if args.json:
        report = {"file": args.cases, "cases": [asdict(r) for r in results], "total": totals(results)}
        guard.out(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        guard.out(report_text(results))
    return 0 if all(r.passed for r in results) else 1
