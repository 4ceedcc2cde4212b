"""``helpbot eval``: case files, scoring, pass/fail counts, the JSON shape, exit codes; degraded and with a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.errors import ModelRequestError
from agent.evals import load_cases, run_cases, totals, url_matches
from tests.fakes import bedrock as stub_lib
from tests.fakes.bedrock import BedrockStub, answering_with_the_first_faq_hit
from tests.fakes.clock import FakeClock
from tests.fakes.front import one_line_error
from tests.fakes.loop import FakeTools
from tests.fakes.model import Request, ScriptedModel, calls

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "evals" / "faq.yaml"


@pytest.fixture(autouse=True)
def in_tmp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray ./helpbot.toml


def cases_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- the real entry point, degraded mode (no credentials) -------------------------------------------------------
def test_the_shipped_faq_cases_pass_with_zero_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(SHIPPED)]) == 0
    out, err = capsys.readouterr()
    cases = load_cases(SHIPPED)
    assert len(cases) >= 10
    assert out.count(" PASS ") == len(cases) and " FAIL " not in out
    assert f"total: {len(cases)}/{len(cases)} passed" in out and "degraded (no AI model)" in out
    assert f"helpbot eval: {len(cases)}/{len(cases)} " in err  # progress on stderr


def test_json_shape_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cases_file(tmp_path, """
cases:
  - id: good
    question: CSVを取り込んだら文字化けした
    expect_sources: ["*/csv-encoding*"]
    expect_phrases: [shift_jis]            # case-insensitive: the answer says Shift_JIS
  - id: half
    question: JANコードの先頭の0がExcelで消える
    expect_sources: ["faq://csv-leading-zero", "re:^https://redmine\\\\.example/"]
    expect_phrases: [指数表記, 存在しない言葉]
    max_rounds: 2
