"""Bench: how fast ``helpbot answer`` shows 👀 and sends its first model request, from process start.

    uv run python bench/agent_startup.py [--runs 5] [--venv /tmp/helpbot-startup-venv]

The production path on a new runner: a fresh virtual environment holding helpbot and its runtime dependencies
only (``uv sync --frozen --no-dev --no-editable`` into ``--venv``), the installed ``helpbot`` console script in
its own process, Slack (the fake, over HTTP, with its real shapes) and Bedrock (the stub, over HTTP, through the
real client). Times are taken from just before the process is spawned to the moment the fake Slack receives
``reactions.add`` (👀) and the stub receives the first ``/invoke``, and to the process's exit.

Also timed: the last Slack call (the answer delivered: ✅ and its permalink) to the exit, which is what the process
does after the answer (before ``helpbot`` skipped the interpreter's teardown, about a second of runner CPU), and
the CPU the process used (user + system, from ``getrusage`` of the children), and what it had used by 👀 and by
the first request (``/proc/PID/task/*/schedstat``, read when the call arrives: steadier than the ratios). Every
time is printed beside the yardstick (``yardstick.py``: a fixed CPU loop sampled before each run) as a ratio to
it, and judged at the yardstick's reference speed.

Two cases: *no bytecode* (``PYTHONDONTWRITEBYTECODE=1`` and every ``__pycache__`` of the venv removed first: each
run compiles everything, as the first run on a new runner does) and *bytecode* (``compileall`` once, as
``UV_COMPILE_BYTECODE=1`` does at install). ``--slack-rtt S`` delays every Slack answer by S seconds, as the
network between a runner and Slack does (the default 0 measures helpbot alone, the way the targets were set);
``--clients`` instead times, in new processes of that venv with bytecode, what each way of making the Bedrock
request costs to import and build after what 👀 needs (``CLIENTS``; the anthropic SDK, which helpbot no longer
depends on, is installed into the venv for it at the version it last had, and the next run's sync removes it).
Targets (issue 24, with bytecode): 👀 ≤ 0.5 s and the first model request ≤ 1.5 s after the process starts;
without bytecode (informative) 👀 ≤ 0.8 s and the first request ≤ 2 s.

``--credentials`` chooses how the Bedrock request is signed, a comma list run interleaved (one run of each in
turn): ``api-key`` (``AWS_BEARER_TOKEN_BEDROCK``, the default), ``oidc-keys`` (the session keys help.yml's OIDC
step exports: SigV4 with keys given; that step's STS call is before the process) or ``web-identity``
(``AWS_ROLE_ARN`` + ``AWS_WEB_IDENTITY_TOKEN_FILE``: botocore asks the local STS, ``tests/fakes/sts.py``, through
its ``AWS_ENDPOINT_URL_STS``, on the first request; ``--sts-rtt S`` delays its answer).

    uv run python bench/agent_startup.py [--runs 5] [--slack-rtt 0.1] [--venv /tmp/helpbot-startup-venv]
    uv run python bench/agent_startup.py --cases bytecode --credentials api-key,web-identity [--sts-rtt 0.05]
    uv run python bench/agent_startup.py --clients [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal, get_args

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yardstick import Yardstick  # noqa: E402

from tests.fakes.bedrock import BedrockStub, answering_with_the_first_faq_hit  # noqa: E402
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, sample_workspace  # noqa: E402
from tests.fakes.sts import StsStub  # noqa: E402

Credentials = Literal["api-key", "oidc-keys", "web-identity"]

TARGETS = {"no bytecode": (0.8, 2.0), "bytecode": (0.5, 1.5)}
SDK = "anthropic[bedrock]==2.14.0"  # the version helpbot last depended on
BOTO = ("region_name='ap-northeast-1', endpoint_url='http://127.0.0.1:9', aws_access_key_id='a', "
        "aws_secret_access_key='b'")
CLIENTS = {  # what each needs beyond ``agent.cli`` and ``agent.slack.front`` (httpx2 among them)
    "anthropic SDK (AnthropicBedrock)": "import anthropic; anthropic.AnthropicBedrock(api_key='k', "
                                        "aws_region='ap-northeast-1')",
    "boto3 bedrock-runtime client": f"import boto3; boto3.client('bedrock-runtime', {BOTO})",
    "botocore bedrock-runtime client": "import botocore.session, botocore.config; botocore.session.Session()"
                                       f".create_client('bedrock-runtime', {BOTO}, config=botocore.config.Config("
                                       "retries={'total_max_attempts': 1}))",
    "httpx2 + SigV4, credentials from a botocore session (profile, OIDC)":
        "import agent.core.claude, botocore.auth, botocore.awsrequest, botocore.session, botocore.eventstream; "
        "botocore.session.Session().get_credentials()",
    "httpx2 + SigV4, keys given": "import agent.core.claude, botocore.auth, botocore.awsrequest, "
                                 "botocore.credentials, botocore.eventstream",
    "httpx2 + a Bedrock API key (helpbot's client as the bench runs it)": "import agent.core.claude, "
                                                                          "botocore.eventstream",
}


def build_venv(venv: Path) -> Path:
    """helpbot and its runtime dependencies, nothing else, as the answer job installs them. helpbot itself is
    reinstalled every time: its version does not change with the code, and uv would keep a stale copy."""
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}
    env.pop("UV_COMPILE_BYTECODE", None)
    subprocess.run(["uv", "sync", "--frozen", "--no-dev", "--no-editable", "--reinstall-package", "helpbot",
                    "--quiet"], cwd=ROOT, env=env, check=True)
    return venv / "bin" / "helpbot"


def drop_bytecode(venv: Path) -> None:
    for cache in venv.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def compile_bytecode(venv: Path) -> None:
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", str(venv / "lib")], check=True,
                   capture_output=True)


def first_time(items: list[Any], predicate: Any, stop: threading.Event, began: float) -> float | None:
    """Poll ``items`` (appended to by a server thread) until one matches; seconds since ``began``."""
    seen = 0
    while not stop.is_set():
        while seen < len(items):
            if predicate(items[seen]):
                return time.perf_counter() - began
            seen += 1
        time.sleep(0.0005)
    return None


def last_time(items: list[Any], stop: threading.Event, began: float) -> float | None:
    """Poll ``items`` until ``stop``; seconds since ``began`` at which the last of them arrived."""
    seen, last = 0, None
    while not stop.is_set():
        if len(items) > seen:
            seen, last = len(items), time.perf_counter() - began
        time.sleep(0.0005)
    return last


def process_cpu(pid: int) -> float | None:
    """Seconds of CPU a running process has used so far, all its threads (``/proc/PID/task/*/schedstat``, in
    nanoseconds: ``getrusage`` counts a child only once it has exited); None where there is no such file."""
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def credential_env(credentials: Credentials, stub: BedrockStub, sts: StsStub, token: Path) -> dict[str, str]:
    """The environment that signs the Bedrock request this way; the stub checks every SigV4 signature."""
    if credentials == "api-key":
        return {"AWS_BEARER_TOKEN_BEDROCK": "bench-key"}
    aws_files = {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                 "AWS_EC2_METADATA_DISABLED": "true"}
    if credentials == "oidc-keys":  # what aws-actions/configure-aws-credentials exports after its STS call
        stub.aws_secrets["ASIABENCHOIDCKEYS001"] = "bench-secret"
        return {**aws_files, "AWS_ACCESS_KEY_ID": "ASIABENCHOIDCKEYS001", "AWS_SECRET_ACCESS_KEY": "bench-secret",
                "AWS_SESSION_TOKEN": "bench-session-token"}
    token.write_text("eyJhbGciOiJSUzI1NiJ9.bench-oidc-token.signature")
    return {**aws_files, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/helpbot-bedrock",
            "AWS_WEB_IDENTITY_TOKEN_FILE": str(token), "AWS_ENDPOINT_URL_STS": sts.url}


def signed_as_asked(credentials: Credentials, stub: BedrockStub, sts: StsStub) -> str | None:
    """Why the run did not use the credentials it was given (None when it did)."""
    sent = stub.requests[0].headers if stub.requests else {}
    if credentials == "api-key":
        return None if sent.get("authorization") == "Bearer bench-key" else "no API key on the first request"
    if credentials == "oidc-keys":
        return None if sent.get("x-amz-security-token") == "bench-session-token" else "not the session keys"
    if len(sts.calls) != 1:
        return f"{len(sts.calls)} AssumeRoleWithWebIdentity calls, not 1"
    return None if sent.get("x-amz-security-token") == sts.calls[0].session_token else "not STS's keys"


def one_run(helpbot: Path, bytecode: bool, slack_rtt: float = 0.0, credentials: Credentials = "api-key",
            sts_rtt: float = 0.0) -> dict[str, float | None]:
    ws = sample_workspace()
    question = ws.history("C0ECSUP")[0]
    with FakeSlack(ws) as fake, BedrockStub() as stub, StsStub(stub.aws_secrets) as sts, \
            tempfile.TemporaryDirectory() as tmp:
        stub.responder = answering_with_the_first_faq_hit
        sts.delay_s = sts_rtt
        if slack_rtt:
            fake.slow("*", seconds=slack_rtt, times=10_000)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "ANTHROPIC_", "HELPBOT_", "SLACK_", "REDMINE_", "GITHUB_", "GROWI_",
                                    "VIRTUAL_ENV", "UV_"))}
        env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_USER_TOKEN=USER_TOKEN, SLACK_API_URL=fake.url,
                   ANTHROPIC_BEDROCK_BASE_URL=stub.url, AWS_REGION="ap-northeast-1",
                   **credential_env(credentials, stub, sts, Path(tmp) / "web-identity-token"))
        if not bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        stop = threading.Event()
        marks: dict[str, float | None] = {}
        child: list[subprocess.Popen[str]] = []

        def watch(name: str, items: list[Any], predicate: Any) -> None:
            marks[name] = first_time(items, predicate, stop, began)
            if marks[name] is not None and child:  # what the process had used by then (it waits for the answer)
                marks[f"{name}_cpu"] = process_cpu(child[0].pid)

        def watch_last() -> None:
            marks["answered"] = last_time(fake.requests, stop, began)

        watchers = [
            threading.Thread(target=watch, args=("eyes", fake.requests,
                                                 lambda r: r.method == "reactions.add")),
            threading.Thread(target=watch, args=("model", stub.requests, lambda r: r.path.endswith("/invoke"))),
            threading.Thread(target=watch_last),
        ]
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        for w in watchers:
            w.start()
        child.append(subprocess.Popen([str(helpbot), "answer", "--channel", "C0ECSUP", "--ts", question.ts],
                                      cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        _, stderr = child[0].communicate(timeout=120)
        marks["exit"] = time.perf_counter() - began
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        marks["cpu"] = cpu.ru_utime + cpu.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
        stop.set()
        for w in watchers:
            w.join()
        if child[0].returncode != 0:
            raise SystemExit(f"helpbot answer failed ({child[0].returncode}): {stderr.strip()[-500:]}")
        wrong = signed_as_asked(credentials, stub, sts)
        if wrong:
            raise SystemExit(f"{credentials}: {wrong}: {stderr.strip()[-500:]}")
    return marks


def clients(venv: Path, runs: int) -> None:
    """Each of ``CLIENTS`` in new processes, interleaved, beside the yardstick (medians)."""
    python = str(venv / "bin" / "python")
    subprocess.run(["uv", "pip", "install", "--quiet", "--python", python, SDK], check=True)
    compile_bytecode(venv)
    env = {"PATH": os.environ.get("PATH", ""), "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null",
           "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
    code = ("import sys, time\nimport agent.cli, agent.slack.front\nn = len(sys.modules)\nt = time.perf_counter()\n"
            "{}\nprint(time.perf_counter() - t, len(sys.modules) - n)")
    ys, times = Yardstick(), {name: [] for name in CLIENTS}
    for _ in range(runs):
        ys.sample()
        for name, statement in CLIENTS.items():
            done = subprocess.run([python, "-c", code.format(statement)], env=env, capture_output=True, text=True,
                                  check=True)
            seconds, modules = done.stdout.split()
            times[name].append((float(seconds), int(modules)))
    for name, found in times.items():
        print(f"{name}: {ys.show(statistics.median(t for t, _ in found))}, {found[0][1]} modules more")
    print(ys.line())


def report(case: str, runs: list[dict[str, float | None]], ys: Yardstick, label: str = "") -> bool:
    def med(key: str) -> float:
        values = [value for r in runs if (value := r.get(key)) is not None]
        return statistics.median(values) if values else float("nan")

    eyes_target, model_target = TARGETS[case]
    eyes, model, end = med("eyes"), med("model"), med("exit")
    after = statistics.median([r["exit"] - r["answered"] for r in runs if r["exit"] and r["answered"]])
    ok = ys.at_reference(eyes) <= eyes_target and ys.at_reference(model) <= model_target
    print(f"{case}{label}, median of {len(runs)} (at the reference speed in brackets):\n"
          f"  👀 {ys.show(eyes)} ({ys.at_reference(eyes):.2f} s; target ≤ {eyes_target} s) · first model request "
          f"{ys.show(model)} ({ys.at_reference(model):.2f} s; ≤ {model_target} s) -> {'PASS' if ok else 'FAIL'}\n"
          f"  exit {ys.show(end)} · last Slack call to exit {ys.show(after)} · CPU {ys.show(med('cpu'))}\n"
          f"  the process's CPU up to 👀 {ys.show(med('eyes_cpu'))}, up to the first model request "
          f"{ys.show(med('model_cpu'))}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--venv", type=Path, default=Path("/tmp/helpbot-startup-venv"))
    parser.add_argument("--slack-rtt", type=float, default=0.0, help="seconds added to every Slack answer")
    parser.add_argument("--cases", default="no bytecode,bytecode", help="which of: no bytecode, bytecode")
    parser.add_argument("--clients", action="store_true", help="time the ways of making the Bedrock request")
    parser.add_argument("--credentials", default="api-key",
                        help=f"how the Bedrock request is signed, interleaved: of {', '.join(get_args(Credentials))}")
    parser.add_argument("--sts-rtt", type=float, default=0.0, help="seconds before the local STS answers")
    args = parser.parse_args(argv)
    ways: list[Credentials] = [way for way in get_args(Credentials) if way in args.credentials.split(",")]
    if not ways or len(ways) != len(args.credentials.split(",")):
        parser.error(f"--credentials: a comma list of {', '.join(get_args(Credentials))}")
    helpbot = build_venv(args.venv)
    if args.clients:
        clients(args.venv, args.runs)
        return 0
    ys = Yardstick()
    ok = True
    rtt = args.slack_rtt
    if rtt:
        print(f"every Slack answer delayed {rtt * 1000:.0f} ms (targets are for helpbot alone: informative)")
    cases = args.cases.split(",")
    for case in ("no bytecode", "bytecode"):
        if case not in cases:
            continue
        bytecode = case == "bytecode"
        if bytecode:
            compile_bytecode(args.venv)
            one_run(helpbot, bytecode=True)  # warm the file cache
        else:
            drop_bytecode(args.venv)
        runs: dict[Credentials, list[dict[str, float | None]]] = {way: [] for way in ways}
        for _ in range(args.runs):
            for way in ways:
                ys.sample()
                runs[way].append(one_run(helpbot, bytecode=bytecode, slack_rtt=rtt, credentials=way,
                                         sts_rtt=args.sts_rtt))
        for way in ways:
            ok &= report(case, runs[way], ys, "" if ways == ["api-key"] else f", {way}")
    print(ys.line())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
