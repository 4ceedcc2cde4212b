"""Bench: does question tagging change the answers? The eval cases, run with and without the example tags.

    uv run python bench/tagging_eval.py [CASES.yaml] [--config helpbot.example.toml] [--json]

Four runs of the same cases (default ``evals/faq.yaml``) through ``agent.evals``, each scored as ``helpbot eval``
scores them (pass, expected sources cited, MRR of the expected sources among the cited ones, phrases):

- degraded, tags off / on: no model. The answer is faq_search's top 5 for the question; with tags, faq_search
  gets the tags' ``faq_tags`` as boosts. This measures the FAQ boost on the real index, nothing else.
- scripted, tags off / on: a scripted model that does what the system prompt says: it calls faq_search with the
  question, ``limit=1``, and the ``tags=[...]`` the tag prompt asks for (none without tags), then answers with the
  one hit, citing it. Stricter (top-1 instead of top-5) and end to end (prompt -> model -> tool arguments ->
  ranking -> citation), but it is still the boost being measured: a scripted model cannot show whether a real
  model uses the hints and "search first" lines well. For that, run ``helpbot eval`` with credentials, once with
  ``HELPBOT_CONFIG`` pointing at the tags and once at an empty file, and compare.

It also reports how the questions were tagged (by keywords, or how many would have consulted the summary model).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from agent.build import build_agent
from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tags import TAGGER_SYSTEM, load_tag_config, tag_question
from agent.core.tools import RegistryTools
from agent.evals import CaseResult, load_cases, run_cases, totals
from mcp_lib import Registry
from mcp_lib.clock import SYSTEM_CLOCK
from tests.fakes.model import Request, ScriptedModel, calls

REPO = Path(__file__).resolve().parents[1]
_PASS_TAGS = re.compile(r"pass tags=(\[.*?\])")


def follows_the_prompt(request: Request) -> Any:
    """Search the FAQ as the system prompt says (with its tags, if any), then answer with the top hit."""
    if request.system_text.startswith(TAGGER_SYSTEM):  # asked to choose tags: chooses none (keywords stand)
        return '{"tags": []}'
    if request.round == 1:
        question = request.messages[-1]["content"][0]["text"]
        arguments: dict[str, Any] = {"query": question, "limit": 1}
        if wanted := _PASS_TAGS.search(request.system_text):
            arguments["tags"] = json.loads(wanted.group(1))
        return calls(("faq_search", arguments))
    result = json.loads(request.tool_results()[0]["content"])
    if not result.get("items"):
        return "FAQ に該当する項目はありませんでした。"
    hit = result["items"][0]
    return f"{hit['title']}\n\n{hit['snippet']}\n\n出典: [{hit['title']}]({hit['url']})"


def _short(urls: list[str]) -> str:
    return " ".join(u.removeprefix("faq://").removeprefix("https://")[:30] for u in urls)


def scripted_agent(env: dict[str, str], tagged: bool) -> Agent:
    tools = RegistryTools(Registry(env))
    model = ScriptedModel(follows_the_prompt, record=False)
    return Agent(model, tools, Settings(max_rounds=2), tags=load_tag_config(env) if tagged else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="?", default=str(REPO / "evals" / "faq.yaml"))
    parser.add_argument("--config", default=str(REPO / "helpbot.example.toml"), help="the helpbot.toml with tags")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    cases = load_cases(args.cases)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "ANTHROPIC_", "HELPBOT_", "SLACK_", "REDMINE_", "GITHUB_", "GROWI_"))}
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as empty:
        empty.write("# no tags\n")
    envs = {False: {**base, "HELPBOT_CONFIG": empty.name}, True: {**base, "HELPBOT_CONFIG": args.config}}

    config = load_tag_config(envs[True])
    if config is None:
        print(f"{args.config} defines no [[tags]]", file=sys.stderr)
        return 2
    taggings = [tag_question(config, c.question, model=None, settings=Settings(), clock=SYSTEM_CLOCK) for c in cases]

    runs: dict[str, list[CaseResult]] = {}
    for mode in ("degraded", "scripted"):
        for tagged in (False, True):
            env = envs[tagged]
            if mode == "degraded":
                results = run_cases(cases, lambda rounds, now, env=env: build_agent(env, max_rounds=rounds))
            else:
                results = run_cases(cases, lambda rounds, now, env=env, tagged=tagged: scripted_agent(env, tagged))
            runs[f"{mode}, tags {'on' if tagged else 'off'}"] = results
    Path(empty.name).unlink()

    summary = {name: totals(results) for name, results in runs.items()}
    if args.json:
        print(json.dumps({"cases": args.cases, "config": args.config, "runs": summary,
                          "tagging": [{"id": c.id, "tags": t.names, "ambiguous": t.ambiguous}
                                      for c, t in zip(cases, taggings, strict=True)]},
                         ensure_ascii=False, indent=2))
        return 0
    print(f"{len(cases)} cases from {args.cases}; tags from {args.config}\n")
    print(f"{'run':<22} {'passed':>7} {'sources':>8} {'MRR':>6} {'phrases':>8}")
    for name, t in summary.items():
        print(f"{name:<22} {t['passed']:>3}/{t['cases']:<3} {t['sources_found']:>4}/{t['sources_expected']:<3} "
              f"{t['source_mrr']:>6.3f} {t['phrases_found']:>4}/{t['phrases_expected']:<3}")
    tagged = sum(bool(t.tags) for t in taggings)
    ambiguous = sum(t.ambiguous is not None for t in taggings)
    print(f"\ntagging: {tagged}/{len(cases)} questions tagged by keywords; {ambiguous} ambiguous (would consult the "
          "summary model)")
    for case, tagging in zip(cases, taggings, strict=True):
        print(f"  {case.id:<28} {', '.join(tagging.names) or '-'}"
              + (f"  ({tagging.ambiguous})" if tagging.ambiguous else ""))
    for mode in ("degraded", "scripted"):
        off, on = runs[f"{mode}, tags off"], runs[f"{mode}, tags on"]
        diff = [f"{a.id}: {_short(a.cited)} -> {_short(b.cited)}" for a, b in zip(off, on, strict=True)
                if a.cited != b.cited]
        print(f"\n{mode}: cited sources changed by the tags in {len(diff)} of {len(cases)} cases"
              + "".join(f"\n  {line}" for line in diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())