""")
    assert main(["eval", path, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"file", "cases", "total"} and data["file"] == path
    good, half = data["cases"]
    assert set(good) == {"id", "question", "passed", "sources_expected", "sources_found", "missing_sources",
                         "source_ranks", "phrases_expected", "phrases_found", "missing_phrases", "rounds", "tokens",
                         "cost_usd", "seconds", "degraded", "stop", "error", "tags", "cited", "tool_calls"}
    assert good["passed"] is True and good["sources_found"] == 1 and good["phrases_found"] == 1
    assert good["source_ranks"] == {"*/csv-encoding*": 1} and good["degraded"] is True
    assert good["tool_calls"] == ["faq_search"] and good["cited"][0] == "faq://csv-encoding"
    assert set(good["tokens"]) == {"input_tokens", "output_tokens", "cache_read_input_tokens",
                                   "cache_creation_input_tokens", "total"}
    assert half["passed"] is False
    assert (half["sources_found"], half["sources_expected"], half["phrases_found"], half["phrases_expected"]) == (
        1, 2, 1, 2)
    assert half["missing_sources"] == ["re:^https://redmine\\.example/"]
    assert half["missing_phrases"] == ["存在しない言葉"]
    assert data["total"] == {**data["total"], "cases": 2, "passed": 1, "failed": 1, "sources_expected": 3,
                             "sources_found": 2, "phrases_expected": 3, "phrases_found": 2, "rounds": 0,
                             "tokens": 0, "cost_usd": 0.0, "degraded": 2}
    assert 0 < data["total"]["source_mrr"] < 1


def test_text_report_names_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cases_file(tmp_path, "- id: x\n  question: 注文の時刻が9時間ずれている\n"
                                "  expect_sources: ['*/nope*']\n  expect_phrases: [UTC]\n")
    assert main(["eval", path]) == 1
    out = capsys.readouterr().out
    assert "x     FAIL    0/1      1/1" in out and "missing source: */nope*" in out
    assert "total: 0/1 passed · sources 0/1 (MRR 0.000) · phrases 1/1" in out


def test_case_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(SHIPPED), "--case", "csv-mojibake", "--case", "order-time-9h", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)["cases"]] == ["csv-mojibake", "order-time-9h"]
    assert main(["eval", str(SHIPPED), "--case", "nope"]) == 2
    assert "no case with id nope" in one_line_error(capsys)


# -- bad case files: one line naming the case and the field, exit 2 ----------------------------------------------
@pytest.mark.parametrize(("text", "words"), [
    ("cases: [", "not valid YAML at line"),
    ("just a string", "expected a non-empty list of cases"),
    ("cases: []", "expected a non-empty list of cases"),
    ("cases: 3", "expected a non-empty list of cases"),
    ("- id: a\n  expect_phrases: [x]", "case 'a' (#1): question: Field required"),
    ("- question: q\n  expect_phrases: [x]", "case #1: id: Field required"),
    ("- id: a\n  question: q\n  expect_phrases: [x]\n- id: b\n  question: q\n  expect_source: [x]",
     "case 'b' (#2): expect_source: Extra inputs are not permitted"),
    ("- id: a\n  question: q", "case 'a' (#1): expect_sources: give expect_sources or expect_phrases"),
    ("- id: a\n  question: q\n  expect_sources: ['re:(']", "case 'a' (#1): expect_sources.0: Value error, 're:('"),
    ("- id: a\n  question: q\n  expect_phrases: x", "case 'a' (#1): expect_phrases: Input should be a valid list"),
    ("- id: a\n  question: q\n  expect_phrases: ['']", "case 'a' (#1): expect_phrases.0: Value error, is blank"),
    ("- id: a\n  question: '  '\n  expect_phrases: [x]", "case 'a' (#1): question: Value error, is blank"),
    ("- id: a\n  question: q\n  expect_phrases: [x]\n  max_rounds: 0", "case 'a' (#1): max_rounds: Input should"),
    ("- id: a b\n  question: q\n  expect_phrases: [x]", "case 'a b' (#1): id: Value error"),
    ("- id: a\n  question: q\n  expect_phrases: [x]\n- id: a\n  question: r\n  expect_phrases: [y]",
     "case 'a' (#2): id: used by an earlier case too"),
    ("- [not, a, mapping]", "case #1: must be a mapping"),
])
def test_bad_case_files_are_one_line_and_exit_2(text: str, words: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = cases_file(tmp_path, text)
    assert main(["eval", path]) == 2
    error = one_line_error(capsys)
    assert error.startswith(f"helpbot eval: {path}: ") and words in error, error


def test_a_missing_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: no such file" in one_line_error(capsys)


def test_numeric_ids_are_accepted_as_text(tmp_path: Path) -> None:
    [case] = load_cases(cases_file(tmp_path, "- id: 12\n  question: q\n  expect_phrases: [x]"))
    assert case.id == "12"


# -- scoring, with a scripted model --------------------------------------------------------------------------------
def test_url_patterns() -> None:
    assert url_matches("*/stock-sync-delay*", "faq://stock-sync-delay")
    assert url_matches("*/stock-sync-delay*", "https://github.com/acme/helpbot/blob/abc/faq/stock-sync-delay.md")
    assert not url_matches("faq://stock", "faq://stock-sync-delay")  # a glob matches the whole URL
    assert url_matches("re:issues/12\\d$", "https://redmine.example/issues/123")
    assert not url_matches("re:issues/12\\d$", "https://redmine.example/issues/1234")
    assert url_matches("https://growi.example/在庫/*", "https://growi.example/%E5%9C%A8%E5%BA%AB/%E6%89%8B%E9%A0%86")


TOOLS = {
    "redmine_search": lambda args: [{"title": "#123 在庫ずれ", "url": "https://redmine.example/issues/123"},
                                    {"title": "#124 在庫", "url": "https://redmine.example/issues/124"}],
}


def investigating(request: Request) -> Any:
    if "壊れて" in request.messages[0]["content"][0]["text"]:  # a rejected first request raises
        raise ModelRequestError("bedrock rejected the request: 400 ValidationException", 400)
    if request.round == 1:
        return calls(("redmine_search", {"query": request.messages[-1]["content"][0]["text"]}))
    return "ＵＴＣ で保存しています。詳しくは https://redmine.example/issues/123 を参照。"


def test_pass_fail_counting_through_a_scripted_agent(tmp_path: Path) -> None:
    cases = load_cases(cases_file(tmp_path, """
- id: cited
  question: 在庫がずれる
  expect_sources: ["https://redmine.example/issues/123"]
  expect_phrases: [utc]                      # NFKC + case-insensitive: the answer writes ＵＴＣ
- id: consulted-not-cited
  question: 在庫
  expect_sources: ["*/issues/124"]
- id: broken
  question: 壊れて
  expect_phrases: [x]
- id: rounds
  question: 在庫
  expect_phrases: [utc]
  max_rounds: 3
"""))
    rounds_asked: list[int | None] = []

    def make_agent(max_rounds: int | None, now: str | None) -> Agent:
        rounds_asked.append(max_rounds)
        return Agent(ScriptedModel(investigating), FakeTools(TOOLS), Settings(max_rounds=max_rounds or 10),
                     clock=FakeClock())

    seen: list[str] = []
    results = run_cases(cases, make_agent, max_rounds=5, on_result=lambda n, r: seen.append(f"{n}:{r.id}"))
    cited, consulted, broken, rounds = results
    assert cited.passed and cited.sources_found == 1 and cited.rounds == 1 and not cited.degraded
    assert cited.tokens["total"] > 0 and cited.cost_usd > 0
    assert not consulted.passed and consulted.missing_sources == ["*/issues/124 (consulted, not cited)"]
    assert not broken.passed and broken.stop == "error" and "400 ValidationException" in (broken.error or "")
    assert rounds.passed  # the case after a broken one still ran
    assert rounds_asked == [5, 5, 5, 3] and seen == ["1:cited", "2:consulted-not-cited", "3:broken", "4:rounds"]
    t = totals(results)
    assert (t["cases"], t["passed"], t["failed"]) == (4, 2, 2)
    assert (t["sources_found"], t["sources_expected"], t["phrases_found"], t["phrases_expected"]) == (1, 2, 2, 3)
    assert t["source_mrr"] == 0.5 and t["degraded"] == 0


# -- with a model behind the real entry point (the Bedrock stand-in) -----------------------------------------------
def test_a_real_model_run_reports_rounds_tokens_and_cost(stub: BedrockStub, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = answering_with_the_first_faq_hit  # searches "Shopify 在庫同期 遅延", cites the first hit
    path = cases_file(tmp_path, "- id: s\n  question: Shopifyの在庫同期が遅い\n"
                                "  expect_sources: ['*/stock-sync-delay*']\n  expect_phrases: [連携ログ]\n"
                                "  max_rounds: 3\n")
    assert main(["eval", path, "--json"]) == 0
    [case] = json.loads(capsys.readouterr().out)["cases"]
    assert case["passed"] and not case["degraded"] and case["rounds"] == 1
    assert case["tokens"]["total"] == 1200 + 80 + 300 + 120 + 2900 + 1500 and case["cost_usd"] > 0
    assert "at most 3 rounds" in stub.requests[0].body["system"][0]["text"]



def test_a_case_sets_its_own_now_for_relative_dates(stub: BedrockStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """先週 is resolved from the prompt's date context: a case's ``now`` overrides HELPBOT_NOW for that case only."""
    def last_week_from_the_prompt(model_id: str, body: dict[str, Any]) -> stub_lib.Reply:
        system = body["system"][0]["text"]
        [line] = [line for line in system.splitlines() if line.startswith("- 先週 last week:")]
        return stub_lib.text("先週は " + line.split(": ", 1)[1].split(" (")[0] + " です。")

    stub.responder = last_week_from_the_prompt
    monkeypatch.setenv("HELPBOT_NOW", "2026-11-30T09:00")  # a Monday, in HELPBOT_TIMEZONE (Asia/Tokyo)
    path = cases_file(tmp_path, """
- id: own-now
  question: 先週の障害は？
  now: "2026-12-09T23:30:00+00:00"             # Thursday 10 Dec 08:30 in Tokyo
  expect_phrases: ["2026-11-30(月) – 2026-12-06(日)"]
- id: yaml-datetime
  question: 先週の障害は？
  now: 2026-01-05T10:00:00+09:00               # unquoted: YAML reads it as a datetime
  expect_phrases: ["2025-12-29(月) – 2026-01-04(日)"]
- id: env-now
  question: 先週の障害は？
  expect_phrases: ["2026-11-23(月) – 2026-11-29(日)"]
""")
    assert main(["eval", path, "--json"]) == 0, capsys.readouterr().out
    assert [c["passed"] for c in json.loads(capsys.readouterr().out)["cases"]] == [True, True, True]


def test_a_case_with_an_unreadable_now_is_one_line_and_exit_2(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = cases_file(tmp_path, "- id: x\n  question: 先週は？\n  expect_phrases: [a]\n  now: last tuesday\n")
    assert main(["eval", path]) == 2
    err = one_line_error(capsys)
    assert "now" in err and "ISO 8601" in err


def test_a_hostile_models_tool_names_reach_the_report_only_as_registered_names(tmp_path: Path) -> None:
    from agent import guard

    cases = load_cases(cases_file(tmp_path, "- id: hostile\n  question: 在庫\n  expect_phrases: [x]\n"))

    def hostile(request: Request) -> Any:
        if request.round == 1:
            return calls(("redmine_search", {"query": "在庫"}), ("暗証番号は4711", {}), ("e69a97e8a8bc", {}))
        return "以上"

    def make_agent(max_rounds: int | None, now: str | None) -> Agent:
        return Agent(ScriptedModel(hostile), FakeTools(TOOLS), Settings(max_rounds=max_rounds or 10),
                     clock=FakeClock())

    with guard.installed(guard.Guard.from_env({}, names=["redmine_search"])):
        (result,) = run_cases(cases, make_agent)
    assert result.tool_calls == ["redmine_search", "unknown_tool", "unknown_tool"]

